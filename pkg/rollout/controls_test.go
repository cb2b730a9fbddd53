package rollout

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Controls (promote, abort, retry) act once, on the shard they were meant for.

// shardStep is shard's step in the stored status.
func (w *world) shardStep(shard string) routingv1alpha1.ShardStep {
	for _, ss := range w.rsvc.Status.Shards {
		if ss.Name == shard {
			return ss.Step
		}
	}
	return ""
}

// untilBakeEnds runs until shard bakes, then moves the clock to the second its bake ends.
func (w *world) untilBakeEnds(shard string) {
	w.t.Helper()
	for i := 0; i < 100 && w.shardStep(shard) != routingv1alpha1.ShardStepBaking; i++ {
		w.step(time.Second)
	}
	for _, ss := range w.rsvc.Status.Shards {
		if ss.Name == shard && ss.Step == routingv1alpha1.ShardStepBaking {
			w.now = ss.StepStartTime.Add(w.rsvc.Spec.Strategy.Bake())
			return
		}
	}
	w.t.Fatalf("shard %s never baked; log:\n%s", shard, strings.Join(w.log, "\n"))
}

// A promote read in the reconcile in which us-east's bake runs out is used up on us-east, with an
// Event saying it had nothing left to end; it never reaches eu-west, which waits for its
// BeforeStart pre-check (still running) or bakes in full (it has no pods: complete at once).
func TestPromoteAsTheBakeEndsActsOnlyThere(t *testing.T) {
	cases := []struct {
		name  string
		setup func(w *world)
		// next checks eu-west after the promote was read.
		next func(w *world, round int) string
	}{
		{"eu-west has a pre-check", func(w *world) {
			withShardCheck(w, "deps", "verify:hang-in-eu-west", false)
			w.rsvc.Spec.Strategy.Checks[0].When = []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenBeforeStart}
		}, func(w *world, _ int) string {
			if w.shardStep("eu-west") != routingv1alpha1.ShardStepPending || w.v2In("eu-west") != 0 {
				return "eu-west started without its pre-check"
			}
			return ""
		}},
		{"eu-west has no pods", func(w *world) {
			w.rsvc.Spec.Shards[1].Replicas = 0
		}, func(w *world, round int) string {
			// Rounds are a second apart: the 10 s bake ends at round 10.
			if w.shardStep("eu-west") == routingv1alpha1.ShardStepPromoted && round < 9 {
				return "eu-west was promoted without its bake"
			}
			return ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := steady(t)
			c.setup(w)
			w.update("app:v2", "1", "migrate:ok")
			w.untilBakeEnds("us-east")
			w.annotate(routingv1alpha1.AnnotationPromote, "now")
			w.events = nil
			for i := 0; i < 15; i++ {
				w.step(time.Second)
				if msg := c.next(w, i); msg != "" {
					t.Fatalf("round %d: %s: steps %+v\nlog:\n%s", i, msg, w.rsvc.Status.Shards, strings.Join(w.log, "\n"))
				}
			}
			if w.shardStep("us-east") != routingv1alpha1.ShardStepPromoted {
				t.Fatalf("us-east: %s", w.shardStep("us-east"))
			}
			if !w.sawEvent(EventPromoteIgnored) || w.sawEvent(EventBakeSkipped) {
				t.Fatalf("want one PromoteIgnored Event and no BakeSkipped: %+v", w.events)
			}
		})
	}
}

// v2In counts the pods asked for of app:v2 in shard.
func (w *world) v2In(shard string) int32 {
	n := int32(0)
	for _, rs := range w.rss {
		if rs.Labels[LabelShard] == shard && rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
			n += ptr.Deref(rs.Spec.Replicas, 0)
		}
	}
	return n
}

