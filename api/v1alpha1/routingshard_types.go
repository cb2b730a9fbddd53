package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShardScaler says what sets the size of an autoscaled shard (spec.shards[].autoscaling.scaler).
// +kubebuilder:validation:Enum=HorizontalPodAutoscaler;External
type ShardScaler string

const (
	// ShardScalerHPA: schemagate owns a HorizontalPodAutoscaler for the shard, made from
	// minReplicas, maxReplicas, metrics and behavior, that scales the shard's RoutingShard.
	ShardScalerHPA ShardScaler = "HorizontalPodAutoscaler"
	// ShardScalerExternal: a team's own autoscaler (its HorizontalPodAutoscaler, a KEDA
	// ScaledObject) scales the shard's RoutingShard through its /scale subresource; schemagate
	// creates no autoscaler.
	ShardScalerExternal ShardScaler = "External"
)

// ShardAutoscaling lets an autoscaler own a shard's size (docs/autoscaling.md). The shard gets a
// RoutingShard named <routingservice>-<shard> whose /scale subresource an autoscaler writes;
// spec.shards[].replicas is then only the size the RoutingShard starts with.
// +kubebuilder:validation:XValidation:rule="(has(self.scaler) && self.scaler == 'External') || has(self.maxReplicas)",message="autoscaling.maxReplicas is required when scaler is HorizontalPodAutoscaler",fieldPath=".maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.scaler) || self.scaler != 'External' || (!has(self.minReplicas) && !has(self.maxReplicas) && !has(self.metrics) && !has(self.behavior))",message="autoscaling.minReplicas, maxReplicas, metrics and behavior belong to the scaler's own object when scaler is External",fieldPath=".scaler"
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not be above autoscaling.maxReplicas",fieldPath=".minReplicas"
type ShardAutoscaling struct {
	// scaler is what scales the shard: HorizontalPodAutoscaler (when unset), one schemagate
	// creates and owns from the fields below; or External, an autoscaler the team brings (its
	// own HorizontalPodAutoscaler or KEDA ScaledObject) with scaleTargetRef
	// {apiVersion: routing.schemagate.io/v1alpha1, kind: RoutingShard, name: <routingservice>-<shard>}.
	// +optional
	Scaler ShardScaler `json:"scaler,omitempty"`

	// minReplicas is the fewest pods the HorizontalPodAutoscaler leaves the shard (1 to 10000).
	// Default: 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most pods the HorizontalPodAutoscaler gives the shard (1 to 10000).
	// Required with scaler HorizontalPodAutoscaler.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// metrics are the HorizontalPodAutoscaler's metrics (autoscaling/v2), computed over the pods
	// that serve the shard (RoutingShard status.selector). Default, as the HorizontalPodAutoscaler
	// defaults them: 80 % average CPU utilization. At most 10.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`

	// behavior is the HorizontalPodAutoscaler's scaling behavior (autoscaling/v2): its
	// stabilization windows and rate policies.
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// RoutingShardSpec is the size an autoscaler asks of one shard.
type RoutingShardSpec struct {
	// replicas is the number of pods the shard's scaler asks for (0 to 10000): what the /scale
	// subresource reads and writes. schemagate sets it once, from spec.shards[].replicas, when it
	// creates the RoutingShard, and never again: from then on the autoscaler owns it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas *int32 `json:"replicas,omitempty"`
}

// RoutingShardStatus is what the shard serves with, as schemagate last saw it.
type RoutingShardStatus struct {
	// replicas is the number of pods of the revision serving the shard (ReplicaSet
	// status.replicas): the pods status.selector matches. Surge pods of a revision being
	// promoted are not counted until that revision serves the shard.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// selector is a label selector, in string form, for the pods that serve the shard: one
	// revision's pods, never two at once. Autoscalers compute their metrics over these pods.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`

	// revision is the revision whose pods the selector matches.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Revision string `json:"revision,omitempty"`

	// appliedReplicas is the shard size schemagate applies: spec.replicas, or more while a
	// promotion holds a scale-down until the shard has baked.
	// +optional
	AppliedReplicas int32 `json:"appliedReplicas,omitempty"`

	// observedGeneration is the generation of this RoutingShard the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// RoutingShard is the scale target of one autoscaled shard of a RoutingService: an autoscaler
// (HorizontalPodAutoscaler, KEDA) writes spec.replicas through its /scale subresource, and
// schemagate sizes the shard from it. schemagate creates it, with a controller reference to the
// RoutingService, for each shard with spec.shards[].autoscaling; people do not create it.
// docs/autoscaling.md.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=rshard,categories=schemagate
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`,description="Pods the scaler asks for"
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.appliedReplicas`,description="Pods schemagate gives the shard"
// +kubebuilder:printcolumn:name="Serving",type=integer,JSONPath=`.status.replicas`,description="Pods of the serving revision"
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RoutingShard struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the size the scaler asks for.
	// +optional
	Spec RoutingShardSpec `json:"spec,omitempty"`

	// status is what the shard serves with.
	// +optional
	Status RoutingShardStatus `json:"status,omitempty"`
}

// RoutingShardList is a list of RoutingShards.
// +kubebuilder:object:root=true
type RoutingShardList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RoutingShard `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RoutingShard{}, &RoutingShardList{})
}
