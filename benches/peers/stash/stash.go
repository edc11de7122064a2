// Package stash reads and writes the stash annotation in the format
// katalog writes (docs/reference/conversion.md, "The stash annotation"), so that an
// object converted by this webhook and one converted by katalog carry the
// same annotation, byte for byte:
//
//	katalog.dev/stash: '{"v1":{"spec.timeoutSeconds":600,"!absent":["spec.concurrencyPolicy"]}}'
//
// One section per version, holding the stashed fields of that version by
// path in the order they were stashed, and an "!absent" list of fields that
// were absent (so that a default is not applied on the way back). Sections
// of other versions travel untouched; empty sections and an empty
// annotation are removed. A section written while the object had a
// resourceVersion records it under "!resourceVersion", and a section
// recorded at another resourceVersion is not taken back (katalog's guard
// against a stale stash).
//
// Keys keep their order (katalog's JSON objects do), which Go's maps do
// not: hence the small ordered object below instead of
// map[string]interface{}.
package stash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotation is katalog's default stash annotation.
const Annotation = "katalog.dev/stash"

// annotationsLimit is the apiserver's limit on the total size of an
// object's annotations (keys plus values).
const annotationsLimit = 256 * 1024

const absent = "!absent"

// at records the resourceVersion a section was written at.
const at = "!resourceVersion"

// Found says what Take found for a field.
type Found int

const (
	// Nothing: the field was not stashed.
	Nothing Found = iota
	// Value: the field was stashed; its JSON is returned.
	Value
	// Absent: the field was recorded as absent.
	Absent
)

// Stash is the stash annotation of one object being converted, parsed on
// first use.
type Stash struct {
	original   string
	hasOrig    bool
	loaded     bool
	content    *object
	sections   map[string]*object
	annotation string
	// now is the object's resourceVersion ("" when it has none).
	now string
}

// For returns the stash of an object with these annotations (read lazily).
func For(meta *metav1.ObjectMeta) *Stash {
	s := &Stash{annotation: Annotation, now: meta.ResourceVersion}
	s.original, s.hasOrig = meta.Annotations[Annotation]
	return s
}

func (s *Stash) load() error {
	if s.loaded {
		return nil
	}
	s.content = &object{vals: map[string]json.RawMessage{}}
	s.sections = map[string]*object{}
	if s.hasOrig {
		o, err := parseObject([]byte(s.original))
		if err != nil {
			return fmt.Errorf("annotation `%s` is not a stash the engine wrote (it must be a JSON object); remove it or fix it", s.annotation)
		}
		s.content = o
	}
	s.loaded = true
	return nil
}

func (s *Stash) section(name string) (*object, error) {
	if err := s.load(); err != nil {
		return nil, err
	}
	if sec, ok := s.sections[name]; ok {
		return sec, nil
	}
	sec := &object{vals: map[string]json.RawMessage{}}
	if raw, ok := s.content.vals[name]; ok {
		if parsed, err := parseObject(raw); err == nil {
			sec = parsed
		}
	}
	s.content.set(name, nil) // keeps its place, or appends
	s.sections[name] = sec
	return sec, nil
}

// Put stashes value under key in the section of version.
func (s *Stash) Put(version, key string, value any) error {
	sec, err := s.section(version)
	if err != nil {
		return err
	}
	raw, err := marshal(value)
	if err != nil {
		return err
	}
	sec.set(key, raw)
	s.stamp(sec)
	return nil
}

// stamp records in a section the resourceVersion it is written at.
func (s *Stash) stamp(sec *object) {
	if s.now == "" {
		sec.remove(at)
		return
	}
	raw, _ := marshal(s.now)
	sec.set(at, raw)
}

// MarkAbsent records that key was absent.
func (s *Stash) MarkAbsent(version, key string) error {
	sec, err := s.section(version)
	if err != nil {
		return err
	}
	var list []json.RawMessage
	if raw, ok := sec.vals[absent]; ok {
		if json.Unmarshal(raw, &list) != nil {
			return nil // not a list: katalog leaves it alone too
		}
	}
	k, _ := marshal(key)
	list = append(list, k)
	raw, err := marshal(list)
	if err != nil {
		return err
	}
	sec.set(absent, raw)
	s.stamp(sec)
	return nil
}

