// The cel-go oracle: evaluates CEL expressions in the environment a
// ValidatingAdmissionPolicy gets from k8s.io/apiserver (the version pinned in
// go.mod), so that katalog's answers can be compared with the apiserver's.
//
// With --math-and-base64, cel-go's math and encoders extensions are added
// (katalog has them, the apiserver does not).
//
// With --tables DIR, it prints the expressions of the library test tables
// in DIR (k8s.io/apiserver/pkg/cel/library/*_test.go) with its answers
// instead: testenv/celoracle/tables.sh writes testdata/cel/library-cases.jsonl.
//
// With --cost (alone or after --math-and-base64), each answer is cel-go's
// cost of the expression instead: the static estimate of the type checker
// (k8s.io/apiserver's library.CostEstimator with no size estimator, so every
// dyn value has an unknown size, as a VAP's variables do) and the runtime
// cost of one evaluation over the bindings (also after an evaluation error):
//
//	{"min": <estimate>, "max": <estimate>, "cost": <runtime cost>}
//	{"min": ..., "max": ..., "cost": ..., "error": "<message>", "stage": "eval"}
//	{"error": "<message>", "stage": "compile"}
//
// Input, on stdin, one JSON object a line:
//
//	{"expr": "object.spec.replicas > 1", "bindings": {"object": {...}}}
//
// Output, on stdout, one JSON object a line, in the same order:
//
//	{"value": <json>, "type": "<cel type>", "cost": <runtime cost>}
//	{"error": "<message>", "stage": "compile"|"eval"|"result", "type": "<cel type>"}
//
// "result" is a value katalog cannot return as JSON either (a quantity, an
// IP, a non-finite double, a map with non-string keys, ...).
// Values cross as katalog converts them (docs/cel.md): JSON integers that
// fit int64 are int, larger ones uint, other numbers double; results back
// with uint as an integer, bytes as base64, timestamps as RFC 3339 in UTC,
// durations as Go durations, optionals as their value or null.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// variables are the names a VAP binds (object, oldObject, request, params,
// namespaceObject, variables) and the ones katalog adds (self, element,
// elementIndex), all declared dyn as katalog's values are untyped JSON.
var variables = []string{
	"object", "oldObject", "request", "params", "namespaceObject", "variables",
	"self", "element", "elementIndex",
}

// Oracle compiles and caches programs in the VAP environment.
type Oracle struct {
	env      *cel.Env
	version  string
	programs map[string]compiled
}

type compiled struct {
	prg cel.Program
	err error
}

// NewOracle builds the environment: the Kubernetes base environment at the
// default compatibility version (what the apiserver uses for new
// expressions), extended with the VAP variables and the JSON Patch library
// (a mutating policy's, as katalog's mutations use it).
//
// With extensions, cel-go's math and base64 (encoders) extensions are added:
// katalog has them (kube-cel registers them), Kubernetes does not; the
// differential test compares with this environment what the apiserver's
// refuses.
func NewOracle(extensions bool) (*Oracle, error) {
	ver := environment.DefaultCompatibilityVersion()
	opts := []cel.EnvOption{}
	if extensions {
		opts = append(opts, ext.Math(), ext.Encoders())
	}
	for _, name := range variables {
		opts = append(opts, cel.Variable(name, cel.DynType))
	}
	opts = append(opts, library.JSONPatch())
	set, err := environment.MustBaseEnvSet(ver).Extend(
		environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts},
		environment.StrictCostOpt,
	)
	if err != nil {
		return nil, err
	}
	return &Oracle{env: set.NewExpressionsEnv(), version: ver.String(), programs: map[string]compiled{}}, nil
}

// Program compiles expr once.
func (o *Oracle) Program(expr string) (cel.Program, error) {
	if c, ok := o.programs[expr]; ok {
		return c.prg, c.err
	}
	var c compiled
	ast, iss := o.env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		c.err = iss.Err()
	} else {
		c.prg, c.err = o.env.Program(ast)
	}
	if len(o.programs) > 100000 {
		o.programs = map[string]compiled{}
	}
	o.programs[expr] = c
	return c.prg, c.err
}

