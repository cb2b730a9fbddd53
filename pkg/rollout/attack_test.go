package rollout

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Adversarial tests of the planner: odd orders of controls and spec changes, untrusted
// annotations, and checks stricter than the world's own (see attackStep). Each TestAttack… that
// is expected to fail says which promise it breaks and why the expected behaviour is right.

// attackCounts is one shard's asked-for pods and available pods (available above spec.replicas
// are being removed, so they do not count).
type attackCounts struct{ spec, avail int32 }

func (w *world) attackShardCounts() map[string]attackCounts {
	out := map[string]attackCounts{}
	for _, rs := range w.rss {
		c := out[rs.Labels[LabelShard]]
		c.spec += *rs.Spec.Replicas
		c.avail += min(rs.Status.AvailableReplicas, *rs.Spec.Replicas)
		out[rs.Labels[LabelShard]] = c
	}
	return out
}

// attackStep is world.step with stricter checks:
//
//   - I2 (strict): after the plan is applied, the pods still available in a shard (each
//     ReplicaSet's available pods, capped at its new spec.replicas) are at least
//     min(available before, replicas - maxUnavailable): schemagate never removes available pods
//     below the floor;
//   - surge: a shard that is promoting (not rolling back, whose surge is raised on purpose)
//     never asks for more than replicas + maxSurge pods, unless it asked for more before;
//   - I4: a second Compute right after the plan is applied that plans no action records no
//     Event and yields the status just written (one that does plan goes on from the applied
//     actions, as the next watch event would);
//   - I5/S-10: a Compute on the cache as it was before the plan was applied, with the status just
//     written (a stale cache), plans nothing that is not already in the plan;
//   - S-15: at most one live migration Job.
func (w *world) attackStep(d time.Duration) Plan {
	w.t.Helper()
	before := w.attackShardCounts()
	staleObserved := w.observed()
	plan := w.reconcile()
	after := w.attackShardCounts()
	for _, shard := range w.rsvc.Spec.Shards {
		b := ResolveBudget(shard.Replicas, w.rsvc.Spec.Strategy.MaxSurge, w.rsvc.Spec.Strategy.MaxUnavailable)
		bc, ac := before[shard.Name], after[shard.Name]
		if !w.rsvc.Spec.Paused && ac.avail < min(bc.avail, b.MinAvailable()) {
			w.t.Fatalf("I2 (strict): shard %s had %d available pods, the plan leaves %d (floor %d); plan %v\nlog:\n%s",
				shard.Name, bc.avail, ac.avail, b.MinAvailable(), plan.Actions, strings.Join(w.log, "\n"))
		}
		step := routingv1alpha1.ShardStep("")
		for _, ss := range w.rsvc.Status.Shards {
			if ss.Name == shard.Name {
				step = ss.Step
			}
		}
		if step != routingv1alpha1.ShardStepRollingBack && ac.spec > b.Replicas+b.Surge && ac.spec > bc.spec {
			w.t.Fatalf("surge: shard %s (step %s) asks for %d pods > replicas %d + surge %d (asked for %d before): %v",
				shard.Name, step, ac.spec, b.Replicas, b.Surge, bc.spec, plan.Actions)
		}
	}
	if w.loseStatus == nil {
		// Applied actions are changes: a second reconcile may go on from them (a rolling step
		// from the new spec.replicas). When it plans nothing, it must write nothing new.
		again := Compute(w.observed())
		if len(again.Actions) == 0 && (len(again.Events) != 0 || !equalStatus(&again.Status, &w.rsvc.Status)) {
			w.t.Fatalf("I4: a second reconcile that plans nothing records %v and changes the status:\n%+v\n%+v", again.Events, w.rsvc.Status, again.Status)
		}
		// A stale cache (the reconcile before saw none of its own actions yet) with the status
		// just written replans at most the same actions (S-10, I5): no second scale or create.
		stale := staleObserved
		stale.RoutingService = w.rsvc.DeepCopy()
		for _, a := range Compute(stale).Actions {
			if !sameAction(a, plan.Actions) {
				w.t.Fatalf("I5: with a stale cache and the status just written, the planner plans %v, not one of %v", a, plan.Actions)
			}
		}
	}
	w.tickChecked(d)
	return plan
}

func sameAction(a Action, in []Action) bool {
	for _, b := range in {
		if a.Kind != b.Kind || a.Replicas != b.Replicas || a.Order != b.Order {
			continue
		}
		switch {
		case a.ReplicaSet != nil && b.ReplicaSet != nil && a.ReplicaSet.Name == b.ReplicaSet.Name:
			return true
		case a.Job != nil && b.Job != nil && a.Job.Name == b.Job.Name:
			return true
		case a.Record != nil && b.Record != nil && a.Record.Name == b.Record.Name:
			return true
		}
	}
	return false
}

// terminalReasons are the Stalled reasons the README lists: a wait ends in one of them (I3).
var terminalReasons = map[string]bool{
	routingv1alpha1.ReasonMigrationFailed: true, routingv1alpha1.ReasonMigrationDeadline: true,
	routingv1alpha1.ReasonProgressDeadlineExceeded: true, routingv1alpha1.ReasonAborted: true,
	routingv1alpha1.ReasonNameConflict: true, routingv1alpha1.ReasonTemplateMismatch: true,
}