// Take removes key from the section of version and says what was there.
func (s *Stash) Take(version, key string) (Found, json.RawMessage, error) {
	sec, err := s.section(version)
	if err != nil {
		return Nothing, nil, err
	}
	if err := s.stale(sec); err != nil {
		return Nothing, nil, err
	}
	if raw, ok := sec.vals[key]; ok {
		sec.remove(key)
		return Value, raw, nil
	}
	if raw, ok := sec.vals[absent]; ok {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) == nil {
			for i, item := range list {
				var name string
				if json.Unmarshal(item, &name) == nil && name == key {
					list = append(list[:i], list[i+1:]...)
					if len(list) == 0 {
						sec.remove(absent)
					} else {
						raw, _ = marshal(list)
						sec.set(absent, raw)
					}
					return Absent, nil, nil
				}
			}
		}
	}
	return Nothing, nil, nil
}

// stale is the error for a section written at another resourceVersion,
// worded as katalog words it.
func (s *Stash) stale(sec *object) error {
	raw, ok := sec.vals[at]
	if !ok {
		return nil
	}
	var written string
	if json.Unmarshal(raw, &written) != nil || written == s.now {
		return nil
	}
	var fields []string
	for _, k := range sec.keys {
		if len(k) > 0 && k[0] == '!' {
			continue
		}
		fields = append(fields, "`"+k+"`")
	}
	if len(fields) > 5 {
		more := len(fields) - 5
		fields = append(fields[:5], fmt.Sprintf("and %d more", more))
	}
	now := "this object has no resourceVersion"
	if s.now != "" {
		now = "this object is at resourceVersion " + s.now
	}
	return fmt.Errorf("annotation `%s` was written when the object was read at resourceVersion %s, but %s; it may hold fields removed since, so it is not restored: read the object again, or remove the annotation to drop them (%s)",
		s.annotation, written, now, strings.Join(fields, ", "))
}

// WriteBack puts the annotation on meta (a copy of the annotations: the
// map may be shared with the source object), or removes it if it is empty.
func (s *Stash) WriteBack(meta *metav1.ObjectMeta) error {
	if !s.loaded {
		return nil
	}
	for name, sec := range s.sections {
		raw, err := sec.marshal()
		if err != nil {
			return err
		}
		s.content.vals[name] = raw
	}
	kept := &object{vals: map[string]json.RawMessage{}}
	for _, k := range s.content.keys {
		v := s.content.vals[k]
		if isEmptyObject(v) || onlyStamped(v) {
			continue
		}
		kept.set(k, v)
	}
	ann := make(map[string]string, len(meta.Annotations)+1)
	for k, v := range meta.Annotations {
		ann[k] = v
	}
	if len(kept.keys) == 0 {
		delete(ann, s.annotation)
	} else {
		text, err := kept.marshal()
		if err != nil {
			return err
		}
		ann[s.annotation] = string(text)
	}
	size := 0
	for k, v := range ann {
		size += len(k) + len(v)
	}
	if len(ann) == 0 {
		ann = nil
	}
	meta.Annotations = ann
	if size > annotationsLimit {
		return fmt.Errorf("stashing makes the object's annotations %d bytes, over the apiserver's limit of %d (256 KiB)", size, annotationsLimit)
	}
	return nil
}

// object is a JSON object that keeps the order of its keys.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	o := &object{vals: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("not a JSON object")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		o.set(key, raw)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	return o, nil
}

// set replaces the value of key in place, or appends key.
func (o *object) set(key string, raw json.RawMessage) {
	if _, ok := o.vals[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.vals[key] = raw
}

func (o *object) remove(key string) {
	if _, ok := o.vals[key]; !ok {
		return
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
}

func (o *object) marshal() (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		if err := json.Compact(&b, o.vals[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// onlyStamped: a section left with only its resourceVersion is empty.
func onlyStamped(raw json.RawMessage) bool {
	o, err := parseObject(raw)
	return err == nil && len(o.keys) == 1 && o.keys[0] == at
}

func isEmptyObject(raw json.RawMessage) bool {
	var b bytes.Buffer
	return json.Compact(&b, raw) == nil && b.String() == "{}"
}

// marshal writes JSON as katalog (serde_json) does: no HTML escaping.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
