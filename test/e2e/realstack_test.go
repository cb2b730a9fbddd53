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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/postgres"
	"github.com/schemagate/schemagate/test/realstack"
	"github.com/schemagate/schemagate/test/traffic"
)

// The real stack of issue 9: pods on process-backed nodes (test/nodeagent) that run the reference
// router (examples/edge-router) against a real PostgreSQL, and traffic to each region's ready
// router pods. It shares the suite's cluster; its nodes are tainted so the kwok stories never
// land on them, and its pods tolerate the taint and select them.

// The real stack's regions, image and port (test/realstack).
var realRegions = realstack.Regions

const (
	routerImage = realstack.RouterImage
	routerPort  = realstack.RouterPort
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

// realNamespace is a namespace of the test's own whose routers and migrations stop when the test
// ends: its RoutingServices are deleted (the garbage collector removes their ReplicaSets, and the
// node agent stops the pods' processes), then the namespace with everything else in it. Left
// running, each scenario's routers kept polling PostgreSQL and being probed through every later
// scenario, and by the tenth the machine's two cores answered requests in a second.
func realNamespace(t *testing.T) string {
	t.Helper()
	ns := kit().NewNamespace(t)
	t.Cleanup(func() {
		// From here the garbage collector and the namespace controller remove pods, not
		// schemagate; the checker's informers may see a pod go before they see the RoutingService
		// go, which is no I2 violation of schemagate's.
		checker.ExemptI2(ns, "the test is over: its namespace is being deleted")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := k8s.DeleteAllOf(ctx, &routingv1alpha1.RoutingService{}, client.InNamespace(ns)); err != nil {
			t.Logf("cleanup: deleting the RoutingServices of %s: %v", ns, err)
		}
		for ctx.Err() == nil {
			var list routingv1alpha1.RoutingServiceList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err == nil && len(list.Items) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Logf("cleanup: deleting namespace %s: %v", ns, err)
		}
	})
	return ns
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

// realRoutingService is rs-a on the real stack: the router v1 (schema 1) in three shards of 2,
// baking 2 s, with a 90 s progress deadline (a router started on a loaded 2-core machine can take
// longer than 40 s to be available in the third shard).
func realRoutingService(ns, dbURL string, extra ...string) *routingv1alpha1.RoutingService {
	r := realstack.RoutingService("rs-a", ns, dbURL, 2, extra...)
	r.Spec.Strategy = routingv1alpha1.RolloutStrategy{BakeSeconds: ptr.To(int32(2)), ProgressDeadlineSeconds: ptr.To(int32(90))}
	return r
}

// Shorthands for the shared builders.
var (
	routerContainer = realstack.RouterContainer
	processPodSpec  = realstack.OnProcessNodes
	toV2            = realstack.ToSchema2
)

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
	var err error
	// A range of its own: another suite or the demo may run on the same host at the same time.
	agent, err = realstack.StartAgentIn(ctx, cfg, realstack.OwnPodCIDR(), filepath.Join(binDir, "edge-router"), "", "v1", "v2", "canary")
	return err
}