// settle runs attackSteps (one second apart, or up to the planner's requeue when it did nothing)
// until the RoutingService is Ready or Stalled and a reconcile plans nothing, then checks I3 and
// I4 over an hour: nothing more is planned, no Event, the status does not change. It fails after
// limit steps (a wait that is not bounded). It returns the terminal condition's reason.
func (w *world) settle(limit int) string {
	w.t.Helper()
	for i := 0; i < limit; i++ {
		plan := w.attackStep(time.Second)
		terminal := w.isTrue(routingv1alpha1.ConditionReady) || w.isTrue(routingv1alpha1.ConditionStalled)
		// A requeue is a timed transition still to come (a deadline), except the periodic look
		// at a taken name.
		timed := plan.RequeueAfter != 0 && !w.stalledWith(routingv1alpha1.ReasonNameConflict) && !w.stalledWith(routingv1alpha1.ReasonTemplateMismatch)
		if terminal && !timed && len(plan.Actions) == 0 && len(plan.Events) == 0 {
			w.quiet(10, 6*time.Minute)
			if w.isTrue(routingv1alpha1.ConditionReady) {
				w.oneRevisionPerShard()
				return routingv1alpha1.ReasonRolloutComplete
			}
			r := w.reason(routingv1alpha1.ConditionStalled)
			if !terminalReasons[r] {
				w.t.Fatalf("I3: stalled with reason %q, not one of the documented ones", r)
			}
			return r
		}
		if len(plan.Actions) == 0 && plan.RequeueAfter > time.Second {
			w.now = w.now.Add(plan.RequeueAfter - time.Second)
		}
	}
	w.t.Fatalf("I3: neither Ready nor Stalled after %d steps; conditions %+v\nlog (last 40):\n%s", limit, w.rsvc.Status.Conditions, tail(w.log, 40))
	return ""
}

// quiet checks that n reconciles, d apart, plan nothing, record no Event and keep the status.
func (w *world) quiet(n int, d time.Duration) {
	w.t.Helper()
	before := w.rsvc.Status.DeepCopy()
	for i := 0; i < n; i++ {
		plan := w.attackStep(d)
		if len(plan.Actions) != 0 || len(plan.Events) != 0 {
			w.t.Fatalf("I3/I4: %d reconciles after settling, it still plans %v, events %v", i+1, plan.Actions, plan.Events)
		}
		if !equalStatus(before, &w.rsvc.Status) {
			w.t.Fatalf("I4: the status changed while nothing did:\n%+v\n%+v", before, w.rsvc.Status)
		}
	}
}

// oneRevisionPerShard checks that, once Ready, every shard is served by the update revision alone.
func (w *world) oneRevisionPerShard() {
	w.t.Helper()
	for _, shard := range w.rsvc.Spec.Shards {
		var live []string
		for _, rs := range w.rss {
			if rs.Labels[LabelShard] == shard.Name && (*rs.Spec.Replicas > 0 || rs.Status.Replicas > 0) {
				live = append(live, rs.Name)
			}
		}
		want := ReplicaSetName(w.rsvc.Name, shard.Name, w.rsvc.Status.UpdateRevision)
		if shard.Replicas > 0 && (len(live) != 1) {
			w.t.Fatalf("Ready, yet shard %s has live ReplicaSets %v (update revision's is %s)", shard.Name, live, want)
		}
	}
}

// checkEnds checks what Ready and a finished rollback claim: Ready means one live revision per
// shard; "rolled back: shards X, Y back on …" means each of them has one live ReplicaSet.
func (w *world) checkEnds() {
	w.t.Helper()
	if w.isTrue(routingv1alpha1.ConditionReady) {
		w.oneRevisionPerShard()
	}
	c := w.condition(routingv1alpha1.ConditionStalled)
	const marker = "; rolled back: "
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, marker) {
		return
	}
	list := c.Message[strings.Index(c.Message, marker)+len(marker):]
	list = list[:strings.Index(list, " back on")]
	list = strings.TrimPrefix(strings.TrimPrefix(list, "shards "), "shard ")
	for _, shard := range strings.Split(list, ", ") {
		var live []string
		for _, rs := range w.rss {
			if rs.Labels[LabelShard] == shard && (*rs.Spec.Replicas > 0 || rs.Status.Replicas > 0) {
				live = append(live, fmt.Sprintf("%s:%d", rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas))
			}
		}
		sort.Strings(live)
		if len(live) > 1 {
			w.t.Fatalf("Stalled says shard %s is rolled back, yet it runs %v", shard, live)
		}
	}
}

func tail(l []string, n int) string {
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// rsOf returns the ReplicaSet of shard running image.
func (w *world) rsOf(shard, image string) *appsv1.ReplicaSet {
	for _, rs := range w.rss {
		if rs.Labels[LabelShard] == shard && rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs
		}
	}
	w.t.Fatalf("no ReplicaSet of %s in %s", image, shard)
	return nil
}

