package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Issue 11 (the http and prometheus providers): the planner asks for measurements, counts them,
// and decides; the simulated reconciler answers from a table.

// withMeasuredCheck adds a prometheus check measured every 10 s, count times.
func withMeasuredCheck(w *world, name string, count int32, answer func(MeasurementRequest, int) (routingv1alpha1.MeasurementPhase, string, bool)) {
	w.rsvc.Spec.Strategy.Checks = append(w.rsvc.Spec.Strategy.Checks, routingv1alpha1.ShardCheck{Name: name,
		Prometheus:  &routingv1alpha1.PrometheusCheck{Address: "http://127.0.0.1:9090", Query: `sum(rate(x{shard="{{shard}}"}[30s]))`, SuccessCondition: "result < 0.01"},
		Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(10)), Count: ptr.To(count)}})
	n := map[MeasurementKey]int{}
	w.measure = func(req MeasurementRequest) TakenMeasurement {
		n[req.MeasurementKey]++
		phase, value, fatal := answer(req, n[req.MeasurementKey])
		return TakenMeasurement{MeasurementKey: req.MeasurementKey, Fatal: fatal, Result: routingv1alpha1.MeasurementResult{Phase: phase, Value: value}}
	}
}

func always(phase routingv1alpha1.MeasurementPhase, value string) func(MeasurementRequest, int) (routingv1alpha1.MeasurementPhase, string, bool) {
	return func(MeasurementRequest, int) (routingv1alpha1.MeasurementPhase, string, bool) {
		return phase, value, false
	}
}

func (w *world) measuredIn(shard string) int {
	n := 0
	for _, r := range w.measured {
		if r.Shard == shard {
			n++
		}
	}
	return n
}

// Passing measurements: each shard is measured count times, 10 s apart, with its own name and
// the update revision in the request; promoted only after the third; status keeps the counts.
func TestMeasuredCheckPasses(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w.update("app:v2", "1", "migrate:ok")
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	for _, shard := range []string{"us-east", "eu-west", "ap-south"} {
		if n := w.measuredIn(shard); n != 3 {
			t.Fatalf("%s measured %d times, want 3", shard, n)
		}
	}
	first := w.measured[0]
	if first.Vars["shard"] != "us-east" || first.Vars["revision"] != w.rsvc.Status.UpdateRevision || first.Vars["namespace"] != "default" || first.Vars["name"] != "rs-a" {
		t.Fatalf("vars %v", first.Vars)
	}
	for _, ss := range w.rsvc.Status.Shards {
		c := ss.Checks[0]
		if c.Phase != routingv1alpha1.CheckPhasePassed || c.Count != 3 || c.Successful != 3 || len(c.Measurements) != 3 || c.Revision != w.rsvc.Status.UpdateRevision {
			t.Fatalf("shard %s check %+v", ss.Name, c)
		}
		if gap := c.Measurements[2].Time.Sub(c.Measurements[1].Time.Time); gap < 10*time.Second {
			t.Fatalf("measurements %s apart, interval is 10 s", gap)
		}
	}
	// A restarted manager with the same status asks for nothing more.
	if plan := Compute(w.observed()); len(plan.Measurements) != 0 || len(plan.Actions) != 0 {
		t.Fatalf("a second reconcile measures %v, acts %v", plan.Measurements, plan.Actions)
	}
}

// A failed measurement in us-east fails the shard at once and rolls it back; the message names
// the check and the value; eu-west and ap-south are never measured.
func TestMeasuredCheckFailureRollsBack(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	withMeasuredCheck(w, "404-ratio", 5, func(req MeasurementRequest, n int) (routingv1alpha1.MeasurementPhase, string, bool) {
		if req.Shard == "us-east" && n == 2 {
			return routingv1alpha1.MeasurementFailed, "0.3", false
		}
		return routingv1alpha1.MeasurementSuccessful, "0", false
	})
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	c := w.condition(routingv1alpha1.ConditionStalled)
	if !strings.Contains(c.Message, "check 404-ratio failed in shard us-east during its bake") || !strings.Contains(c.Message, "last: Failed 0.3") {
		t.Fatalf("Stalled = %+v", c)
	}
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	if w.measuredIn("eu-west")+w.measuredIn("ap-south") != 0 {
		t.Fatal("eu-west or ap-south was measured")
	}
}

// failureLimit tolerates failures; one more fails the check.
func TestMeasuredCheckFailureLimit(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "latency", 3, func(_ MeasurementRequest, n int) (routingv1alpha1.MeasurementPhase, string, bool) {
		if n == 1 {
			return routingv1alpha1.MeasurementFailed, "0.2", false
		}
		return routingv1alpha1.MeasurementSuccessful, "0", false
	})
	w.rsvc.Spec.Strategy.Checks[0].FailureLimit = ptr.To(int32(1))
	w.update("app:v2", "1", "migrate:ok")
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if c := w.rsvc.Status.Shards[0].Checks[0]; c.Failed != 1 || c.Successful != 2 || c.Phase != routingv1alpha1.CheckPhasePassed {
		t.Fatalf("check %+v", c)
	}
}

