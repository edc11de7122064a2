// Package v1 is the hub version of stable.example.com CronTab: the storage
// version, and the one every other version converts through.
//
// The types follow katalogs/crontab.crd.yaml for the fields the CRD
// declares (schedule, image, timeoutSeconds, concurrencyPolicy) and add the
// CronJob-like fields of the benchmark objects; jobTemplate is kept as raw
// JSON (+kubebuilder:pruning:PreserveUnknownFields), as a Kubebuilder
// project does for a subtree it does not own.
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is group version used to register these objects.
var GroupVersion = schema.GroupVersion{Group: "stable.example.com", Version: "v1"}

// ConcurrencyPolicy says what happens when a run is due while the last one
// is still running.
// +kubebuilder:validation:Enum=Allow;Forbid;Replace
type ConcurrencyPolicy string

const (
	AllowConcurrent   ConcurrencyPolicy = "Allow"
	ForbidConcurrent  ConcurrencyPolicy = "Forbid"
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// CronTabSpec is the desired state of a CronTab.
type CronTabSpec struct {
	Schedule          string            `json:"schedule,omitempty"`
	Image             string            `json:"image,omitempty"`
	TimeoutSeconds    *int64            `json:"timeoutSeconds,omitempty"`
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

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
// +kubebuilder:storageversion
type CronTab struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CronTabSpec   `json:"spec,omitzero"`
	Status CronTabStatus `json:"status,omitzero"`
}

// Hub marks v1 as the version conversions go through.
func (*CronTab) Hub() {}

// AddToScheme registers CronTab at stable.example.com/v1.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CronTab{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
