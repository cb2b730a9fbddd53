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