// Errors in a row beyond consecutiveErrorLimit (4) fail the check after 5 measurements: bounded
// (I3) by 5 intervals; an error between successes resets the run.
func TestMeasuredCheckConsecutiveErrors(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementError, ""))
	w.update("app:v2", "1", "migrate:ok")
	start := w.now
	w.run(200, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	if d := w.now.Sub(start); d > 80*time.Second {
		t.Fatalf("5 errors 10 s apart took %s to fail the check", d)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "5 measurements in a row ended in an error (consecutiveErrorLimit 4)") {
		t.Fatalf("Stalled = %+v", c)
	}
}

// A fatal result (a query Prometheus rejects) fails the check at the first measurement.
func TestMeasuredCheckFatal(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "bad-query", 3, func(MeasurementRequest, int) (routingv1alpha1.MeasurementPhase, string, bool) {
		return routingv1alpha1.MeasurementError, "", true
	})
	w.update("app:v2", "1", "migrate:ok")
	w.run(100, func() bool { return w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) })
	if n := len(w.measured); n != 1 {
		t.Fatalf("%d measurements before a fatal result failed the check", n)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "the check cannot run as written") {
		t.Fatalf("Stalled = %+v", c)
	}
}

// Inconclusive results beyond inconclusiveLimit hold the shard (Reconciling, reason
// ShardCheckInconclusive, no failure, nothing rolled back) until a person promotes.
func TestMeasuredCheckInconclusiveHoldsUntilPromoted(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementInconclusive, "NaN"))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		c := w.condition(routingv1alpha1.ConditionReconciling)
		return c != nil && c.Reason == routingv1alpha1.ReasonShardCheckInconclusive
	})
	asked := len(w.measured)
	for i := 0; i < 30; i++ {
		w.step(10 * time.Second)
	}
	if c := w.condition(routingv1alpha1.ConditionReconciling); c.Reason != routingv1alpha1.ReasonShardCheckInconclusive || !strings.Contains(c.Message, "promote to go on, or abort") {
		t.Fatalf("Reconciling = %+v", c)
	}
	if w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) || len(w.measured) != asked {
		t.Fatalf("an inconclusive check failed the shard or went on measuring (%d → %d)", asked, len(w.measured))
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("shards %s", got)
	}
	w.annotate(routingv1alpha1.AnnotationPromote, "looked-at-it")
	w.run(100, func() bool { return w.rsvc.Status.Shards[0].Step == routingv1alpha1.ShardStepPromoted })
}

// A dryRun check that fails is reported and the rollout goes on.
func TestMeasuredCheckDryRun(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "new-metric", 1, always(routingv1alpha1.MeasurementFailed, "9"))
	w.rsvc.Spec.Strategy.Checks[0].DryRun = true
	w.update("app:v2", "1", "migrate:ok")
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if !w.sawEvent(routingv1alpha1.ReasonShardCheckFailed) || w.rsvc.Status.Failure != nil {
		t.Fatalf("dry run: failure %+v", w.rsvc.Status.Failure)
	}
}

// initialDelaySeconds delays the first measurement after the bake starts; paused, nothing is
// measured; a new revision mid-check starts its own count.
func TestMeasuredCheckDelayPauseAndNewRevision(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w.rsvc.Spec.Strategy.Checks[0].InitialDelaySeconds = ptr.To(int32(30))
	w.update("app:v2", "1", "migrate:ok")
	w.run(100, func() bool { return w.rsvc.Status.Shards[0].Step == routingv1alpha1.ShardStepBaking })
	bakeStart := w.rsvc.Status.Shards[0].StepStartTime.Time
	w.run(100, func() bool { return len(w.measured) == 1 })
	if d := w.measured[0]; w.rsvc.Status.Shards[0].Checks[0].Measurements[0].Time.Sub(bakeStart) < 30*time.Second {
		t.Fatalf("first measurement %v before initialDelaySeconds", d)
	}
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	for i := 0; i < 10; i++ {
		w.step(10 * time.Second)
	}
	if len(w.measured) != 1 {
		t.Fatalf("measured %d times while paused", len(w.measured))
	}
	w.rsvc.Spec.Paused = false
	w.update("app:v3", "1", "migrate:ok")
	w.run(100, func() bool {
		cs := w.rsvc.Status.Shards[0].Checks
		return len(cs) == 1 && cs[0].Revision == w.rsvc.Status.UpdateRevision && cs[0].Count == 1
	})
}