// programFor compiles c.Expr as Program does, with each name c binds
// beyond variables declared dyn too (cel-spec's cases bind names of their
// own, such as str_var); such programs are not cached.
func (o *Oracle) programFor(c Case) (cel.Program, error) {
	var extra []string
	for name := range c.Bindings {
		if !slices.Contains(variables, name) {
			extra = append(extra, name)
		}
	}
	if len(extra) == 0 {
		return o.Program(c.Expr)
	}
	sort.Strings(extra)
	opts := make([]cel.EnvOption, 0, len(extra))
	for _, name := range extra {
		opts = append(opts, cel.Variable(name, cel.DynType))
	}
	env, err := o.env.Extend(opts...)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(c.Expr)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	return env.Program(ast)
}

// Case is one input line.
type Case struct {
	Expr     string                     `json:"expr"`
	Bindings map[string]json.RawMessage `json:"bindings"`
}

// Answer is one output line.
type Answer struct {
	Value json.RawMessage `json:"value,omitempty"`
	Type  string          `json:"type,omitempty"`
	Cost  *uint64         `json:"cost,omitempty"`
	Error string          `json:"error,omitempty"`
	Stage string          `json:"stage,omitempty"`
}

// CostAnswer is one output line of --cost.
type CostAnswer struct {
	Min   *uint64 `json:"min,omitempty"`
	Max   *uint64 `json:"max,omitempty"`
	Cost  *uint64 `json:"cost,omitempty"`
	Error string  `json:"error,omitempty"`
	Stage string  `json:"stage,omitempty"`
}

// Cost answers one case of --cost: the estimate cel-go's checker gives the
// expression with the Kubernetes cost estimator (the one the apiserver
// uses for CRD validation rules), and the runtime cost of evaluating it.
func (o *Oracle) Cost(c Case) CostAnswer {
	ast, iss := o.env.Compile(c.Expr)
	if iss != nil && iss.Err() != nil {
		return CostAnswer{Error: iss.Err().Error(), Stage: "compile"}
	}
	est, err := o.env.EstimateCost(ast, &library.CostEstimator{})
	if err != nil {
		return CostAnswer{Error: err.Error(), Stage: "estimate"}
	}
	ans := CostAnswer{Min: &est.Min, Max: &est.Max}
	prg, err := o.Program(c.Expr)
	if err != nil {
		ans.Error, ans.Stage = err.Error(), "program"
		return ans
	}
	vars, err := Bind(c.Bindings)
	if err != nil {
		ans.Error, ans.Stage = err.Error(), "input"
		return ans
	}
	_, det, err := prg.Eval(vars)
	if det != nil {
		ans.Cost = det.ActualCost()
	}
	if err != nil {
		ans.Error, ans.Stage = err.Error(), "eval"
	}
	return ans
}

// Bind converts JSON bindings to CEL values.
func Bind(raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	for name, text := range raw {
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("binding %s: %w", name, err)
		}
		out[name] = fromJSON(v)
	}
	return out, nil
}

func fromJSON(v any) any {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u
			}
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f
	case []any:
		for i := range v {
			v[i] = fromJSON(v[i])
		}
		return v
	case map[string]any:
		for k := range v {
			v[k] = fromJSON(v[k])
		}
		return v
	default:
		return v
	}
}

// Eval answers one case.
func (o *Oracle) Eval(c Case) Answer {
	prg, err := o.programFor(c)
	if err != nil {
		return Answer{Error: err.Error(), Stage: "compile"}
	}
	vars, err := Bind(c.Bindings)
	if err != nil {
		return Answer{Error: err.Error(), Stage: "input"}
	}
	val, det, err := prg.Eval(vars)
	if err != nil {
		return Answer{Error: err.Error(), Stage: "eval"}
	}
	typ := typeName(val)
	text, err := ToJSON(val)
	if err != nil {
		return Answer{Error: err.Error(), Stage: "result", Type: typ}
	}
	ans := Answer{Value: text, Type: typ}
	if det != nil {
		ans.Cost = det.ActualCost()
	}
	return ans
}

