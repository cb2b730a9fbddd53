//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/prometheus"
	"github.com/schemagate/schemagate/test/story"
	"github.com/schemagate/schemagate/test/traffic"
)

// Issue 11 on the real stack: a v2 router that is Ready but has lost every 4th route (25% of the
// domains answer 404), rolled out with and without a prometheus check of each shard's 404 ratio,
// measured by a real Prometheus server that discovers the router pods through the cluster's API
// server and scrapes their /metrics.

// notFoundRatio is the check the sample RoutingService ships (config/samples): the share of the
// shard's answers from the update revision that were 404 over the last 10 s.
const notFoundRatio = `sum(rate(edge_router_requests_total{namespace="{{namespace}}",shard="{{shard}}",revision="{{revision}}",code="404"}[10s]))
/ sum(rate(edge_router_requests_total{namespace="{{namespace}}",shard="{{shard}}",revision="{{revision}}"}[10s]))`

// realV1 is the real stack's v1 serving every shard with 2 pods.
const realV1 = "us-east=" + routerImage + ":v1:2/2 eu-west=" + routerImage + ":v1:2/2 ap-south=" + routerImage + ":v1:2/2"

// badV2 is the update: the same schema, a binary that loses every 4th route.
func badV2(db string, checks []routingv1alpha1.ShardCheck) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{routerContainer("v2", 1, db, "--lose-every-nth-route=4")}
		r.Spec.Strategy.Checks = checks
	}
}

// scraped is rs-a on the real stack with its router pods annotated for Prometheus, baking 1 s:
// v1's first rollout has nothing to judge, so its bake only costs time.
func scraped(ns, db string) *routingv1alpha1.RoutingService {
	r := realRoutingService(ns, db)
	r.Spec.Template.Annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": fmt.Sprint(routerPort)}
	r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
	return r
}

// Bakes of the bad v2 in seconds. With the check, us-east bakes 20 s: its measurements (3 s
// initial delay, then 4 every 2 s) all fall inside the bake. Without it, each region bakes 5 s:
// enough for the 404s to reach users in every region, which is what that story shows.
const (
	badV2BakeWithCheck    = 20
	badV2BakeWithoutCheck = 5
)

