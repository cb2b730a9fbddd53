//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/postgres"
	"github.com/schemagate/schemagate/test/traffic"
)

// The real stack of issue 9: pods on process-backed nodes (test/nodeagent) that run the reference
// router (examples/edge-router) against a real PostgreSQL, and traffic through each region's
// EndpointSlices. It shares the suite's cluster; its nodes are tainted so the kwok stories never
// land on them, and its pods tolerate the taint and select them.

// Regions of the real stack: shard name → the region label its nodes carry.
var realRegions = []struct{ Shard, Region string }{{"us-east", "us-east-1"}, {"eu-west", "eu-west-1"}, {"ap-south", "ap-south-1"}}

const (
	routerImage  = "schemagate.local/edge-router"
	processLabel = "schemagate.io/node"
	processValue = "process"
	routerPort   = 8080
)

var (
	realOnce sync.Once
	realErr  error
	// pg is the shared PostgreSQL server; scenarios that stop the database start their own.
	pg *postgres.Server
)

// realStack starts, once per suite, the shared PostgreSQL server and the process-backed nodes.
func realStack(t *testing.T) {
	t.Helper()
	realOnce.Do(func() {
		ctx := context.Background()
		if pg, realErr = postgres.Start(ctx, postgres.Options{}); realErr != nil {
			return
		}
		realErr = startAgent(ctx)
	})
	if realErr != nil {
		t.Fatalf("real stack: %v", realErr)
	}
}

// database creates a database for one scenario and migrates it to schema with the router's own
// migrate command, as the migration Job would.
func database(t *testing.T, srv *postgres.Server, name string, schema int) string {
	t.Helper()
	if err := srv.CreateDatabase(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	url := srv.URL(name)
	if schema == 0 {
		return url // empty: schemagate's migration Job brings it to its first version
	}
	cmd := exec.Command(filepath.Join(binDir, "edge-router"), "migrate")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+url, fmt.Sprintf("%s=%d", rollout.EnvSchemaVersion, schema))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("migrate %s to %d: %v: %s", name, schema, err, out)
	}
	return url
}

// routerContainer is the router's container: args select the schema it needs and how it behaves.
func routerContainer(revision string, schema int, dbURL string, extra ...string) corev1.Container {
	args := append([]string{"serve", fmt.Sprintf("--schema=%d", schema), "--revision=" + revision, "--refresh=500ms"}, extra...)
	return corev1.Container{
		Name: "router", Image: routerImage + ":" + revision, Args: args,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: routerPort}},
		Env: []corev1.EnvVar{
			{Name: "DATABASE_URL", Value: dbURL},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "REGION", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['" + rollout.LabelShard + "']"}}},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 1,
		},
	}
}

// processPodSpec puts a pod on the process-backed nodes (the region comes from the shard).
func processPodSpec(containers ...corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:                    containers,
		NodeSelector:                  map[string]string{processLabel: processValue},
		Tolerations:                   []corev1.Toleration{{Key: processLabel, Operator: corev1.TolerationOpEqual, Value: processValue, Effect: corev1.TaintEffectNoSchedule}},
		TerminationGracePeriodSeconds: ptr.To(int64(10)),
	}
}

// realRoutingService is rs-a on the real stack: the router at revision v1 (schema 1) in three
// shards of 2, with the router's migrate command as its migration.
func realRoutingService(ns, dbURL string, extra ...string) *routingv1alpha1.RoutingService {
	var shards []routingv1alpha1.ShardSpec
	for _, r := range realRegions {
		shards = append(shards, routingv1alpha1.ShardSpec{Name: r.Shard, Replicas: 2, NodeSelector: map[string]string{"topology.kubernetes.io/region": r.Region}})
	}
	migrate := corev1.Container{Name: "migrate", Image: routerImage + ":v1", Args: []string{"migrate"},
		Env: []corev1.EnvVar{{Name: "DATABASE_URL", Value: dbURL}}}
	mspec := processPodSpec(migrate)
	mspec.RestartPolicy = corev1.RestartPolicyNever
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-a", Namespace: ns},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "edge-router"}},
				Spec:       processPodSpec(routerContainer("v1", 1, dbURL, extra...)),
			},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				Template:     corev1.PodTemplateSpec{Spec: mspec},
				BackoffLimit: ptr.To(int32(0)), ActiveDeadlineSeconds: ptr.To(int64(120)),
			}},
			Shards: shards,
			Strategy: routingv1alpha1.RolloutStrategy{
				BakeSeconds: ptr.To(int32(2)), ProgressDeadlineSeconds: ptr.To(int32(40)),
			},
		},
	}
}

