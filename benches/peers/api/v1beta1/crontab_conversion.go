package v1beta1

import (
	"encoding/json"
	"fmt"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v1 "github.com/katalog-dev/katalog/benches/peers/api/v1"
	"github.com/katalog-dev/katalog/benches/peers/stash"
)

// The hub's fields v1beta1 cannot hold are kept in the hub's section of the
// stash annotation, under their hub paths.
const (
	hubSection     = "v1"
	timeoutKey     = "spec.timeoutSeconds"
	concurrencyKey = "spec.concurrencyPolicy"
	defaultPolicy  = v1.AllowConcurrent
	notReadable    = "the stashed %s is not a %s: %w"
)

// ConvertTo converts this v1beta1 CronTab to the hub (v1), restoring the
// stashed fields.
func (src *CronTab) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*v1.CronTab)
	dst.ObjectMeta = src.ObjectMeta

	dst.Spec.Schedule = src.Spec.CronSpec
	dst.Spec.Image = src.Spec.Image
	dst.Spec.Suspend = src.Spec.Suspend
	dst.Spec.StartingDeadlineSeconds = src.Spec.StartingDeadlineSeconds
	dst.Spec.SuccessfulJobsHistoryLimit = src.Spec.SuccessfulJobsHistoryLimit
	dst.Spec.FailedJobsHistoryLimit = src.Spec.FailedJobsHistoryLimit
	dst.Spec.JobTemplate = src.Spec.JobTemplate
	dst.Status = v1.CronTabStatus(src.Status)

	s := stash.For(&src.ObjectMeta)
	found, raw, err := s.Take(hubSection, timeoutKey)
	if err != nil {
		return err
	}
	if found == stash.Value {
		var t int64
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf(notReadable, timeoutKey, "number", err)
		}
		dst.Spec.TimeoutSeconds = &t
	}
	found, raw, err = s.Take(hubSection, concurrencyKey)
	if err != nil {
		return err
	}
	switch found {
	case stash.Value:
		var p v1.ConcurrencyPolicy
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf(notReadable, concurrencyKey, "string", err)
		}
		dst.Spec.ConcurrencyPolicy = p
	case stash.Nothing:
		// The default, where there is a spec to put it in.
		if !reflect.ValueOf(src.Spec).IsZero() {
			dst.Spec.ConcurrencyPolicy = defaultPolicy
		}
	}
	return s.WriteBack(&dst.ObjectMeta)
}

// ConvertFrom converts the hub (v1) to this v1beta1 CronTab, stashing what
// v1beta1 cannot hold.
func (dst *CronTab) ConvertFrom(srcRaw conversion.Hub) error {
	src := srcRaw.(*v1.CronTab)
	dst.ObjectMeta = src.ObjectMeta

	dst.Spec.CronSpec = src.Spec.Schedule
	dst.Spec.Image = src.Spec.Image
	dst.Spec.Suspend = src.Spec.Suspend
	dst.Spec.StartingDeadlineSeconds = src.Spec.StartingDeadlineSeconds
	dst.Spec.SuccessfulJobsHistoryLimit = src.Spec.SuccessfulJobsHistoryLimit
	dst.Spec.FailedJobsHistoryLimit = src.Spec.FailedJobsHistoryLimit
	dst.Spec.JobTemplate = src.Spec.JobTemplate
	dst.Status = CronTabStatus(src.Status)

	s := stash.For(&src.ObjectMeta)
	if t := src.Spec.TimeoutSeconds; t != nil {
		if err := s.Put(hubSection, timeoutKey, *t); err != nil {
			return err
		}
	}
	switch p := src.Spec.ConcurrencyPolicy; p {
	case defaultPolicy:
		// The default brings it back.
	case "":
		// Absent: recorded, or the way back would fill in the default.
		if !reflect.ValueOf(src.Spec).IsZero() {
			if err := s.MarkAbsent(hubSection, concurrencyKey); err != nil {
				return err
			}
		}
	default:
		if err := s.Put(hubSection, concurrencyKey, p); err != nil {
			return err
		}
	}
	return s.WriteBack(&dst.ObjectMeta)
}
