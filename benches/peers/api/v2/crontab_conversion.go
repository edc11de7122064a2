package v2

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v1 "github.com/katalog-dev/katalog/benches/peers/api/v1"
)

// The two directions of the concurrency policy; a value neither names
// fails the conversion (katalog's enumMap does the same).
var (
	toV2 = map[v1.ConcurrencyPolicy]ConcurrencyPolicy{
		v1.AllowConcurrent:   AllowConcurrent,
		v1.ForbidConcurrent:  ForbidConcurrent,
		v1.ReplaceConcurrent: ReplaceConcurrent,
	}
	toV1 = map[ConcurrencyPolicy]v1.ConcurrencyPolicy{
		AllowConcurrent:   v1.AllowConcurrent,
		ForbidConcurrent:  v1.ForbidConcurrent,
		ReplaceConcurrent: v1.ReplaceConcurrent,
	}
)

// ConvertTo converts this v2 CronTab to the hub (v1).
func (src *CronTab) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*v1.CronTab)
	dst.ObjectMeta = src.ObjectMeta

	dst.Spec.Schedule = src.Spec.Schedule
	if src.Spec.Container != nil {
		dst.Spec.Image = src.Spec.Container.Image
	}
	dst.Spec.TimeoutSeconds = src.Spec.TimeoutSeconds
	if p := src.Spec.ConcurrencyPolicy; p != "" {
		hub, ok := toV1[p]
		if !ok {
			return fmt.Errorf("`spec.concurrencyPolicy` holds `%s`, which the enum map does not name (known: AllowConcurrent, ForbidConcurrent, ReplaceConcurrent)", p)
		}
		dst.Spec.ConcurrencyPolicy = hub
	}
	dst.Spec.Suspend = src.Spec.Suspend
	dst.Spec.StartingDeadlineSeconds = src.Spec.StartingDeadlineSeconds
	dst.Spec.SuccessfulJobsHistoryLimit = src.Spec.SuccessfulJobsHistoryLimit
	dst.Spec.FailedJobsHistoryLimit = src.Spec.FailedJobsHistoryLimit
	dst.Spec.JobTemplate = src.Spec.JobTemplate

	dst.Status = v1.CronTabStatus(src.Status)
	return nil
}

// ConvertFrom converts the hub (v1) to this v2 CronTab.
func (dst *CronTab) ConvertFrom(srcRaw conversion.Hub) error {
	src := srcRaw.(*v1.CronTab)
	dst.ObjectMeta = src.ObjectMeta

	dst.Spec.Schedule = src.Spec.Schedule
	if src.Spec.Image != "" {
		dst.Spec.Container = &Container{Image: src.Spec.Image}
	}
	dst.Spec.TimeoutSeconds = src.Spec.TimeoutSeconds
	if p := src.Spec.ConcurrencyPolicy; p != "" {
		spoke, ok := toV2[p]
		if !ok {
			return fmt.Errorf("`spec.concurrencyPolicy` holds `%s`, which the enum map does not name (known: Allow, Forbid, Replace)", p)
		}
		dst.Spec.ConcurrencyPolicy = spoke
	}
	dst.Spec.Suspend = src.Spec.Suspend
	dst.Spec.StartingDeadlineSeconds = src.Spec.StartingDeadlineSeconds
	dst.Spec.SuccessfulJobsHistoryLimit = src.Spec.SuccessfulJobsHistoryLimit
	dst.Spec.FailedJobsHistoryLimit = src.Spec.FailedJobsHistoryLimit
	dst.Spec.JobTemplate = src.Spec.JobTemplate

	dst.Status = CronTabStatus(src.Status)
	return nil
}