func (w *world) stalledWith(reason string) bool {
	c := w.condition(routingv1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

// untilStep steps until done or limit steps pass.
func (w *world) untilStep(limit int, done func() bool) {
	w.t.Helper()
	for i := 0; i < limit; i++ {
		w.attackStep(time.Second)
		if done() {
			return
		}
	}
	w.t.Fatalf("not done after %d steps; log (last 40):\n%s", limit, tail(w.log, 40))
}

// ---------------------------------------------------------------------------------------------
// Failures found by an adversarial review of the planner, each fixed; "Breaks" names the promise
// the input broke before its fix.

// Breaks I4 and I3 (and S-17, see below). The served-at annotation is untrusted input written
// from the manager's clock; a value in the future (a previous leader whose clock was ahead, a
// restored backup, a hand edit) on a ReplicaSet that no longer serves makes markServed re-mark
// the serving ReplicaSet on every reconcile: lastServed picks the future one, so "already the
// last served" is never true. Each MarkServed is a write, whose watch event triggers the next
// reconcile: a loop for as long as the clock is behind the bad value. Expected: in steady state a
// reconcile plans nothing (TestSteadyStateIsAFixedPoint), whatever an annotation says.
func TestAttackFutureServedAtMarksForever(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	if r := w.settle(300); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("v2 ended %s", r)
	}
	SetServedOrder(w.rsOf("us-east", "app:v1"), maxServedOrder)
	w.step(time.Second) // the lie is repaired once
	for i := 0; i < 3; i++ {
		if plan := w.step(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("reconcile %d in steady state planned %v", i+1, plan.Actions)
		}
	}
}

// Breaks S-17 ("back to the revision that served it last"). With a served-at in the future on
// the v1 ReplicaSet of us-east (as above), a v3 that fails in us-east returns us-east to v1,
// although v2 served it — completely, as the stable revision — until v3 started. Worse, v2 is
// never scaled down (only the failed revision is), so us-east ends with v1 1 + v2 3, "rolled
// back". A served-at later than now cannot be a fact; it must not outrank one that is.
func TestAttackFutureServedAtRollsBackToWrongRevision(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.settle(300)
	SetServedOrder(w.rsOf("us-east", "app:v1"), maxServedOrder)
	w.update("app:broken", "1", "migrate:ok")
	w.run(300, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	})
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the rollback: %s\nlog:\n%s", got, strings.Join(w.log, "\n"))
	}
}

// Breaks the Controls promise "While spec.paused is true a retry or promote waits: it is not
// recorded as handled and acts once after unpausing (S-16)". A promote given while a shard bakes
// and the RoutingService is paused is reported PromoteIgnored after unpausing and the shard bakes
// its full bakeSeconds: pausing reset the bake to Pending, so on the first unpaused reconcile the
// shard re-enters Baking and the promote finds "no shard baking". The user asked to end this
// shard's bake; the only bake there is on resume is that shard's.
func TestAttackPromoteWhilePausedIsIgnored(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(3600))
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(100, func() bool {
		return w.reason(routingv1alpha1.ConditionReconciling) == routingv1alpha1.ReasonShardBaking
	})
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	w.attackStep(time.Second)
	w.annotate(routingv1alpha1.AnnotationPromote, "go")
	for i := 0; i < 3; i++ {
		w.attackStep(time.Second)
	}
	w.rsvc.Spec.Paused = false
	w.rsvc.Generation++
	for i := 0; i < 5; i++ {
		w.attackStep(time.Second)
	}
	if w.sawEvent(EventPromoteIgnored) || !w.sawEvent(EventBakeSkipped) {
		t.Fatalf("the promote given while paused must end us-east's bake once unpaused; log:\n%s", strings.Join(w.log, "\n"))
	}
	if !strings.Contains(w.shardImages(), "eu-west=app:v2") {
		t.Fatalf("us-east still bakes: %s", w.shardImages())
	}
}

// Breaks the Abort promise: "A rollout in progress is rolled back as by failurePolicy: Rollback
// whatever the policy says". With failurePolicy Halt, a shard that missed its deadline is left
// mid-step (v1 3 + broken 1 in us-east), Stalled, "nothing more is changed until the spec
// changes". Abort is the documented way to get back to what served; "whatever the policy says" has
// no other case to be about than Halt. Observed: AbortIgnored ("no rollout is in progress") and the
// broken ReplicaSet keeps its pod. Expected: us-east rolled back to v1, Stalled reason Aborted.
func TestAttackAbortAfterHaltIsIgnored(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
	w.update("app:broken", "1", "migrate:ok")
	if r := w.settle(300); r != routingv1alpha1.ReasonProgressDeadlineExceeded {
		t.Fatalf("halted with %s", r)
	}
	w.annotate(routingv1alpha1.AnnotationAbort, "1")
	w.settle(100)
	if w.sawEvent(EventAbortIgnored) || !w.stalledWith(routingv1alpha1.ReasonAborted) {
		t.Fatalf("abort after a halted failure: Stalled %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after the abort: %s", got)
	}
}