// status is untrusted: a hand-edited Passed phase without the counts, or counts that do not add
// up, or measurements dated in the future, start the check over instead of passing it.
func TestMeasuredCheckDistrustsEditedStatus(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 3, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(0))
	w.update("app:v2", "1", "migrate:ok")
	w.run(100, func() bool { return len(w.measured) == 1 })
	rev := w.rsvc.Status.UpdateRevision
	start := metav1.NewTime(w.now.Add(-time.Minute))
	future := metav1.NewTime(w.now.Add(time.Hour))
	for i, edit := range []routingv1alpha1.ShardCheckStatus{
		{Phase: routingv1alpha1.CheckPhasePassed},
		{Phase: routingv1alpha1.CheckPhasePassed, Count: 3, Successful: 30},
		{Phase: routingv1alpha1.CheckPhasePassed, Count: -1, Successful: -1},
		{Phase: routingv1alpha1.CheckPhaseRunning, Count: 1, Successful: 1, Measurements: []routingv1alpha1.MeasurementResult{{Time: future, Phase: routingv1alpha1.MeasurementSuccessful}}},
	} {
		edit.Name, edit.When, edit.Revision, edit.StartTime = "404-ratio", routingv1alpha1.CheckWhenBake, rev, &start
		obs := w.observed()
		obs.RoutingService.Status.Shards[0].Checks = []routingv1alpha1.ShardCheckStatus{edit}
		plan := Compute(obs)
		got := plan.Status.Shards[0]
		if got.Step == routingv1alpha1.ShardStepPromoted || got.Checks[0].Phase != routingv1alpha1.CheckPhaseRunning || got.Checks[0].Count != 0 {
			t.Fatalf("edit %d: step %s check %+v", i, got.Step, got.Checks[0])
		}
		if len(plan.Measurements) != 1 {
			t.Fatalf("edit %d: measurements %v", i, plan.Measurements)
		}
	}
	_ = fmt.Sprint()
}

// No data is not a pass: with inconclusiveLimit raised to 3 and count 1, a first measurement that
// found no data does not pass the check; it measures on until a successful one comes (the default
// minSuccessful is 1), and a run of no data past the limit holds the shard instead. The stable
// revision is in each request ({{stableRevision}}) for comparisons.
func TestMeasuredCheckNeedsMinSuccessful(t *testing.T) {
	w := steady(t)
	stable := w.rsvc.Status.StableRevision
	withMeasuredCheck(w, "routes", 1, func(req MeasurementRequest, n int) (routingv1alpha1.MeasurementPhase, string, bool) {
		if req.Shard == "us-east" && n <= 2 {
			return routingv1alpha1.MeasurementInconclusive, "no data", false
		}
		if req.Shard == "eu-west" {
			return routingv1alpha1.MeasurementInconclusive, "no data", false
		}
		return routingv1alpha1.MeasurementSuccessful, "1", false
	})
	w.rsvc.Spec.Strategy.Checks[0].InconclusiveLimit = ptr.To(int32(3))
	w.update("app:v2", "1", "migrate:ok")
	w.run(400, func() bool { return w.shardStep("us-east") == routingv1alpha1.ShardStepPromoted })
	if n := w.measuredIn("us-east"); n != 3 {
		t.Fatalf("us-east measured %d times: it passed on no data, or measured past its success", n)
	}
	if v := w.measured[0].Vars["stableRevision"]; v != stable || v == "" {
		t.Fatalf("stableRevision %q, want %q", v, stable)
	}
	w.tick() // the controllers act on what that reconcile did
	w.run(400, func() bool {
		return w.reason(routingv1alpha1.ConditionReconciling) == routingv1alpha1.ReasonShardCheckInconclusive
	})
	if n := w.measuredIn("eu-west"); n != 4 {
		t.Fatalf("eu-west measured %d times before it held, want 4 (inconclusiveLimit 3)", n)
	}
	if w.shardStep("eu-west") == routingv1alpha1.ShardStepPromoted {
		t.Fatal("eu-west promoted on no data")
	}
}

// A query whose range is shorter than twice the declared scrape interval is warned about once
// per shard, when its check starts, and measured anyway.
func TestMeasuredCheckWarnsOfAShortWindow(t *testing.T) {
	w := steady(t)
	withMeasuredCheck(w, "404-ratio", 2, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w.rsvc.Spec.Strategy.Checks[0].Prometheus.ScrapeIntervalSeconds = ptr.To(int32(30)) // the query reads [30s]
	w.update("app:v2", "1", "migrate:ok")
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := w.countEvents(EventCheckWindowShort); n != 3 {
		t.Fatalf("%d CheckWindowShort Events, want one per shard (3)", n)
	}
	if n := w.measuredIn("ap-south"); n != 2 {
		t.Fatalf("ap-south measured %d times, want 2", n)
	}
	w2 := steady(t)
	withMeasuredCheck(w2, "404-ratio", 1, always(routingv1alpha1.MeasurementSuccessful, "0"))
	w2.rsvc.Spec.Strategy.Checks[0].Prometheus.ScrapeIntervalSeconds = ptr.To(int32(15))
	w2.update("app:v2", "1", "migrate:ok")
	w2.run(400, func() bool { return w2.isTrue(routingv1alpha1.ConditionReady) })
	if n := w2.countEvents(EventCheckWindowShort); n != 0 {
		t.Fatalf("%d CheckWindowShort Events for a [30s] range scraped every 15 s", n)
	}
}
