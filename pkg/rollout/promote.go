package rollout

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/shardstep"
)

// promote walks the shards in spec order and advances the first one that is not yet promoted for
// the update revision; the shards after it are not touched. For that shard:
//
//	Pending     → Progressing (stepStartTime = now), and rolling steps begin; with
//	              schema.check.beforeEachShard, a shard after the first first waits for a check
//	              Job's report (schemarecheck.go)
//	Progressing → Baking once the update revision alone serves it, fully available
//	              → Failed if progressDeadlineSeconds pass first (then failurePolicy applies)
//	Baking      → Promoted bakeSeconds after it was complete (back to Progressing if it stops
//	              being complete meanwhile)
//
// In Progressing and Baking, a failed check at PodReady on one of the update revision's new pods
// fails the shard (podcheck.go); the pods that have not passed it are not available, so the shard
// is not complete before each one passed.
//
// In Progressing, Baking and Promoted (until the last shard is promoted) the pod-health gate
// reads the update revision's pods there (podhealth.go): a container restarted more than
// maxRestarts times fails the shard; a tolerated restart while baking starts the bake over.
//
// A Promoted shard whose counts drift (replicas changed, pods lost) is stepped back towards the
// spec without blocking the shards after it. Promoting the stable revision itself (a revert)
// skips the bake: it is the last-known-good.
func (p *planner) promote() {
	strategy := p.rsvc.Spec.Strategy
	bake := strategy.Bake()
	deadline := strategy.ProgressDeadline() // shardstep.Progress takes a stored 0 as the default
	for i, shard := range p.rsvc.Spec.Shards {
		ss := p.shardStatus(shard.Name)
		set := p.set(shard.Name)
		b := p.budget(shard)
		if view, frozen := p.frozen[shard.Name]; frozen {
			// Its cluster does not answer: an unreachable cluster is not an empty one (S-37).
			if p.holdsAtCluster(shard, view) {
				return
			}
			continue
		}
		if msg := p.mismatch[shard.Name]; msg != "" {
			// S-21, S-22: the shard cannot get the revision's ReplicaSet; nothing in it or after it
			// changes until a person frees the name. A Promoted step stays Promoted in status but
			// Ready is False while this lasts.
			reason := p.mismatchReason[shard.Name]
			msg = fmt.Sprintf("shard %s: %s", shard.Name, msg)
			if old := p.oldCondition(routingv1alpha1.ConditionStalled); old == nil || old.Reason != reason || old.Message != msg {
				p.event(true, reason, "%s", msg)
			}
			p.stall(reason, msg)
			p.requeueAt(p.now.Add(conflictRecheck))
			return
		}
		complete := set.complete(p.update, shard.Replicas)

		switch ss.Step {
		case routingv1alpha1.ShardStepPromoted:
			if p.podHealthGate(ss) {
				return
			}
			if !complete {
				p.rollTowards(shard, p.update, b, "promoted shard drifted from its spec")
			}
			continue
		case routingv1alpha1.ShardStepBaking:
			if p.podHealthGate(ss) || p.podCheckGate(ss) {
				return
			}
			if !complete {
				p.stepTo(ss, routingv1alpha1.ShardStepProgressing)
				p.event(true, EventShardRegressed, "shard %s stopped being fully available while baking revision %s", shard.Name, p.update)
				break
			}
			running, failed := p.runChecks(shard.Name, ss, routingv1alpha1.CheckWhenBake)
			v := shardstep.Bake(shardstep.BakeInput{Start: ss.StepStartTime.Time, Bake: bake, Now: p.now,
				Failed: failed, Running: running, Held: p.checkConflict != "" || p.inconclusive != "", Promote: p.promoteToken != ""})
			if v.UsedPromote {
				// A person decided: the bake, and the checks still running, end now.
				p.event(false, EventBakeSkipped, "promote %q: shard %s's bake ends now, %s early, with %d checks still running", p.promoteToken, shard.Name, v.Early, v.SkippedChecks)
				p.promoteToken, p.inconclusive = "", ""
			}
			switch v.Outcome {
			case shardstep.BakeFailed:
				// A failed check fails the shard at once.
				p.failWith(ss, routingv1alpha1.ReasonShardCheckFailed, failed)
				return
			case shardstep.BakeHeld:
				p.checksHold()
				return
			case shardstep.BakedChecksRunning:
				p.setActivity(routingv1alpha1.ReasonShardBaking, fmt.Sprintf("shard %s is fully on revision %s and baked; %d of its checks still run", shard.Name, p.update, running))
				return
			case shardstep.BakePromoted:
				baked := p.since(ss.StepStartTime)
				p.stepTo(ss, routingv1alpha1.ShardStepPromoted)
				p.promotedNow = true
				p.event(false, EventShardPromoted, "shard %s promoted to revision %s", shard.Name, p.update)
				p.measure(PhaseShardBake, shard.Name, baked)
				p.promoteSpent(shard.Name)
				continue
			}
			p.setActivity(routingv1alpha1.ReasonShardBaking, fmt.Sprintf("shard %s is fully on revision %s and bakes until %s", shard.Name, p.update, v.Until.UTC().Format(time.RFC3339)))
			p.requeueAt(v.Until)
			return
		}

		// Pending or Progressing (or a Failed step of a revision being tried again).
		if ss.Step == routingv1alpha1.ShardStepProgressing && (p.podHealthGate(ss) || p.podCheckGate(ss)) {
			return
		}
		if complete {
			p.passPodChecks(ss)
			var progressed time.Duration
			if ss.Step == routingv1alpha1.ShardStepProgressing {
				progressed = p.since(ss.StepStartTime)
			}
			v := shardstep.Complete(shardstep.CompleteInput{Revert: p.update == p.status.StableRevision, Bake: bake,
				BakeChecks: p.hasChecks(routingv1alpha1.CheckWhenBake), Promote: p.promoteToken != ""})
			if v.UsedPromote {
				// A promote that waited (it came while paused, or before the shard was complete)
				// ends the bake before it starts.
				p.event(false, EventBakeSkipped, "promote %q: shard %s is promoted without its %s bake", p.promoteToken, shard.Name, bake)
				p.promoteToken = ""
			}
			if v.Promoted {
				p.stepTo(ss, routingv1alpha1.ShardStepPromoted)
				p.promotedNow = true
				p.event(false, EventShardPromoted, "shard %s promoted to revision %s", shard.Name, p.update)
				p.measure(PhaseShardProgress, shard.Name, progressed)
				p.promoteSpent(shard.Name)
				continue
			}
			p.stepTo(ss, routingv1alpha1.ShardStepBaking)
			p.event(false, EventShardBaking, "shard %s is fully on revision %s; baking for %ds", shard.Name, p.update, strategy.BakeSecondsOrDefault())
			p.measure(PhaseShardProgress, shard.Name, progressed)
			p.runChecks(shard.Name, ss, routingv1alpha1.CheckWhenBake) // the checks start with the bake
			p.setActivity(routingv1alpha1.ReasonShardBaking, fmt.Sprintf("shard %s is fully on revision %s and bakes until %s", shard.Name, p.update, p.now.Add(v.BakeFor).UTC().Format(time.RFC3339)))
			p.requeueAt(p.now.Add(v.BakeFor))
			return
		}
		if ss.Step != routingv1alpha1.ShardStepProgressing && i > 0 && p.update != p.status.StableRevision && !p.shardCheckPassed(shard.Name) {
			// spec.schema.check.beforeEachShard: the database is asked again first.
			return
		}
		if ss.Step != routingv1alpha1.ShardStepProgressing && p.update != p.status.StableRevision && p.hasChecks(routingv1alpha1.CheckWhenBeforeStart) {
			// Pre-checks: the shard starts once they passed; a failure fails the rollout before
			// the shard is touched.
			running, failed := p.runChecks(shard.Name, ss, routingv1alpha1.CheckWhenBeforeStart)
			if failed != "" {
				p.failWith(ss, routingv1alpha1.ReasonShardCheckFailed, failed)
				return
			}
			if running > 0 && p.promoteToken != "" {
				// A person decided: the shard starts without waiting for its pre-checks.
				p.event(false, EventBakeSkipped, "promote %q: shard %s starts with %d pre-checks still running or inconclusive", p.promoteToken, shard.Name, running)
				p.promoteToken, p.inconclusive, running = "", "", 0
			}
			if running > 0 && p.checksHold() {
				return
			}
			if running > 0 {
				p.setActivity(routingv1alpha1.ReasonShardProgressing, fmt.Sprintf("shard %s starts promoting revision %s once its %d pre-checks pass", shard.Name, p.update, running))
				return
			}
		}
		if ss.Step != routingv1alpha1.ShardStepProgressing {
			p.stepTo(ss, routingv1alpha1.ShardStepProgressing)
			p.event(false, EventShardStarted, "shard %s started promoting revision %s", shard.Name, p.update)
		}
		start := ss.StepStartTime
		if ss.ProgressStartTime != nil {
			start = ss.ProgressStartTime
		}
		v := shardstep.Progress(shardstep.ProgressInput{Start: start.Time, Deadline: deadline, Now: p.now})
		if v.Exceeded {
			p.fail(ss)
			return
		}
		p.rollTowards(shard, p.update, b, "promote")
		p.setActivity(routingv1alpha1.ReasonShardProgressing, fmt.Sprintf("shard %s is promoting revision %s (deadline %s)", shard.Name, p.update, v.Due.UTC().Format(time.RFC3339)))
		p.requeueAt(v.Due)
		return
	}
}