// Breaks S-17 ("back to the revision that last fully served it"). Cleanup deletes the oldest
// scaled-down ReplicaSets by creation time, keeping only the update and stable revisions'. Here v2
// served us-east (promoted in us-east and eu-west, stable still v1), two broken revisions failed
// in us-east and were rolled back to v2, then v5 took us-east: v2 is now scaled down, and, being
// created before v3 and v4, it is the first deleted (revisionHistoryLimit 2). Aborting v5 then
// returns us-east to v1, which has not served it since before v2. The Deployment controller keeps
// the revision it rolled back to (it becomes the newest revision); schemagate should keep the
// ReplicaSet each shard would return to.
func TestAttackCleanupDeletesTheLastServedRevision(t *testing.T) {
	w := steady(t)
	s17(t, w) // v2 promoted in us-east and eu-west, baking in ap-south; app:broken applied
	rolledBack := func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	}
	w.run(300, rolledBack)
	w.update("app:broken-again", "1", "migrate:ok")
	w.run(300, rolledBack)
	w.update("app:v5", "1", "migrate:ok")
	w.run(300, func() bool {
		return w.reason(routingv1alpha1.ConditionReconciling) == routingv1alpha1.ReasonShardBaking
	})
	w.annotate(routingv1alpha1.AnnotationAbort, "1")
	w.run(300, rolledBack)
	if got := w.shardImages(); !strings.Contains(got, "us-east=app:v2:3") {
		t.Fatalf("us-east must go back to v2, which served it last: %s\nlog:\n%s", got, tail(w.log, 30))
	}
}

// Breaks S-18 ("Changing one shard's replicas … scales the revision serving that shard at once
// … when stalled"; "Available never reports a shortage the operator is not fixing"). A
// NameConflict on us-east's ReplicaSet for the new revision stalls the rollout; raising us-east's
// replicas then scales nothing — resize skips a shard with a conflict — and Available=False
// reports a shortage schemagate is not acting on. The serving v1 ReplicaSet is ours and has
// nothing to do with the taken name.
func TestAttackReplicaChangeIgnoredDuringNameConflict(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	rev := Revision(&w.rsvc.Spec)
	w.conflicts = []Conflict{{Kind: "ReplicaSet", Name: ReplicaSetName("rs-a", "us-east", rev), Holder: "someone else's"}}
	w.step(time.Second)
	if !w.stalledWith(routingv1alpha1.ReasonNameConflict) {
		t.Fatalf("Stalled = %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	w.setReplicas("us-east", 5)
	plan := Compute(w.observed())
	for _, a := range plan.Actions {
		if a.Kind == ScaleReplicaSet && a.ReplicaSet.Name == w.rsOf("us-east", "app:v1").Name && a.Replicas == 5 {
			return
		}
	}
	t.Fatalf("us-east (served by v1) not resized to 5 while stalled on a name conflict: planned %v; Available %+v",
		plan.Actions, meta.FindStatusCondition(plan.Status.Conditions, routingv1alpha1.ConditionAvailable))
}

// Breaks S-18 ("Changing one shard's replicas … in a shard the rollout has not reached, scales
// the revision serving that shard at once") and the Available promise. A shard set to 0 replicas
// and then back to 3, while the migration runs (or in a shard the rollout has not reached), stays
// at 0: resize only looks at ReplicaSets with replicas > 0, so the ReplicaSet that served the
// shard (v1, confirmed, scaled to 0 a moment ago) is never scaled up again. Available=False
// reports a shortage schemagate is not fixing, until the rollout happens to reach the shard
// (never, if the migration then fails).
func TestAttackShardScaledToZeroNeverComesBack(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.step(time.Second)
	w.setReplicas("ap-south", 0)
	w.step(time.Second)
	w.setReplicas("ap-south", 3)
	plan := Compute(w.observed())
	for _, a := range plan.Actions {
		if a.Kind == ScaleReplicaSet && a.ReplicaSet.Name == w.rsOf("ap-south", "app:v1").Name && a.Replicas == 3 {
			return
		}
	}
	t.Fatalf("ap-south back to 3 replicas: planned %v (shards %s); Available %+v", plan.Actions, w.shardImages(),
		meta.FindStatusCondition(plan.Status.Conditions, routingv1alpha1.ConditionAvailable))
}

// Breaks "A newer revision arriving mid-rollout supersedes the one in flight … and each shard
// ends with one live revision" and the rollback promise ("each back to the revision that served
// it last"). v2 is mid-step in us-east (v1 2 + v2 2) when v3 arrives; v3 never gets ready, misses
// its deadline and is rolled back. handleFailure counts a shard as rolled back as soon as the
// failed revision (v3) is at 0, although v2 — which never served the shard — still has pods; resize
// then keeps v1 3 + v2 1 for good, and Stalled says us-east is "back on" v1. Expected: us-east
// ends served by v1 alone.
func TestAttackRollbackLeavesSupersededRevisionRunning(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(30, func() bool { return strings.Contains(w.shardImages(), "us-east=app:v2:2") })
	w.update("app:broken", "1", "migrate:ok")
	if r := w.settle(300); r != routingv1alpha1.ReasonProgressDeadlineExceeded {
		t.Fatalf("ended %s", r)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after the rollback: %s; Stalled: %s", got, w.condition(routingv1alpha1.ConditionStalled).Message)
	}
}

// Breaks S-15 ("While a migration Job of the RoutingService is active or terminating, no other
// migration Job starts"). The running attempt-1 Job is deleted by a person with background
// propagation: the Job object is gone at once, its pod still runs (the garbage collector deletes
// it later, and it takes its grace period to stop). The planner sees that pod (Observed.Pods
// holds the migration pods) yet creates attempt 1 again straight away, so two migration pods of
// schema 2 run at once. Expected: wait while a migration pod of this RoutingService still runs.
func TestAttackDeletedJobWhosePodStillRuns(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.step(time.Second)
	name := MigrationJobName("rs-a", "2", 1)
	job := w.jobs[name]
	if job == nil {
		t.Fatal("no attempt 1")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-x7k2p", Namespace: "default", Labels: job.Spec.Template.Labels,
			CreationTimestamp: metav1.Time{Time: w.now.Add(-time.Second)}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	delete(w.jobs, name)
	o := w.observed()
	o.Pods = []*corev1.Pod{pod}
	plan := Compute(o)
	for _, a := range plan.Actions {
		if a.Kind == CreateJob {
			t.Fatalf("created %s while pod %s of the deleted attempt still runs", a.Job.Name, pod.Name)
		}
	}
}

// Breaks S-06 ("no automatic retry loop") and S-23 (evidence that disappears: "a
// ttlSecondsAfterFinished set by a policy"). A failed migration Job is kept for its logs until a
// retry; if it disappears anyway (a TTL policy, a person tidying up), schemagate creates attempt 1
// again at once, with no retry annotation and no changed template. Under a TTL policy that is the
// loop S-06 forbids: fail, deleted, re-run, fail, … against a dirty database. The fact that attempt
// 1 of schema 2 failed is in status.schema (untrusted for opening the gate, but safe to hold back
// on). Expected: no new Job without a retry or a changed migration template.
func TestAttackFailedJobDeletedIsRetriedAutomatically(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail")
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationFailed) })
	name := MigrationJobName("rs-a", "2", 1)
	created := 0
	for i := 0; i < 5; i++ {
		delete(w.jobs, name) // the TTL controller
		for _, a := range w.step(time.Minute).Actions {
			if a.Kind == CreateJob {
				created++
			}
		}
	}
	if created > 0 {
		t.Fatalf("a failed migration ran %d more times with no retry asked; SchemaReady %s", created, w.reason(routingv1alpha1.ConditionSchemaReady))
	}
}

