package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// What controller-gen would generate, written out by hand.

func (in *CronTabSpec) DeepCopyInto(out *CronTabSpec) {
	*out = *in
	if in.Suspend != nil {
		out.Suspend = new(*in.Suspend)
	}
	if in.StartingDeadlineSeconds != nil {
		out.StartingDeadlineSeconds = new(*in.StartingDeadlineSeconds)
	}
	if in.SuccessfulJobsHistoryLimit != nil {
		out.SuccessfulJobsHistoryLimit = new(*in.SuccessfulJobsHistoryLimit)
	}
	if in.FailedJobsHistoryLimit != nil {
		out.FailedJobsHistoryLimit = new(*in.FailedJobsHistoryLimit)
	}
	if in.JobTemplate != nil {
		out.JobTemplate = in.JobTemplate.DeepCopy()
	}
}

func (in *CronTabStatus) DeepCopyInto(out *CronTabStatus) {
	*out = *in
	if in.LastScheduleTime != nil {
		out.LastScheduleTime = in.LastScheduleTime.DeepCopy()
	}
	if in.LastSuccessfulTime != nil {
		out.LastSuccessfulTime = in.LastSuccessfulTime.DeepCopy()
	}
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

func (in *CronTab) DeepCopyInto(out *CronTab) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *CronTab) DeepCopy() *CronTab {
	if in == nil {
		return nil
	}
	out := new(CronTab)
	in.DeepCopyInto(out)
	return out
}

func (in *CronTab) DeepCopyObject() runtime.Object { return in.DeepCopy() }