// bad404Rollout rolls the bad v2 out under traffic and returns the traffic report and the
// RoutingService at the end: Ready (no check) or Stalled and rolled back (with it).
func bad404Rollout(t *testing.T, name string, withCheck bool) (traffic.Report, *routingv1alpha1.RoutingService, time.Duration) {
	realStack(t)
	ns := realNamespace(t)
	db := database(t, pg, name, 1)
	ctx := context.Background()
	prom, err := prometheus.Start(ctx, prometheus.Options{KubeconfigPath: cluster.Kubeconfig, Namespace: ns})
	if err != nil {
		t.Fatalf("prometheus: %v", err)
	}
	t.Cleanup(prom.Stop)
	if err := k8s.Create(ctx, scraped(ns, db)); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	time.Sleep(3 * time.Second) // measured: traffic before the change, for the table

	var checks []routingv1alpha1.ShardCheck
	if withCheck {
		checks = []routingv1alpha1.ShardCheck{{Name: "404-ratio",
			Prometheus: &routingv1alpha1.PrometheusCheck{Address: prom.URL(), Query: notFoundRatio, SuccessCondition: "result < 0.01"},
			Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(2)), Count: ptr.To(int32(4)),
				InitialDelaySeconds: ptr.To(int32(3)), InconclusiveLimit: ptr.To(int32(2))}}}
	}
	bake := int32(badV2BakeWithoutCheck)
	if withCheck {
		bake = badV2BakeWithCheck
	}
	began := time.Now()
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		badV2(db, checks)(r)
		r.Spec.Strategy.BakeSeconds = ptr.To(bake)
	})
	done := func() error {
		r := kit().Get(t, ns)
		if withCheck {
			if c := story.Condition(r, routingv1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != r.Generation {
				return fmt.Errorf("Stalled %+v", c)
			}
			return kit().ServingIs(t, ns, realV1)()
		}
		if c := story.Condition(r, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != r.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	}
	story.Eventually(t, 4*time.Minute, "the rollout ends", done)
	took := time.Since(began)
	time.Sleep(3 * time.Second) // measured: traffic after the change, for the table
	return gen.Stop(), kit().Get(t, ns), took
}

// Without the check, readiness passes the bad v2 in every region: users in each get 404s.
func TestShardCheckBad404WithoutCheck(t *testing.T) {
	rep, _, took := bad404Rollout(t, "chk404without", false)
	table(t, fmt.Sprintf("bad v2 (25%% of domains 404), no check; promoted everywhere in %.0fs", took.Seconds()), rep)
	for _, r := range realRegions {
		if tot := rep.Totals[r.Shard]; tot.NotFound == 0 || tot.Revisions["v2"] == 0 {
			t.Errorf("%s: %+v: the bad v2 should have reached its users", r.Shard, tot)
		}
	}
}

// With the 404-ratio check, us-east fails its first measurement during the bake and rolls back at
// once; eu-west and ap-south never run v2 and answer no 404.
func TestShardCheckBad404WithCheck(t *testing.T) {
	rep, r, took := bad404Rollout(t, "chk404with", true)
	table(t, fmt.Sprintf("bad v2 (25%% of domains 404), prometheus 404-ratio check; rolled back in %.0fs", took.Seconds()), rep)
	if r.Status.Failure == nil || r.Status.Failure.Reason != routingv1alpha1.ReasonShardCheckFailed || r.Status.Failure.Shard != "us-east" ||
		!strings.Contains(r.Status.Failure.Message, "check 404-ratio failed in shard us-east during its bake") {
		t.Fatalf("failure %+v", r.Status.Failure)
	}
	t.Logf("failure: %s", r.Status.Failure.Message)
	for _, ss := range r.Status.Shards {
		if ss.Name == "us-east" {
			c := ss.Checks[0]
			if c.Failed == 0 || len(c.Measurements) == 0 {
				t.Fatalf("us-east check %+v", c)
			}
		}
	}
	for _, reg := range realRegions[1:] {
		if tot := rep.Totals[reg.Shard]; tot.NotFound != 0 || tot.Revisions["v2"] != 0 {
			t.Errorf("%s: %+v: the bad v2 must never reach it", reg.Shard, tot)
		}
	}
	if tot := rep.Totals["us-east"]; tot.Revisions["v2"] == 0 {
		t.Errorf("us-east never answered from v2: %+v", tot)
	}
}

// A check whose query has no data (a metric nobody exports: an empty vector) is inconclusive:
// us-east, fully on v2, holds with reason ShardCheckInconclusive (Argo CD: Suspended), nothing
// fails or rolls back, and eu-west is not touched, until a person promotes; then eu-west
// promotes and holds the same way.
func TestShardCheckNoDataHoldsUntilPromoted(t *testing.T) {
	realStack(t)
	ns := realNamespace(t)
	db := database(t, pg, "chknodata", 1)
	ctx := context.Background()
	prom, err := prometheus.Start(ctx, prometheus.Options{KubeconfigPath: cluster.Kubeconfig, Namespace: ns})
	if err != nil {
		t.Fatalf("prometheus: %v", err)
	}
	t.Cleanup(prom.Stop)
	r := scraped(ns, db)
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{routerContainer("v2", 1, db)}
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "no-data",
			Prometheus:  &routingv1alpha1.PrometheusCheck{Address: prom.URL(), Query: `sum(rate(edge_router_not_exported_total{shard="{{shard}}"}[10s]))`, SuccessCondition: "result < 1.0"},
			Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(1)), Count: ptr.To(int32(2))}}}
	})
	held := func(shard string) func() error {
		return func() error {
			r := kit().Get(t, ns)
			c := story.Condition(r, routingv1alpha1.ConditionReconciling)
			if c == nil || c.ObservedGeneration != r.Generation || c.Reason != routingv1alpha1.ReasonShardCheckInconclusive || !strings.Contains(c.Message, "in shard "+shard) {
				return fmt.Errorf("Reconciling %+v", c)
			}
			return nil
		}
	}
	story.Eventually(t, 2*time.Minute, "us-east holds on an inconclusive check", held("us-east"))
	story.Consistently(t, 4*time.Second, "us-east keeps holding, nothing fails", held("us-east"))
	rsvc := kit().Get(t, ns)
	story.Capture(t, rootDir, "shard-check-inconclusive", rsvc)
	if rsvc.Status.Failure != nil {
		t.Fatalf("failure %+v", rsvc.Status.Failure)
	}
	for _, ss := range rsvc.Status.Shards {
		if ss.Name == "eu-west" && ss.Revision == rsvc.Status.UpdateRevision {
			t.Fatalf("eu-west runs the update revision while us-east holds: %+v", ss)
		}
		if ss.Name == "us-east" {
			c := ss.Checks[0]
			if c.Phase != routingv1alpha1.CheckPhaseInconclusive || c.Inconclusive == 0 || !strings.Contains(c.Message, "no data") {
				t.Fatalf("us-east check %+v", c)
			}
		}
	}
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations[routingv1alpha1.AnnotationPromote] = "looked-at-the-dashboards"
	})
	story.Eventually(t, 2*time.Minute, "eu-west promotes, then holds the same way", held("eu-west"))
}