// Breaks the Retry control ("A failed or timed-out migration runs again as a new Job, attempt
// n+1") and S-21 ("cleared when the name is free": "goes on once the name is free"). A retry of a
// failed migration whose attempt-2 name is taken reports NameConflict — and, in the same
// reconcile, RetryIgnored ("no failed migration or shard to retry; nothing changed", which is
// false) and records the retry as handled. Once the name is free, the retry is gone: Stalled
// MigrationFailed again and attempt 2 never runs. Expected: the retry waits, unhandled, like a
// retry while paused, and attempt 2 starts once the name is free.
func TestAttackRetryLostToNameConflict(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail-once")
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationFailed) })
	w.conflicts = []Conflict{{Kind: "Job", Name: MigrationJobName("rs-a", "2", 2), Holder: "rs-a-schema-…-2 exists with no controller"}}
	w.annotate(routingv1alpha1.AnnotationRetry, "1")
	w.step(time.Second)
	if !w.stalledWith(routingv1alpha1.ReasonNameConflict) {
		t.Fatalf("Stalled = %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	w.conflicts = nil // the name is free
	for i := 0; i < 60 && !w.isTrue(routingv1alpha1.ConditionReady); i++ {
		w.step(time.Second)
	}
	if _, ok := w.jobs[MigrationJobName("rs-a", "2", 2)]; !ok {
		t.Fatalf("attempt 2 never ran after the name was freed (RetryIgnored recorded: %v, lastHandledRetry %q); Stalled %s: %s",
			w.sawEvent(EventRetryIgnored), w.rsvc.Status.LastHandledRetry,
			w.reason(routingv1alpha1.ConditionStalled), w.condition(routingv1alpha1.ConditionStalled).Message)
	}
}

// Breaks I3 ("every wait is bounded and ends in a terminal condition with a precise reason").
// A retry of a failed migration waits for the failed attempt's pods to stop (two migrations never
// run at once) — rightly — but if one never stops (a pod stuck Terminating on a node that went
// NotReady, a common sight), it waits forever as Reconciling=True / SchemaReady=False Migrating,
// requeueing every 5 s, never Stalled. Expected: after a bound (the migration's deadline, say)
// Stalled=True with a reason naming the pods that do not stop.
func TestAttackRetryWaitsForeverForATerminatingPod(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail")
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationFailed) })
	w.jobs[MigrationJobName("rs-a", "2", 1)].Status.Terminating = ptr.To(int32(1)) // stuck
	w.annotate(routingv1alpha1.AnnotationRetry, "1")
	w.settle(400) // 400 reconciles, 5 s apart: over half an hour
}