func typeName(v ref.Val) string {
	t := v.Type()
	if tt, ok := t.(*types.Type); ok {
		return tt.String()
	}
	return t.TypeName()
}

// ToJSON renders a CEL value as katalog does.
func ToJSON(v ref.Val) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(buf *bytes.Buffer, v ref.Val, depth int) error {
	if depth > 256 {
		return errors.New("value nested too deeply")
	}
	switch v := v.(type) {
	case types.Null:
		buf.WriteString("null")
	case types.Bool:
		buf.WriteString(strconv.FormatBool(bool(v)))
	case types.Int:
		buf.WriteString(strconv.FormatInt(int64(v), 10))
	case types.Uint:
		buf.WriteString(strconv.FormatUint(uint64(v), 10))
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("double %v has no JSON form", f)
		}
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEn") {
			s += ".0"
		}
		buf.WriteString(s)
	case types.String:
		writeString(buf, string(v))
	case types.Bytes:
		writeString(buf, base64.StdEncoding.EncodeToString([]byte(v)))
	case types.Timestamp:
		writeString(buf, v.Time.UTC().Format(time.RFC3339Nano))
	case types.Duration:
		writeString(buf, v.Duration.String())
	case *types.Optional:
		if !v.HasValue() {
			buf.WriteString("null")
			return nil
		}
		return writeJSON(buf, v.GetValue(), depth+1)
	case traits.Lister:
		buf.WriteByte('[')
		n := int64(v.Size().(types.Int))
		for i := int64(0); i < n; i++ {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, v.Get(types.Int(i)), depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case traits.Mapper:
		var keys []string
		it := v.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			s, ok := k.(types.String)
			if !ok {
				return fmt.Errorf("map key of type %s has no JSON form", typeName(k))
			}
			keys = append(keys, string(s))
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeJSON(buf, v.Get(types.String(k)), depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("a %s has no JSON form", typeName(v))
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	text, _ := json.Marshal(s)
	buf.Write(text)
}

func main() {
	args := os.Args[1:]
	extensions := len(args) >= 1 && args[0] == "--math-and-base64"
	if extensions {
		args = args[1:]
	}
	cost := len(args) == 1 && args[0] == "--cost"
	if len(args) == 1 && (cost || args[0] == "--version") || len(args) == 2 && args[0] == "--tables" || len(args) == 0 {
		os.Args = append(os.Args[:1], args...)
	} else {
		fmt.Fprintln(os.Stderr, "celoracle: usage: celoracle [--math-and-base64] [--cost | --tables DIR | --version]")
		os.Exit(2)
	}
	oracle, err := NewOracle(extensions)
	if err != nil {
		fmt.Fprintln(os.Stderr, "celoracle:", err)
		os.Exit(1)
	}
	if len(os.Args) == 3 && os.Args[1] == "--tables" {
		if err := PrintTables(oracle, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "celoracle:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Printf("k8s.io/apiserver %s, CEL compatibility version %s\n", apiserverVersion, oracle.version)
		return
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	defer out.Flush()
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var c Case
			var ans any
			if jerr := json.Unmarshal(line, &c); jerr != nil {
				ans = Answer{Error: "bad input line: " + jerr.Error(), Stage: "input"}
			} else if cost {
				ans = oracle.Cost(c)
			} else {
				ans = oracle.Eval(c)
			}
			text, _ := json.Marshal(ans)
			out.Write(text)
			out.WriteByte('\n')
			// Answer each line as it comes, for a caller that waits for it.
			if in.Buffered() == 0 {
				out.Flush()
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "celoracle:", err)
			os.Exit(1)
		}
	}
}

// apiserverVersion is set by build.sh (-ldflags -X) from go.mod.
var apiserverVersion = "unknown"