// toV2 is the routers' update: revision v2 needs schema 2, and the migration (a few seconds long)
// brings the database there.
func toV2(dbURL string, delay time.Duration, extra ...string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{routerContainer("v2", 2, dbURL, extra...)}
		r.Spec.Schema.Version = "2"
		m := &r.Spec.Schema.Migration.Template.Spec.Containers[0]
		m.Image = routerImage + ":v2"
		m.Args = []string{"migrate", "--delay=" + delay.String()}
	}
}

// regionPods maps each shard to the labels of its router pods; the traffic finds the ready ones.
// (Endpoints and EndpointSlices refuse the loopback addresses the process-backed pods have, so the
// generator reads the pods with the EndpointSlice controller's rules: traffic.PodBackends.)
func regionPods(selector func(shard string) map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range realRegions {
		out[r.Shard] = selector(r.Shard)
	}
	return out
}

// startTraffic sends 20 requests per second to each region over the seeded domains.
func startTraffic(ns string, pods map[string]map[string]string) *traffic.Generator {
	var regions []string
	for _, r := range realRegions {
		regions = append(regions, r.Shard)
	}
	var domains []string
	for i := 0; i < 20; i++ {
		domains = append(domains, fmt.Sprintf("d%02d.example", i))
	}
	return traffic.Start(context.Background(), traffic.Options{
		Regions: regions, Rate: 20, Domains: domains,
		Backends: traffic.PodBackends(k8s, ns, pods, routerPort, 200*time.Millisecond),
	})
}

// waitServed waits until every region answers 200 through its EndpointSlices.
func waitServed(t *testing.T, ns string, pods map[string]map[string]string) {
	t.Helper()
	backends := traffic.PodBackends(k8s, ns, pods, routerPort, time.Nanosecond)
	for _, r := range realRegions {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			addrs, _ := backends(context.Background(), r.Shard)
			if len(addrs) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("region %s has no ready backend", r.Shard)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// table prints a report and keeps it for the suite's summary.
func table(t *testing.T, scenario string, rep traffic.Report) {
	var b strings.Builder
	rep.Table(&b, scenario)
	t.Logf("\n%s", b.String())
	tablesMu.Lock()
	tables = append(tables, b.String())
	tablesMu.Unlock()
}

var (
	tablesMu sync.Mutex
	tables   []string
)

// deployment is a plain Deployment in one region: the "without schemagate" side of R-1.
func deployment(ns, shard, region string, c corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": "plain", rollout.LabelShard: shard}
	spec := processPodSpec(c)
	spec.NodeSelector["topology.kubernetes.io/region"] = region
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "plain-" + shard, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// agent is the process-backed node agent: one Node per region, tainted so that only the real
// stack's pods (which tolerate it) run there.
var agent *nodeagent.Agent

func startAgent(ctx context.Context) error {
	router := nodeagent.Executable{Path: filepath.Join(binDir, "edge-router")}
	images := map[string]nodeagent.Executable{}
	for _, rev := range []string{"v1", "v2", "canary"} {
		images[routerImage+":"+rev] = router
	}
	var nodes []nodeagent.NodeSpec
	for _, r := range realRegions {
		nodes = append(nodes, nodeagent.NodeSpec{
			Name: "process-" + r.Region, Region: r.Region,
			Taints: []corev1.Taint{{Key: processLabel, Value: processValue, Effect: corev1.TaintEffectNoSchedule}},
		})
	}
	var err error
	agent, err = nodeagent.Start(ctx, cfg, nodeagent.Options{Nodes: nodes, Images: images, BackoffInitial: time.Second, BackoffMax: 10 * time.Second})
	return err
}