// Breaks "Shards are promoted in order … The shards after it are not touched" under S-19
// ("Status is untrusted input … is sanitised"). A hand-edited or restored status that calls the
// new revision Promoted in every shard, while no shard has its ReplicaSet, makes every shard
// "drift" and all three are rolled at once, with no bake: one edit of status bypasses progressive
// delivery. A step Promoted for a revision that has no ReplicaSet in the shard cannot be true and
// should be sanitised like an unknown step. Expected: only us-east is touched.
func TestAttackHandEditedPromotedStepsRollEveryShardAtOnce(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	rev := Revision(&w.rsvc.Spec)
	for i := range w.rsvc.Status.Shards {
		w.rsvc.Status.Shards[i].Step = routingv1alpha1.ShardStepPromoted
		w.rsvc.Status.Shards[i].StepRevision = rev
	}
	for _, a := range w.step(time.Second).Actions {
		if a.ReplicaSet != nil && a.ReplicaSet.Labels[LabelShard] != "us-east" {
			t.Fatalf("a shard after us-east was touched: %v", a)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Regression tests that pass: odd orders the planner handles.

// "2" → "2.0" → "3" → "2" while schema 2's migration hangs: re-spelling acts on nothing, schema 3
// waits for the running Job (never two migrations), and back on "2" with a fixed migration
// template attempt 1 is suspended and attempt 2 runs (no schema-3 Job ever starts); every wait is
// bounded and the end has one live revision per shard.
func TestAttackVersionRespellingAndLowering(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.untilStep(5, func() bool { return len(w.jobs) == 2 })
	w.update("app:v2", "2.0", "migrate:hang")
	for i := 0; i < 3; i++ {
		if plan := w.attackStep(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("respelling acted: %v", plan.Actions)
		}
	}
	w.update("app:v3", "3", "migrate:ok")
	w.attackStep(time.Second)
	if w.reason(routingv1alpha1.ConditionSchemaReady) != routingv1alpha1.ReasonWaitingForMigration {
		t.Fatalf("schema 3: SchemaReady %s", w.reason(routingv1alpha1.ConditionSchemaReady))
	}
	w.update("app:v2", "2", "migrate:ok")
	if r := w.settle(400); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
	if _, ok := w.jobs[MigrationJobName("rs-a", "2", 2)]; !ok || len(w.jobs) != 3 {
		t.Fatalf("want schema 1, schema 2 attempts 1 and 2: %d Jobs", len(w.jobs))
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("end: %s", got)
	}
}

// A schema version lowered while its migration runs: the lower version is confirmed already,
// so the spec rolls on it; the higher version's Job is left alone, and a later return to the higher
// version reuses it.
func TestAttackVersionLoweredWhileMigrating(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.settle(300)
	w.update("app:v3", "3", "migrate:hang")
	w.untilStep(5, func() bool { return w.reason(routingv1alpha1.ConditionSchemaReady) == routingv1alpha1.ReasonMigrating })
	w.update("app:v2b", "2", "migrate:hang")
	if r := w.settle(300); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
	jobs := len(w.jobs)
	w.update("app:v3", "3", "migrate:hang")
	w.attackStep(time.Second)
	if len(w.jobs) != jobs {
		t.Fatalf("going back to schema 3 created another Job")
	}
}

// Replicas to 0 and back in the shard being stepped: no I1/I2/surge breach and a complete rollout.
func TestAttackReplicasZeroAndBackMidStep(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(30, func() bool { return strings.Contains(w.shardImages(), "us-east=app:v2:1") })
	w.setReplicas("us-east", 0)
	w.attackStep(time.Second)
	w.attackStep(time.Second)
	w.setReplicas("us-east", 3)
	w.attackStep(time.Second)
	w.setReplicas("us-east", 4)
	if r := w.settle(400); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
	if got := w.shardImages(); got != "us-east=app:v2:4 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("end: %s", got)
	}
}

// Shards reordered, removed, re-added and added while a rollout is mid-way: the end state has one
// live revision per shard, and a removed shard's ReplicaSets are gone.
func TestAttackShardsChangedMidRollout(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(60, func() bool { return strings.Contains(w.shardImages(), "eu-west=app:v2") })
	sh := w.rsvc.Spec.Shards
	w.rsvc.Spec.Shards = []routingv1alpha1.ShardSpec{sh[2], sh[0], sh[1]}
	w.rsvc.Generation++
	for i := 0; i < 5; i++ {
		w.attackStep(time.Second)
	}
	w.rsvc.Spec.Shards = []routingv1alpha1.ShardSpec{sh[0], sh[1]}
	w.rsvc.Generation++
	for i := 0; i < 5; i++ {
		w.attackStep(time.Second)
	}
	extra := routingv1alpha1.ShardSpec{Name: "sa-east", Replicas: 2, NodeSelector: map[string]string{"topology.kubernetes.io/region": "sa-east"}}
	w.rsvc.Spec.Shards = []routingv1alpha1.ShardSpec{extra, sh[0], sh[1]}
	w.rsvc.Generation++
	if r := w.settle(600); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
	if got := w.shardImages(); got != "sa-east=app:v2:2 us-east=app:v2:3 eu-west=app:v2:3" {
		t.Fatalf("end: %s", got)
	}
	for name := range w.rss {
		if strings.Contains(name, "ap-south") {
			t.Fatalf("removed shard's ReplicaSet %s left", name)
		}
	}
}

// A newer revision arriving while a failed one is being rolled back: it supersedes the rollback
// and completes with one live revision per shard.
func TestAttackNewRevisionDuringRollback(t *testing.T) {
	w := steady(t)
	w.update("app:broken", "1", "migrate:ok")
	w.untilStep(200, func() bool { return w.sawEvent(EventRollingBack) })
	w.update("app:v3", "2", "migrate:ok")
	if r := w.settle(400); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
	if got := w.shardImages(); got != "us-east=app:v3:3 eu-west=app:v3:3 ap-south=app:v3:3" {
		t.Fatalf("end: %s", got)
	}
}

// Halt, then replica changes up and down in the halted shard and in one the rollout never reached:
// applied at once within the surge, never removing the serving set's available pods (attackStep),
// and a later good spec completes.
func TestAttackHaltWithReplicaChanges(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
	w.update("app:broken", "1", "migrate:ok")
	w.settle(300)
	w.setReplicas("us-east", 8)
	w.setReplicas("ap-south", 1)
	w.attackStep(time.Second)
	if got := w.shardImages(); !strings.Contains(got, "us-east=app:v1:8") || !strings.Contains(got, "ap-south=app:v1:1") {
		t.Fatalf("not resized: %s", got)
	}
	w.setReplicas("us-east", 2)
	if r := w.settle(100); r != routingv1alpha1.ReasonProgressDeadlineExceeded {
		t.Fatalf("ended %s", r)
	}
	w.update("app:v4", "1", "migrate:ok")
	if r := w.settle(400); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
}

// Pause, abort, retry and promote in odd orders: each control acts at most once, paused scales
// nothing, and the end is terminal and quiet.
func TestAttackControlsInOddOrders(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail-once")
	if r := w.settle(100); r != routingv1alpha1.ReasonMigrationFailed {
		t.Fatalf("ended %s", r)
	}
	w.annotate(routingv1alpha1.AnnotationPromote, "p1") // nothing bakes
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	w.annotate(routingv1alpha1.AnnotationAbort, "a1")
	for i := 0; i < 3; i++ {
		if plan := w.attackStep(time.Second); len(scaling(plan)) != 0 {
			t.Fatalf("paused, yet planned %v", scaling(plan))
		}
	}
	w.rsvc.Spec.Paused = false
	w.rsvc.Generation++
	r := w.settle(300)
	jobs := len(w.jobs)
	w.annotate(routingv1alpha1.AnnotationRetry, "r2")
	w.annotate(routingv1alpha1.AnnotationAbort, "a2")
	w.settle(300)
	if len(w.jobs) > jobs+1 {
		t.Fatalf("a retry started more than one attempt")
	}
	w.update("app:v3", "2", "migrate:ok")
	if r2 := w.settle(400); r2 != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("after %s, a new spec ended %s", r, r2)
	}
}

// A NameConflict on a shard's ReplicaSet that appears mid-rollout and vanishes: stalled without
// looping, then the rollout completes.
func TestAttackConflictAppearsAndVanishes(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.untilStep(60, func() bool { return strings.Contains(w.shardImages(), "us-east=app:v2:3") })
	rev := Revision(&w.rsvc.Spec)
	w.conflicts = []Conflict{{Kind: "ReplicaSet", Name: ReplicaSetName("rs-a", "eu-west", rev), Holder: "held by a test"}}
	if r := w.settle(100); r != routingv1alpha1.ReasonNameConflict {
		t.Fatalf("ended %s", r)
	}
	w.conflicts = nil
	if r := w.settle(300); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("ended %s", r)
	}
}

