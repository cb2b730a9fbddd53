package controllers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// A kept measurement is reused while the status shows the count it was taken at (a stale read, a
// conflicting write), and never once the status shows it recorded, or after its interval.
func TestPendingMeasurements(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) }))
	defer srv.Close()
	key := rollout.MeasurementKey{Shard: "us-east", Check: "smoke", Revision: "r1", When: routingv1alpha1.CheckWhenBake}
	req := rollout.MeasurementRequest{MeasurementKey: key, Check: routingv1alpha1.ShardCheck{Name: "smoke", HTTP: &routingv1alpha1.HTTPCheck{URL: srv.URL}}}
	rsvc := &routingv1alpha1.RoutingService{}
	rsvc.Name, rsvc.Namespace = "rs-a", "default"
	var p pendingMeasurements
	tk := &measure.Taker{}
	now := time.Date(2026, 12, 1, 0, 0, 0, 300_000_000, time.UTC)
	take := func(at time.Time) {
		if got := p.take(context.Background(), tk, rsvc, []rollout.MeasurementRequest{req}, at); got[0].Result.Phase != routingv1alpha1.MeasurementSuccessful {
			t.Fatalf("measurement %+v", got[0])
		}
	}
	take(now)
	take(now.Add(200 * time.Millisecond)) // the status write conflicted, or the cache was stale
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests, want the measurement reused", n)
	}
	// Recorded (count 1), and due again 0.7 s later (status time truncated to the second).
	rsvc.Status.Shards = []routingv1alpha1.ShardStatus{{Name: "us-east", Checks: []routingv1alpha1.ShardCheckStatus{{Name: "smoke", When: key.When, Revision: "r1", Count: 1}}}}
	take(now.Add(700 * time.Millisecond))
	if n := requests.Load(); n != 2 {
		t.Fatalf("%d requests: a recorded measurement was reused", n)
	}
	rsvc.Status.Shards[0].Checks[0].Count = 2
	take(now.Add(time.Hour)) // long after the interval
	if n := requests.Load(); n != 3 {
		t.Fatalf("%d requests: an expired measurement was reused", n)
	}
	p.forget(types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name})
	if len(p.kept) != 0 {
		t.Fatalf("forget kept %v", p.kept)
	}
}
