// Package v2 is a spoke version of stable.example.com CronTab: the image
// moves into spec.container and the concurrency policies are spelled out.
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is group version used to register these objects.
var GroupVersion = schema.GroupVersion{Group: "stable.example.com", Version: "v2"}

// ConcurrencyPolicy says what happens when a run is due while the last one
// is still running.
// +kubebuilder:validation:Enum=AllowConcurrent;ForbidConcurrent;ReplaceConcurrent
type ConcurrencyPolicy string

const (
	AllowConcurrent   ConcurrencyPolicy = "AllowConcurrent"
	ForbidConcurrent  ConcurrencyPolicy = "ForbidConcurrent"
	ReplaceConcurrent ConcurrencyPolicy = "ReplaceConcurrent"
)

// Container is what runs.
type Container struct {
	Image string `json:"image"`
}

// CronTabSpec is the desired state of a CronTab.
type CronTabSpec struct {
	Schedule          string            `json:"schedule,omitempty"`
	Container         *Container        `json:"container,omitempty"`
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
type CronTab struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CronTabSpec   `json:"spec,omitzero"`
	Status CronTabStatus `json:"status,omitzero"`
}

// AddToScheme registers CronTab at stable.example.com/v2.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CronTab{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
