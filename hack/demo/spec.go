package main

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/realstack"
)

// The demo's regions, image and port are the real stack's (test/realstack).
var regions = realstack.Regions

const (
	routerImage = realstack.RouterImage
	routerPort  = realstack.RouterPort
	replicas    = 2
	// progressDeadline is short so that the never-ready v3 is rolled back quickly.
	progressDeadline = 20
)

// demoRoutingService is edge-router v1 (schema 1) in three shards of two real router pods, whose
// migration Job is the router's own `migrate` against database. Demo-sized waits: bake seconds
// as given, a 20 s progress deadline, a 60 s migration deadline, one retry of a failed pod.
func demoRoutingService(database string, bake int32) *routingv1alpha1.RoutingService {
	r := realstack.RoutingService("edge-router", "default", database, replicas)
	r.Spec.Schema.Migration.BackoffLimit = ptr.To(int32(1))
	r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(60))
	r.Spec.Strategy = routingv1alpha1.RolloutStrategy{
		MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
		BakeSeconds: ptr.To(bake), ProgressDeadlineSeconds: ptr.To(int32(progressDeadline)), RevisionHistoryLimit: ptr.To(int32(2)),
		FailurePolicy: routingv1alpha1.FailurePolicyRollback,
	}
	return r
}

// toV2 is the change of the incident: a router that reads a column only migration 2 adds, and
// that migration (5 s slow) as the RoutingService's migration Job.
func toV2(database string) func(*routingv1alpha1.RoutingService) {
	return realstack.ToSchema2(database, 5*time.Second)
}

// toV3 is a bad release on schema 2: its router reads a database nobody migrated (emptyDatabase),
// so its /ready answers 503 "database schema is 0, this binary needs 2" for ever.
func toV3(emptyDatabase string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{realstack.RouterContainer("v3", 2, emptyDatabase)}
	}
}
