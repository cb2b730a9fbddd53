package controllers

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/measure"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// waitWoken waits for the Event that wakes rsvc after a measurement finished.
func waitWoken(t *testing.T, p *pendingMeasurements, name string, within time.Duration) {
	t.Helper()
	select {
	case e := <-p.Events():
		if e.Object.GetName() != name {
			t.Fatalf("woke %s, want %s", e.Object.GetName(), name)
		}
	case <-time.After(within):
		t.Fatalf("no wake-up within %s", within)
	}
}

// A measurement is taken in the background: the first plan's request starts it and nothing is
// finished, and the RoutingService is woken when it finishes. It is then returned (finished, as
// each reconcile observes) while the status shows the count it was delivered at (a stale read, a
// conflicting write), never once the status shows it recorded, nor after its interval; one in
// flight is never started twice.
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
	// take is one reconcile: it observes what has finished, then starts what its plan asks for
	// (the plan asks for the measurement while none is given to it).
	take := func(at time.Time) []rollout.TakenMeasurement {
		got := p.finished(rsvc, at)
		if len(got) == 0 {
			p.start(tk, nil, rsvc, []rollout.MeasurementRequest{req})
		}
		return got
	}
	measured := func(at time.Time) {
		t.Helper()
		if got := take(at); len(got) != 1 || got[0].Result.Phase != routingv1alpha1.MeasurementSuccessful {
			t.Fatalf("measurement %+v", got)
		}
	}
	now := time.Now()
	if got := take(now); len(got) != 0 {
		t.Fatalf("the first take returned %+v before anything was measured", got)
	}
	waitWoken(t, &p, "rs-a", 5*time.Second)
	measured(now.Add(100 * time.Millisecond))
	measured(now.Add(300 * time.Millisecond)) // the status write conflicted, or the cache was stale
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests, want the measurement reused", n)
	}
	// Recorded (count 1), and due again: a new request.
	rsvc.Status.Shards = []routingv1alpha1.ShardStatus{{Name: "us-east", Checks: []routingv1alpha1.ShardCheckStatus{{Name: "smoke", When: key.When, Revision: "r1", Count: 1}}}}
	if got := take(now.Add(700 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("a recorded measurement was returned again: %+v", got)
	}
	waitWoken(t, &p, "rs-a", 5*time.Second)
	if n := requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	measured(now.Add(800 * time.Millisecond))
	rsvc.Status.Shards[0].Checks[0].Count = 2
	if got := take(time.Now().Add(time.Hour)); len(got) != 0 { // long after the interval
		t.Fatalf("an expired measurement was returned: %+v", got)
	}
	waitWoken(t, &p, "rs-a", 5*time.Second)
	p.forget(types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name})
	if len(p.kept) != 0 {
		t.Fatalf("forget kept %v", p.kept)
	}
}

// An endpoint that never answers holds no caller: start and finished return at once while its
// measurement is in flight, start starts it once however often it is asked, and at most
// MaxMeasurementsInFlightPerRoutingService of one RoutingService run at once.
func TestPendingMeasurementsNeverWait(t *testing.T) {
	release := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	rsvc := &routingv1alpha1.RoutingService{}
	rsvc.Name, rsvc.Namespace = "rs-hung", "default"
	var reqs []rollout.MeasurementRequest
	for i := range MaxMeasurementsInFlightPerRoutingService + 4 {
		reqs = append(reqs, rollout.MeasurementRequest{
			MeasurementKey: rollout.MeasurementKey{Shard: "us-east", Check: "smoke", Revision: "r1", When: routingv1alpha1.CheckWhenPodReady, Pod: string(rune('a' + i))},
			Check: routingv1alpha1.ShardCheck{Name: "smoke", HTTP: &routingv1alpha1.HTTPCheck{URL: srv.URL},
				Measurement: routingv1alpha1.Measurement{TimeoutSeconds: ptr.To(int32(60))}}})
	}
	var p pendingMeasurements
	tk := &measure.Taker{}
	began := time.Now()
	for range 5 {
		p.start(tk, nil, rsvc, reqs)
		if got := p.finished(rsvc, time.Now()); len(got) != 0 {
			t.Fatalf("returned %+v", got)
		}
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("5 takes against a hung endpoint took %s", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for requests.Load() < MaxMeasurementsInFlightPerRoutingService && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := requests.Load(); n != MaxMeasurementsInFlightPerRoutingService {
		t.Fatalf("%d requests in flight, want %d", n, MaxMeasurementsInFlightPerRoutingService)
	}
}

// The metrics count a measurement once, in the plan that records it: one observed but not
// recorded (not due, or kept for a stale read) is not counted.
func TestRecordedBy(t *testing.T) {
	key := rollout.MeasurementKey{Shard: "us-east", Check: "smoke", Revision: "r1", When: routingv1alpha1.CheckWhenBake}
	other := rollout.MeasurementKey{Shard: "eu-west", Check: "smoke", Revision: "r1", When: routingv1alpha1.CheckWhenBake}
	status := func(n int32) *routingv1alpha1.RoutingServiceStatus {
		return &routingv1alpha1.RoutingServiceStatus{Shards: []routingv1alpha1.ShardStatus{
			{Name: "us-east", Checks: []routingv1alpha1.ShardCheckStatus{{Name: "smoke", When: key.When, Revision: "r1", Count: n}}},
			{Name: "eu-west", Checks: []routingv1alpha1.ShardCheckStatus{{Name: "smoke", When: key.When, Revision: "r1", Count: 4}}}}}
	}
	taken := []rollout.TakenMeasurement{{MeasurementKey: key}, {MeasurementKey: other}}
	got := recordedBy(status(1), status(2), taken)
	if len(got) != 1 || got[0].MeasurementKey != key {
		t.Fatalf("recorded %+v, want only us-east's", got)
	}
	if got := recordedBy(status(2), status(2), taken); len(got) != 0 {
		t.Fatalf("recorded %+v with no count raised", got)
	}
}