// A handled control never acts again when status is lost (a restore that skips status) or
// restored from an older copy: the value handled is recorded on the ReplicaSets.
func TestControlsSurviveALostStatus(t *testing.T) {
	cases := []struct {
		name string
		// use acts with the control once and leaves a healthy rollout of v3 under way or done;
		// it returns the status to restore (nil: none at all).
		use func(w *world) *routingv1alpha1.RoutingServiceStatus
		// check fails when the old value acted again.
		check func(w *world, plan Plan) string
	}{
		{"abort, status wiped after a later rollout completed", func(w *world) *routingv1alpha1.RoutingServiceStatus {
			w.update("app:v2", "1", "migrate:ok")
			w.untilBakeEnds("us-east")
			w.annotate(routingv1alpha1.AnnotationAbort, "a1")
			w.run(100, func() bool { return w.stalledWith(routingv1alpha1.ReasonAborted) && w.v2In("us-east") == 0 })
			w.update("app:v3", "1", "migrate:ok")
			w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
			return nil
		}, func(w *world, plan Plan) string {
			for _, e := range plan.Events {
				if e.Reason == EventAborted || e.Reason == EventRollingBack {
					return "the old abort acted again: " + e.Message
				}
			}
			if a := scaling(plan); len(a) != 0 {
				return "a healthy rollout is scaled"
			}
			return ""
		}},
		{"promote, older status restored while the next rollout bakes", func(w *world) *routingv1alpha1.RoutingServiceStatus {
			w.update("app:v2", "1", "migrate:ok")
			w.untilBakeEnds("us-east")
			w.now = w.now.Add(-5 * time.Second)
			old := w.rsvc.Status.DeepCopy()
			w.annotate(routingv1alpha1.AnnotationPromote, "p1")
			w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
			w.update("app:v3", "1", "migrate:ok")
			for i := 0; i < 100 && w.shardStep("us-east") != routingv1alpha1.ShardStepBaking; i++ {
				w.step(time.Second)
			}
			// The older copy, with us-east's v3 step as it is now.
			old.UpdateRevision, old.StableRevision = w.rsvc.Status.UpdateRevision, w.rsvc.Status.StableRevision
			old.Shards = w.rsvc.Status.Shards
			return old
		}, func(w *world, plan Plan) string {
			for _, e := range plan.Events {
				if e.Reason == EventBakeSkipped {
					return "the old promote acted again: " + e.Message
				}
			}
			return ""
		}},
		{"retry, status wiped after a later revision failed", func(w *world) *routingv1alpha1.RoutingServiceStatus {
			w.update("app:broken", "1", "migrate:ok")
			w.run(200, func() bool {
				return w.stalledWith(routingv1alpha1.ReasonProgressDeadlineExceeded) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
			})
			w.annotate(routingv1alpha1.AnnotationRetry, "r1")
			w.step(time.Second)
			if !w.sawEvent(EventRolloutRetried) {
				w.t.Fatalf("the retry did not act: %v", w.events)
			}
			w.update("app:v2-broken", "1", "migrate:ok")
			w.run(200, func() bool {
				return w.stalledWith(routingv1alpha1.ReasonProgressDeadlineExceeded) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
			})
			old := w.rsvc.Status.DeepCopy()
			old.LastHandledRetry = ""
			return old
		}, func(w *world, plan Plan) string {
			for _, e := range plan.Events {
				if e.Reason == EventRolloutRetried {
					return "the old retry acted again: " + e.Message
				}
			}
			return ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := steady(t)
			restored := c.use(w)
			before := w.shardImages()
			if restored == nil {
				restored = &routingv1alpha1.RoutingServiceStatus{}
			}
			w.rsvc.Status = *restored
			w.events = nil
			// A lost status re-bakes each shard once (10 s each): 60 rounds see that through.
			for i := 0; i < 60; i++ {
				plan := w.step(time.Second)
				if msg := c.check(w, plan); msg != "" {
					t.Fatalf("round %d: %s\nlog:\n%s", i, msg, strings.Join(w.log, "\n"))
				}
			}
			if strings.HasPrefix(c.name, "abort") {
				if got := w.shardImages(); got != before || !w.isTrue(routingv1alpha1.ConditionReady) {
					t.Fatalf("after the status was lost: %s (was %s), Ready %v: %+v\n%s", got, before, w.isTrue(routingv1alpha1.ConditionReady), w.rsvc.Status.Conditions, strings.Join(w.log, "\n"))
				}
			}
		})
	}
}

