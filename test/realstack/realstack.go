// Package realstack holds what the demo and the end-to-end replays share to run schemagate with
// nothing faked: the reference router (examples/edge-router) as pods on the node agent's
// process-backed Nodes (test/nodeagent), against a real PostgreSQL (test/postgres). It builds the
// pod specs and the RoutingService, and starts the agent; callers own the cluster and the database.
package realstack

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/postgres"
)

// Regions are the shards and the region label of their process-backed Node.
var Regions = []struct{ Shard, Region string }{{"us-east", "us-east-1"}, {"eu-west", "eu-west-1"}, {"ap-south", "ap-south-1"}}

const (
	// RouterImage:<revision> is the reference router in the node agent's image table: every
	// revision runs the same binary, and its args say how it behaves.
	RouterImage = "schemagate.local/edge-router"
	// RouterPort is where each router pod listens, on its own loopback address.
	RouterPort = 8080
	// SchemaImage is cmd/schemagate-schema in the node agent's image table: the migration Job
	// runs the router's own migrate under `schemagate-schema run`, and the check Job runs
	// `schemagate-schema report`, both for golang-migrate's table (issue 10).
	SchemaImage = "schemagate.local/schemagate-schema:dev"
	// ProxyImage stands for a sidecar that never exits on its own (a service mesh's injected
	// proxy): `sleep infinity`, until it is sent SIGTERM.
	ProxyImage = "schemagate.local/proxy:1"
	// ScratchImage stands for the official postgres image in a migration probe's pod: the test
	// binary itself, serving a scratch PostgreSQL on 127.0.0.1:5432 (postgres.ServeScratch), with
	// the host's pg_dump and psql on its PATH for the probe's copy step. A TestMain that runs
	// probes calls ServeScratchIfAsked first.
	ScratchImage = "schemagate.local/postgres:15"
)

// ServeScratchIfAsked serves the scratch database and exits when this process was started for
// ScratchImage; otherwise it returns.
func ServeScratchIfAsked() {
	if os.Getenv(postgres.ScratchEnv) == "1" {
		os.Exit(postgres.ServeScratch())
	}
}

// migrateArgs is `schemagate-schema run --tool golang-migrate -- edge-router migrate <args>`.
func migrateArgs(args ...string) []string {
	return append([]string{"run", "--tool", "golang-migrate", "--", "edge-router", "migrate"}, args...)
}

// RouterContainer is the router of one revision: it reads the route table of database (a
// PostgreSQL URL) and needs schema; its /ready (the readiness probe) stays 503 until that schema
// is in place. extra are more `serve` flags (--cache-policy, --check-schema=false, …); a later
// flag wins over an earlier one.
func RouterContainer(revision string, schema int, database string, extra ...string) corev1.Container {
	// A 5 s drain (a production preStop sleep is 5–15 s): the replays' clients learn of a
	// terminating pod from the API server, which answers in seconds, not milliseconds, when the
	// suite loads two cores; a 2 s drain counted that lag as the router's connection errors.
	args := append([]string{"serve", fmt.Sprintf("--schema=%d", schema), "--revision=" + revision, "--refresh=500ms", "--shutdown-delay=5s"}, extra...)
	return corev1.Container{
		Name: "router", Image: RouterImage + ":" + revision, Args: args,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: RouterPort}},
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

// OnProcessNodes puts a pod on the node agent's Nodes, which are tainted so that kwok's fake pods
// never land there (and these pods never land on kwok's Nodes). A shard's nodeSelector adds its
// region.
func OnProcessNodes(containers ...corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:   containers,
		NodeSelector: map[string]string{nodeagent.NodeLabel: nodeagent.NodeLabelValue},
		Tolerations: []corev1.Toleration{{Key: nodeagent.NodeLabel, Operator: corev1.TolerationOpEqual,
			Value: nodeagent.NodeLabelValue, Effect: corev1.TaintEffectNoSchedule}},
		TerminationGracePeriodSeconds: ptr.To(int64(10)),
	}
}

// RoutingService is name in namespace: the router v1 (schema 1, extra serve flags) in every region
// with replicas pods each; as its migration Job the router's own `migrate` (golang-migrate up to
// SCHEMAGATE_SCHEMA_VERSION, which schemagate sets) under `schemagate-schema run`, which writes
// the schema report, with a 120 s deadline and no retry; and a `schemagate-schema report` check
// Job (60 s deadline) for when that evidence is gone. Callers tune the strategy.
func RoutingService(name, namespace, database string, replicas int32, extra ...string) *routingv1alpha1.RoutingService {
	var shards []routingv1alpha1.ShardSpec
	for _, r := range Regions {
		shards = append(shards, routingv1alpha1.ShardSpec{Name: r.Shard, Replicas: replicas,
			NodeSelector: map[string]string{nodeagent.RegionLabel: r.Region}})
	}
	migration := OnProcessNodes(corev1.Container{Name: "migrate", Image: SchemaImage, Args: migrateArgs(),
		Env: []corev1.EnvVar{{Name: "DATABASE_URL", Value: database}}})
	migration.RestartPolicy = corev1.RestartPolicyNever
	check := OnProcessNodes(corev1.Container{Name: "check", Image: SchemaImage, Args: []string{"report", "--tool", "golang-migrate"},
		Env: []corev1.EnvVar{{Name: "DATABASE_URL", Value: database}}})
	check.RestartPolicy = corev1.RestartPolicyNever
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       OnProcessNodes(RouterContainer("v1", 1, database, extra...)),
			},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				Template:     corev1.PodTemplateSpec{Spec: migration},
				BackoffLimit: ptr.To(int32(0)), ActiveDeadlineSeconds: ptr.To(int64(120)),
			}, Check: &routingv1alpha1.SchemaCheckSpec{Template: corev1.PodTemplateSpec{Spec: check}, ActiveDeadlineSeconds: ptr.To(int64(60))}},
			Shards: shards,
		},
	}
}