// promoteSpent uses up a promote that was read while shard, the first shard not yet promoted,
// got promoted on its own in this reconcile (its bake ran out in the same second, or it needs no
// bake): the promote was meant for that shard, found nothing left to end there, and is recorded as
// ignored. It never carries over to the next shard, where it would skip a pre-check or a bake
// nobody asked to skip.
func (p *planner) promoteSpent(shard string) {
	if p.promoteToken == "" {
		return
	}
	p.event(false, EventPromoteIgnored, "promote %q: shard %s was promoted on its own in the same reconcile (nothing left to end there); no other shard is promoted early", p.promoteToken, shard)
	p.promoteToken = ""
}

func (p *planner) stepTo(ss *routingv1alpha1.ShardStatus, step routingv1alpha1.ShardStep) {
	if step == routingv1alpha1.ShardStepProgressing && (ss.Step != routingv1alpha1.ShardStepBaking || ss.ProgressStartTime == nil) {
		// A fresh attempt; a regression from Baking keeps its deadline.
		ss.ProgressStartTime = &metav1.Time{Time: p.now}
	}
	ss.Step = step
	ss.StepStartTime = &metav1.Time{Time: p.now}
}

// fail marks the update revision failed at shard for missing its progress deadline.
func (p *planner) fail(ss *routingv1alpha1.ShardStatus) {
	p.failWith(ss, routingv1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("shard %s did not become fully available on revision %s within progressDeadlineSeconds (%ds)",
		ss.Name, p.update, p.rsvc.Spec.Strategy.ProgressDeadlineSecondsOrDefault()))
}

// failWith marks the update revision failed at shard with reason and message, and applies the
// failure policy at once.
func (p *planner) failWith(ss *routingv1alpha1.ShardStatus, reason, message string) {
	p.stepTo(ss, routingv1alpha1.ShardStepFailed)
	p.status.Failure = &routingv1alpha1.RolloutFailure{Revision: p.update, Reason: reason, Shard: ss.Name, Time: metav1.Time{Time: p.now}, Message: message}
	if reason == routingv1alpha1.ReasonProgressDeadlineExceeded {
		p.event(true, EventProgressDeadline, "%s; failurePolicy %s applies", message, p.rsvc.Spec.Strategy.FailurePolicyOrDefault())
	}
	p.handleFailure()
}

// podCheckGate fails shard's step when the check at PodReady failed on the update revision's pods
// there (podCheckFailure). It reports whether it did.
func (p *planner) podCheckGate(ss *routingv1alpha1.ShardStatus) bool {
	msg := p.podCheckFailure(ss)
	if msg == "" {
		return false
	}
	p.failWith(ss, routingv1alpha1.ReasonShardCheckFailed, msg)
	return true
}
