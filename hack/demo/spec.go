package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/nodeagent"
)

// The demo's regions: shard name → the region label of its process-backed Node.
var regions = []struct{ Shard, Region string }{{"us-east", "us-east-1"}, {"eu-west", "eu-west-1"}, {"ap-south", "ap-south-1"}}

const (
	// routerImage:<revision> is the reference router (examples/edge-router) in the node agent's
	// image table: every revision runs the same binary, its args say how it behaves.
	routerImage = "schemagate.local/edge-router"
	routerPort  = 8080
	replicas    = 2
	// progressDeadline is short so that the never-ready v3 is rolled back quickly.
	progressDeadline = 20
)

// routerContainer is the router of one revision: it reads the route table of database (a
// PostgreSQL URL) and needs schema; its /ready stays 503 until that schema is in place.
func routerContainer(revision string, schema int, database string) corev1.Container {
	return corev1.Container{
		Name: "router", Image: routerImage + ":" + revision,
		Args:  []string{"serve", fmt.Sprintf("--schema=%d", schema), "--revision=" + revision, "--refresh=500ms"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: routerPort}},
		Env: []corev1.EnvVar{
			{Name: "DATABASE_URL", Value: database},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "REGION", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + rollout.LabelShard + "']"}}},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 1,
		},
	}
}

// onProcessNodes puts a pod on the node agent's Nodes (which are tainted: kwok's fake pods never
// land there, and these pods never land on kwok's Nodes). The shard adds its region.
func onProcessNodes(containers ...corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:   containers,
		NodeSelector: map[string]string{nodeagent.NodeLabel: nodeagent.NodeLabelValue},
		Tolerations: []corev1.Toleration{{Key: nodeagent.NodeLabel, Operator: corev1.TolerationOpEqual,
			Value: nodeagent.NodeLabelValue, Effect: corev1.TaintEffectNoSchedule}},
		TerminationGracePeriodSeconds: ptr.To(int64(10)),
	}
}

// demoRoutingService is edge-router v1 (schema 1) in three shards of two real router pods. Its
// migration Job is the router's own `migrate` (golang-migrate, up to SCHEMAGATE_SCHEMA_VERSION,
// which schemagate sets) against database. Demo-sized waits: bake seconds as given, a 20 s
// progress deadline, a 60 s migration deadline.
func demoRoutingService(database string, bake int32) *routingv1alpha1.RoutingService {
	var shards []routingv1alpha1.ShardSpec
	for _, r := range regions {
		shards = append(shards, routingv1alpha1.ShardSpec{Name: r.Shard, Replicas: replicas,
			NodeSelector: map[string]string{nodeagent.RegionLabel: r.Region}})
	}
	migration := onProcessNodes(corev1.Container{Name: "migrate", Image: routerImage + ":v1", Args: []string{"migrate"},
		Env: []corev1.EnvVar{{Name: "DATABASE_URL", Value: database}}})
	migration.RestartPolicy = corev1.RestartPolicyNever
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-router", Namespace: "default"},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "edge-router"}},
				Spec:       onProcessNodes(routerContainer("v1", 1, database)),
			},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				BackoffLimit:          ptr.To(int32(1)),
				ActiveDeadlineSeconds: ptr.To(int64(60)),
				Template:              corev1.PodTemplateSpec{Spec: migration},
			}},
			Shards: shards,
			Strategy: routingv1alpha1.RolloutStrategy{
				MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				BakeSeconds: ptr.To(bake), ProgressDeadlineSeconds: ptr.To(int32(progressDeadline)), RevisionHistoryLimit: ptr.To(int32(2)),
				FailurePolicy: routingv1alpha1.FailurePolicyRollback,
			},
		},
	}
}

// toV2 is the change of the incident: a router that reads a column only migration 2 adds, and
// that migration (5 s slow) as the RoutingService's migration Job.
func toV2(database string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{routerContainer("v2", 2, database)}
		r.Spec.Schema.Version = "2"
		m := &r.Spec.Schema.Migration.Template.Spec.Containers[0]
		m.Image = routerImage + ":v2"
		m.Args = []string{"migrate", "--delay=5s"}
	}
}

// toV3 is a bad release on schema 2: its router reads a database nobody migrated (emptyDatabase),
// so its /ready answers 503 "database schema is 0, this binary needs 2" for ever.
func toV3(emptyDatabase string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{routerContainer("v3", 2, emptyDatabase)}
	}
}