// ToSchema2 is the incident's change: router v2 reads a column only migration 2 adds, and that
// migration (delay long) is the RoutingService's migration Job.
func ToSchema2(database string, delay time.Duration, extra ...string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{RouterContainer("v2", 2, database, extra...)}
		r.Spec.Schema.Version = "2"
		m := &r.Spec.Schema.Migration.Template.Spec.Containers[0]
		m.Args = migrateArgs("--delay=" + delay.String())
	}
}

// StartAgent registers one process-backed Node per region, tainted
// schemagate.io/node=process:NoSchedule, whose pods run routerBinary for each revision of the
// router image (RouterImage:<revision>), and schemagate-schema (built next to routerBinary) for
// SchemaImage, with routerBinary's directory on its PATH. stateDir may be empty (a temporary
// directory).
func StartAgent(ctx context.Context, cfg *rest.Config, routerBinary, stateDir string, revisions ...string) (*nodeagent.Agent, error) {
	return StartAgentIn(ctx, cfg, "", routerBinary, stateDir, revisions...)
}

// OwnPodCIDR is a /20 of 127.128.0.0/9 picked at random, for an agent whose pods must not share
// addresses with another agent on the same host (the default range is shared by every agent that
// keeps it: two suites run at once would hand out the same address, and the second router to
// bind it fails with "address already in use").
func OwnPodCIDR() string {
	return fmt.Sprintf("127.%d.%d.0/20", 128+rand.IntN(128), 16*rand.IntN(16))
}

// StartAgentIn is StartAgent with the pods' addresses in podCIDR (empty: nodeagent.DefaultPodCIDR).
func StartAgentIn(ctx context.Context, cfg *rest.Config, podCIDR, routerBinary, stateDir string, revisions ...string) (*nodeagent.Agent, error) {
	var regions []string
	for _, r := range Regions {
		regions = append(regions, r.Region)
	}
	return StartAgentForRegions(ctx, cfg, podCIDR, routerBinary, stateDir, regions, revisions...)
}

// StartAgentForRegions is StartAgentIn with one process-backed Node, process-<region>, for each
// of regions instead of each of Regions: a region cluster of test/fleet has its own region's only.
func StartAgentForRegions(ctx context.Context, cfg *rest.Config, podCIDR, routerBinary, stateDir string, regions []string, revisions ...string) (*nodeagent.Agent, error) {
	images := map[string]nodeagent.Executable{}
	for _, rev := range revisions {
		images[RouterImage+":"+rev] = nodeagent.Executable{Path: routerBinary}
	}
	dir, err := filepath.Abs(filepath.Dir(routerBinary))
	if err != nil {
		return nil, err
	}
	schema := filepath.Join(dir, "schemagate-schema")
	if _, err := os.Stat(schema); err != nil {
		return nil, fmt.Errorf("the migration and check Jobs run %s: %w (go build -o %s ./cmd/schemagate-schema)", schema, err, schema)
	}
	images[SchemaImage] = nodeagent.Executable{Path: schema, Env: []string{"PATH=" + dir + ":/usr/local/bin:/usr/bin:/bin"}}
	if self, err := os.Executable(); err == nil {
		images[ScratchImage] = nodeagent.Executable{Path: self, Env: []string{postgres.ScratchEnv + "=1", "PATH=/usr/local/bin:/usr/bin:/bin"}}
	}
	if sleep, err := exec.LookPath("sleep"); err == nil {
		images[ProxyImage] = nodeagent.Executable{Path: sleep, Args: []string{"infinity"}}
	}
	var nodes []nodeagent.NodeSpec
	for _, region := range regions {
		nodes = append(nodes, nodeagent.NodeSpec{
			Name: "process-" + region, Region: region,
			Taints: []corev1.Taint{{Key: nodeagent.NodeLabel, Value: nodeagent.NodeLabelValue, Effect: corev1.TaintEffectNoSchedule}},
		})
	}
	return nodeagent.Start(ctx, cfg, nodeagent.Options{Nodes: nodes, Images: images, StateDir: stateDir, PodCIDR: podCIDR,
		BackoffInitial: time.Second, BackoffMax: 10 * time.Second})
}

// RegionSchemaCheck is a BeforeStart job check that proves, with `schemagate-schema report
// --require`, that database is at the version the update revision requires before a shard
// starts; for a shard in a region cluster it runs there (docs/clusters.md, a schema check in
// each region).
func RegionSchemaCheck(database string) routingv1alpha1.ShardCheck {
	spec := OnProcessNodes(corev1.Container{Name: "check", Image: SchemaImage,
		Args: []string{"report", "--tool", "golang-migrate", "--require", "$(" + rollout.EnvSchemaVersion + ")", "--report-path", "-"},
		Env:  []corev1.EnvVar{{Name: "DATABASE_URL", Value: database}}})
	spec.RestartPolicy = corev1.RestartPolicyNever
	return routingv1alpha1.ShardCheck{Name: "region-schema", When: []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenBeforeStart},
		Job: &routingv1alpha1.JobCheck{Template: corev1.PodTemplateSpec{Spec: spec}, BackoffLimit: ptr.To(int32(0)), ActiveDeadlineSeconds: ptr.To(int64(60))}}
}
