// Package v1beta1 is the oldest spoke version of stable.example.com
// CronTab: the schedule is called cronSpec, and there is no timeout and no
// concurrency policy (the conversion keeps the hub's in an annotation).
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is group version used to register these objects.
var GroupVersion = schema.GroupVersion{Group: "stable.example.com", Version: "v1beta1"}

// CronTabSpec is the desired state of a CronTab.
type CronTabSpec struct {
	CronSpec string `json:"cronSpec,omitempty"`
	Image    string `json:"image,omitempty"`

	Suspend                    *bool  `json:"suspend,omitempty"`
	StartingDeadlineSeconds    *int64 `json:"startingDeadlineSeconds,omitempty"`
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32 `json:"failedJobsHistoryLimit,omitempty"`
	// +kubebuilder:pruning:PreserveUnknownFields
	JobTemplate *runtime.RawExtension `json:"jobTemplate,omitempty"`
}

// CronTabStatus is the observed state of a CronTab.
type CronTabStatus struct {
	LastScheduleTime   *metav1.Time       `json:"lastScheduleTime,omitempty"`
	LastSuccessfulTime *metav1.Time       `json:"lastSuccessfulTime,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// CronTab is the Schema for the crontabs API.
// +kubebuilder:object:root=true
type CronTab struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CronTabSpec   `json:"spec,omitzero"`
	Status CronTabStatus `json:"status,omitzero"`
}

// AddToScheme registers CronTab at stable.example.com/v1beta1.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CronTab{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