// A value handled several controls ago (a saved manifest re-applied) is still known (the records'
// bounds are tested in pkg/controls).
func TestControlRecords(t *testing.T) {
	w := steady(t)
	for _, token := range []string{"a1", "a2", "a3"} {
		w.annotate(routingv1alpha1.AnnotationAbort, token)
		w.step(time.Second)
	}
	for _, rs := range w.rss {
		if got := rs.Annotations[annotationHandledAbort]; got != "a1 a2 a3" {
			t.Fatalf("%s records %q", rs.Name, got)
		}
	}
	// The manifest saved when a1 was set, re-applied with no status: a1 does nothing.
	w.update("app:v2", "1", "migrate:ok")
	w.step(time.Second)
	w.annotate(routingv1alpha1.AnnotationAbort, "a1")
	w.rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
	w.events = nil
	for i := 0; i < 5; i++ {
		w.step(time.Second)
	}
	if w.sawEvent(EventAborted) || !w.sawEvent(EventAbortIgnored) {
		t.Fatalf("an abort handled two controls ago acted again: %+v", w.events)
	}
}

// A retry after an abort resumes the aborted rollout: the revision is tried again, shard by
// shard, from the first shard it has not promoted. An abort and a retry read in the same
// reconcile: the abort wins and the retry is reported ignored.
func TestRetryAfterAbortResumes(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool { return w.shardStep("eu-west") == routingv1alpha1.ShardStepProgressing })
	w.annotate(routingv1alpha1.AnnotationAbort, "a1")
	w.run(100, func() bool {
		return w.stalledWith(routingv1alpha1.ReasonAborted) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
	})
	w.events = nil
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" || !w.sawEvent(EventRolloutRetried) || w.sawEvent(EventRetryIgnored) {
		t.Fatalf("a retry after an abort: %s, events %+v", got, w.events)
	}

	// Both at once: the abort wins.
	w.update("app:v3", "1", "migrate:ok")
	w.run(200, func() bool { return w.shardStep("us-east") == routingv1alpha1.ShardStepBaking })
	w.annotate(routingv1alpha1.AnnotationAbort, "a2")
	w.annotate(routingv1alpha1.AnnotationRetry, "r2")
	w.events = nil
	w.run(100, func() bool {
		return w.stalledWith(routingv1alpha1.ReasonAborted) && w.shardImages() == "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3"
	})
	if !w.sawEvent(EventRetryIgnored) || w.sawEvent(EventRolloutRetried) {
		t.Fatalf("abort and retry at once: events %+v", w.events)
	}
}

// A promote given while paused ends only us-east's bake once unpaused: eu-west, complete at once in
// the same reconcile (it has no pods), bakes in full. (The planner once ended the bake of every
// shard after the one the promote was used on, in that reconcile.)
func TestPromoteThatWaitedEndsOneBake(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Shards[1].Replicas = 0
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(100, func() bool { return w.shardStep("us-east") == routingv1alpha1.ShardStepBaking })
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	w.step(time.Second)
	w.annotate(routingv1alpha1.AnnotationPromote, "early")
	w.step(time.Second)
	w.rsvc.Spec.Paused = false
	w.rsvc.Generation++
	promoted := -1
	for i := 0; i < 30; i++ {
		w.step(time.Second)
		if promoted < 0 && w.shardStep("us-east") == routingv1alpha1.ShardStepPromoted {
			promoted = i
		}
		if promoted >= 0 && i-promoted < 9 && w.shardStep("eu-west") == routingv1alpha1.ShardStepPromoted {
			t.Fatalf("round %d: eu-west was promoted %d s after us-east, without its 10 s bake; log:\n%s", i, i-promoted, strings.Join(w.log, "\n"))
		}
	}
	if promoted != 0 || !w.sawEvent(EventBakeSkipped) {
		t.Fatalf("us-east's bake was not ended by the promote (promoted at round %d): %+v", promoted, w.events)
	}
	if w.shardStep("eu-west") != routingv1alpha1.ShardStepPromoted {
		t.Fatalf("eu-west never promoted after its bake: %s", w.shardStep("eu-west"))
	}
}