// Step and Resize, exhaustively on small shards: never above replicas + surge when not above it
// before, and never fewer available pods than min(available before, replicas - maxUnavailable)
// once the ReplicaSet controller removes the pods asked away (unavailable first).
func TestAttackStepAndResizeBounds(t *testing.T) {
	after := func(c Counts, spec int32) int32 { // available pods left when c is scaled to spec
		return min(c.Available, spec)
	}
	check := func(what string, b Budget, in []Counts, out []int32) {
		var totalIn, totalOut, availIn, availOut int32
		for i, c := range in {
			totalIn += c.Spec
			totalOut += out[i]
			availIn += c.Available
			availOut += after(c, out[i])
			if out[i] < 0 {
				t.Fatalf("%s %+v %+v: negative replicas %v", what, b, in, out)
			}
		}
		if totalOut > b.Replicas+b.Surge && totalOut > totalIn {
			t.Fatalf("%s %+v %+v → %v: asks for %d > %d + %d", what, b, in, out, totalOut, b.Replicas, b.Surge)
		}
		if availOut < min(availIn, b.MinAvailable()) {
			t.Fatalf("%s %+v %+v → %v: available %d → %d, floor %d", what, b, in, out, availIn, availOut, b.MinAvailable())
		}
	}
	for r := int32(0); r <= 5; r++ {
		for _, surge := range []int32{0, 1, 2} {
			for _, unav := range []int32{0, 1} {
				if surge == 0 && unav == 0 || unav > r {
					continue
				}
				b := Budget{Replicas: r, Surge: surge, Unavailable: unav}
				for ts := int32(0); ts <= 6; ts++ {
					for ta := int32(0); ta <= ts; ta++ {
						for os := int32(0); os <= 6; os++ {
							for oa := int32(0); oa <= os; oa++ {
								nt, no := Step(b, Counts{ts, ta}, []Counts{{os, oa}})
								check("Step", b, []Counts{{ts, ta}, {os, oa}}, []int32{nt, no[0]})
								if ts > 0 && os > 0 {
									check("Resize", b, []Counts{{os, oa}, {ts, ta}}, Resize(b, []Counts{{os, oa}, {ts, ta}}))
								}
							}
						}
					}
				}
			}
		}
	}
}

