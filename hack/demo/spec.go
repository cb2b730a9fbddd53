package main

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/localcluster"
)

// demoRoutingService is config/samples' edge-router with demo-sized waits: bake seconds as given,
// a 20 s progress deadline, a 60 s migration deadline.
func demoRoutingService(bake int32) *routingv1alpha1.RoutingService {
	shard := func(name, region string) routingv1alpha1.ShardSpec {
		return routingv1alpha1.ShardSpec{Name: name, Replicas: 3, NodeSelector: map[string]string{localcluster.RegionLabel: region}}
	}
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-router", Namespace: "default"},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "edge-router"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "router", Image: "registry.example/edge-router:v1",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				BackoffLimit:          ptr.To(int32(1)),
				ActiveDeadlineSeconds: ptr.To(int64(60)),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "migrate", Image: "registry.example/edge-router-migrate:v1", Args: []string{"up"}}}}},
			}},
			Shards: []routingv1alpha1.ShardSpec{shard("us-east", "us-east-1"), shard("eu-west", "eu-west-1"), shard("ap-south", "ap-south-1")},
			Strategy: routingv1alpha1.RolloutStrategy{
				MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				BakeSeconds: ptr.To(bake), ProgressDeadlineSeconds: ptr.To(int32(20)), RevisionHistoryLimit: ptr.To(int32(2)),
				FailurePolicy: routingv1alpha1.FailurePolicyRollback,
			},
		},
	}
}
