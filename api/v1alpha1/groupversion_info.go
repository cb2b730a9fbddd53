// Package v1alpha1 contains the RoutingService API of schemagate, group routing.schemagate.io.
//
// +kubebuilder:object:generate=true
// +groupName=routing.schemagate.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API: routing.schemagate.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "routing.schemagate.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this API with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