// Seeded random sequences of spec changes and controls, each followed by a good spec: every step
// keeps I1, I2 (strict), the surge bound and I4 (attackStep), never two migrations, and the end
// is Ready with one live revision per shard, quiet afterwards.
func TestAttackRandomSequencesConverge(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewSource(seed))
			w := steady(t)
			var trace []string
			if r.Intn(2) == 0 {
				w.rsvc.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
			}
			// maxUnavailable stays 0: the world's own I2 check (sim_test.go) reads I2 as
			// "never below replicas" and so reports every maxUnavailable > 0 step.
			budgets := [][2]intstr.IntOrString{
				{intstr.FromString("25%"), intstr.FromInt32(0)},
				{intstr.FromInt32(0), intstr.FromInt32(0)},
				{intstr.FromInt32(2), intstr.FromInt32(0)},
				{intstr.FromString("100%"), intstr.FromString("0%")},
			}
			bud := budgets[r.Intn(len(budgets))]
			w.rsvc.Spec.Strategy.MaxSurge, w.rsvc.Spec.Strategy.MaxUnavailable = &bud[0], &bud[1]
			trace = append(trace, fmt.Sprintf("surge %s unavailable %s", bud[0].String(), bud[1].String()))
			version := 1
			images := []string{"app:v2", "app:v3", "app:broken", "app:v4"}
			defer func() {
				if t.Failed() {
					t.Logf("seed %d events: %s", seed, strings.Join(trace, ", "))
				}
			}()
			for i := 0; i < 25; i++ {
				ev := r.Intn(12)
				switch ev {
				case 0, 1:
					img := images[r.Intn(len(images))]
					trace = append(trace, "image "+img)
					w.update(img, fmt.Sprint(version), w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image)
				case 2:
					version++
					mig := []string{"migrate:ok", "migrate:fail-once", "migrate:ok", "migrate:hang"}[r.Intn(4)]
					img := images[r.Intn(len(images))]
					trace = append(trace, fmt.Sprintf("schema %d %s %s", version, img, mig))
					w.update(img, fmt.Sprint(version), mig)
				case 3:
					w.rsvc.Spec.Paused = !w.rsvc.Spec.Paused
					w.rsvc.Generation++
					trace = append(trace, fmt.Sprint("paused ", w.rsvc.Spec.Paused))
				case 4:
					trace = append(trace, "abort")
					w.annotate(routingv1alpha1.AnnotationAbort, fmt.Sprint(i))
				case 5:
					trace = append(trace, "retry")
					w.annotate(routingv1alpha1.AnnotationRetry, fmt.Sprint(i))
				case 6:
					trace = append(trace, "promote")
					w.annotate(routingv1alpha1.AnnotationPromote, fmt.Sprint(i))
				case 7:
					shard := w.rsvc.Spec.Shards[r.Intn(3)].Name
					n := int32(1 + r.Intn(5))
					trace = append(trace, fmt.Sprintf("replicas %s=%d", shard, n))
					w.setReplicas(shard, n)
				}
				steps := 1 + r.Intn(40)
				trace = append(trace, fmt.Sprint(steps, "s"))
				for j := 0; j < steps; j++ {
					w.attackStep(time.Second)
					w.checkEnds()
				}
			}
			if w.rsvc.Spec.Paused {
				w.rsvc.Spec.Paused = false
				w.rsvc.Generation++
			}
			// I3: whatever the sequence left, it ends Ready or Stalled with a documented reason.
			ended := w.settle(1500)
			w.checkEnds()
			trace = append(trace, "ended "+ended)
			version++
			w.update("app:final", fmt.Sprint(version), "migrate:ok")
			if got := w.settle(1500); got != routingv1alpha1.ReasonRolloutComplete {
				t.Fatalf("the final good spec ended %s: %s", got, w.condition(routingv1alpha1.ConditionStalled).Message)
			}
		})
	}
}

// I5 and S-17: a third of the status writes are lost (409s) through a failed-then-retried
// migration, a failed revision and a good one: never two migrations, I1/I2 every step, exactly one
// Job per (version, attempt), and the same end state as without the losses.
func TestAttackLostStatusWritesConverge(t *testing.T) {
	for seed := int64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewSource(seed))
		w := steady(t)
		// Every Job stays, so that counting them counts the migrations that ran.
		w.rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(int32(10))
		w.loseStatus = func(Plan) bool { return r.Intn(3) == 0 }
		w.update("app:v2", "2", "migrate:fail-once")
		for i := 0; i < 30; i++ {
			w.attackStep(time.Second)
		}
		w.annotate(routingv1alpha1.AnnotationRetry, "1")
		for i := 0; i < 30; i++ {
			w.attackStep(time.Second)
		}
		w.update("app:broken", "2", "migrate:ok")
		for i := 0; i < 100; i++ {
			w.attackStep(time.Second)
		}
		w.update("app:v3", "3", "migrate:ok")
		w.loseStatus = nil
		if got := w.settle(500); got != routingv1alpha1.ReasonRolloutComplete {
			t.Fatalf("seed %d: ended %s", seed, got)
		}
		if n := len(w.jobs); n != 4 {
			t.Fatalf("seed %d: %d migration Jobs, want 4 (schema 1, schema 2 ×2, schema 3)", seed, n)
		}
		if got := w.shardImages(); got != "us-east=app:v3:3 eu-west=app:v3:3 ap-south=app:v3:3" {
			t.Fatalf("seed %d: end %s", seed, got)
		}
	}
}
