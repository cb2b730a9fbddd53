package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// steady brings the fixture to Ready on v1 / schema 1.
func steady(t *testing.T) *world {
	w := newWorld(t)
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("steady state: %s", got)
	}
	w.log = nil
	return w
}

func TestFirstRolloutMigratesThenPromotesShardByShard(t *testing.T) {
	w := newWorld(t)
	plan := w.reconcile()
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != CreateJob {
		t.Fatalf("first reconcile must only create the migration Job, got %v", plan.Actions)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c == nil || c.Reason != routingv1alpha1.ReasonMigrating {
		t.Fatalf("SchemaReady = %+v, want Migrating", c)
	}
	if c := w.condition(routingv1alpha1.ConditionReconciling); c == nil || c.Status != "True" || c.ObservedGeneration != 1 {
		t.Fatalf("Reconciling = %+v", c)
	}
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.rsvc.Status.StableRevision != w.rsvc.Status.UpdateRevision || w.rsvc.Status.PromotedShards != "3/3" {
		t.Fatalf("status after rollout: %+v", w.rsvc.Status)
	}
	// Shards were created in order: each shard's first ReplicaSet only after the previous baked.
	var order []string
	for _, l := range w.log {
		if strings.Contains(l, "CreateReplicaSet") {
			order = append(order, strings.Fields(l)[2])
		}
	}
	want := []string{"rs-a-us-east-", "rs-a-eu-west-", "rs-a-ap-south-"}
	for i := range want {
		if i >= len(order) || !strings.HasPrefix(order[i], want[i]) {
			t.Fatalf("ReplicaSets created in order %v, want %v", order, want)
		}
	}
}

func TestUpdateWaitsForMigrationThenRolls(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	for i := 0; i < 30; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("S-01: while migrating, shards must stay on v1: %s", got)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonMigrating {
		t.Fatalf("SchemaReady reason %s", c.Reason)
	}
	// The Job hangs past its deadline (120 s + grace): the operator's own deadline ends it.
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonMigrationDeadline {
		t.Fatalf("SchemaReady reason %s, want %s", c.Reason, routingv1alpha1.ReasonMigrationDeadline)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("v1 must keep serving: %s", got)
	}
}

func TestMigrationFailureStallsWithV1Serving(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail")
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if c.Reason != routingv1alpha1.ReasonMigrationFailed || !strings.Contains(c.Message, "BackoffLimitExceeded") {
		t.Fatalf("SchemaReady = %+v", c)
	}
	before := len(w.jobs)
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if len(w.jobs) != before {
		t.Fatalf("a failed migration must not be retried automatically: %d Jobs, had %d", len(w.jobs), before)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("v1 must keep serving: %s", got)
	}
}

func TestBadImageRollsBackFirstShardOnly(t *testing.T) {
	w := steady(t)
	w.update("app:broken", "1", "migrate:ok") // S-07: schema already at the required version.
	w.run(200, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	})
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonProgressDeadlineExceeded {
		t.Fatalf("Stalled reason %s", c.Reason)
	}
	for _, l := range w.log {
		if strings.Contains(l, "eu-west") || strings.Contains(l, "ap-south") {
			t.Fatalf("eu-west and ap-south must never be touched: %s", l)
		}
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after rollback: %s", got)
	}
	// A following spec change is accepted without manual cleanup.
	w.update("app:v3", "1", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v3:3 eu-west=app:v3:3 ap-south=app:v3:3" {
		t.Fatalf("after v3: %s", got)
	}
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("stale failure left: %+v", w.rsvc.Status.Failure)
	}
}

func TestHaltTouchesNothingMore(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
	w.update("app:broken", "1", "migrate:ok")
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	frozen := w.shardImages()
	n := len(w.log)
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if w.shardImages() != frozen || len(w.log) != n {
		t.Fatalf("Halt changed something: %s → %s; %v", frozen, w.shardImages(), w.log[n:])
	}
	if !strings.Contains(frozen, "us-east=app:broken:1") || !strings.Contains(frozen, "us-east=app:v1:3") {
		t.Fatalf("Halt should leave us-east mid-step: %s", frozen)
	}
}

func TestSupersedingRevisionGoesThroughTheGate(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	// Run until us-east is promoted and eu-west has started.
	w.run(200, func() bool { return strings.Contains(w.shardImages(), "eu-west=app:v2") })
	w.update("app:v3", "3", "migrate:hang")
	for i := 0; i < 20; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if strings.Contains(w.shardImages(), "app:v3") {
		t.Fatalf("v3 must wait for schema 3: %s", w.shardImages())
	}
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok" // does not change the revision
	w.deleteJob(MigrationJobName("rs-a", "3", 1))
	// What the deleted attempt did was never read: it is not run again by itself (S-23) …
	w.run(100, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaEvidenceLost) })
	// … until a retry runs attempt 2.
	w.annotate(routingv1alpha1.AnnotationRetry, "again")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if _, ok := w.jobs[MigrationJobName("rs-a", "3", 2)]; !ok {
		t.Fatalf("want attempt 2: %v", w.jobsOf(ComponentMigration))
	}
	if got := w.shardImages(); got != "us-east=app:v3:3 eu-west=app:v3:3 ap-south=app:v3:3" {
		t.Fatalf("no shard may keep two live revisions: %s", got)
	}
}

func TestForeignEvidenceDoesNotOpenTheGate(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	// S-03: stale records claim schema 2: an old status field, and a succeeded Job for version 2
	// that another RoutingService owns.
	w.rsvc.Status.Schema.ConfirmedVersion = "2"
	foreign := NewMigrationJob(fixture(), "2", 1)
	foreign.OwnerReferences[0].UID = "someone-else"
	foreign.Name = MigrationJobName("rs-a", "2", 7)
	foreign.Status.Conditions = completeConditions()
	w.jobs[foreign.Name] = foreign
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if strings.Contains(w.shardImages(), "app:v2") {
		t.Fatalf("v2 started on unconfirmed schema: %s", w.shardImages())
	}
	if w.rsvc.Status.Schema.ConfirmedVersion != "1" {
		t.Fatalf("confirmedVersion %q, want 1", w.rsvc.Status.Schema.ConfirmedVersion)
	}
}

func TestAbortWithNothingInProgressChangesNothing(t *testing.T) {
	w := steady(t)
	before := w.rsvc.Status.DeepCopy()
	w.rsvc.Annotations = map[string]string{routingv1alpha1.AnnotationAbort: "1"}
	plan := w.reconcile()
	if a := scaling(plan); len(a) != 0 {
		t.Fatalf("S-09: abort with nothing in progress planned %v", a)
	}
	if !w.isTrue(routingv1alpha1.ConditionReady) || w.rsvc.Status.Failure != nil {
		t.Fatalf("Ready must stay True: %+v", w.rsvc.Status)
	}
	if len(plan.Events) != 1 || plan.Events[0].Reason != "AbortIgnored" {
		t.Fatalf("events %v", plan.Events)
	}
	if w.rsvc.Status.LastHandledAbort != "1" || before.StableRevision != w.rsvc.Status.StableRevision {
		t.Fatalf("status %+v", w.rsvc.Status)
	}
	if plan = w.reconcile(); len(plan.Events) != 0 {
		t.Fatalf("the same abort is handled once: %v", plan.Events)
	}
}

func TestAbortMidRolloutRollsBack(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool { return strings.Contains(w.shardImages(), "eu-west=app:v2") })
	w.rsvc.Annotations = map[string]string{routingv1alpha1.AnnotationAbort: "now"}
	w.run(200, func() bool {
		return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3"
	})
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Status != "True" || c.Reason != routingv1alpha1.ReasonAborted {
		t.Fatalf("Stalled = %+v", c)
	}
}

func TestSteadyStateIsAFixedPoint(t *testing.T) {
	w := steady(t)
	w.tick()
	before := w.rsvc.Status.DeepCopy()
	w.now = w.now.Add(time.Hour)
	plan := w.reconcile()
	if len(plan.Actions) != 0 || len(plan.Events) != 0 || plan.RequeueAfter != 0 {
		t.Fatalf("steady reconcile planned %v %v %v", plan.Actions, plan.Events, plan.RequeueAfter)
	}
	if !equalStatus(before, &w.rsvc.Status) {
		t.Fatalf("I4: a reconcile that changes nothing must produce the same status:\n%+v\n%+v", before, w.rsvc.Status)
	}
}

func TestHistoryLimitDeletesOldReplicaSets(t *testing.T) {
	w := steady(t)
	for i, img := range []string{"app:v2", "app:v3", "app:v4", "app:v5"} {
		w.update(img, "1", "migrate:ok")
		w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
		_ = i
	}
	per := map[string]int{}
	for _, rs := range w.rss {
		per[rs.Labels[LabelShard]]++
	}
	for shard, n := range per {
		// update (== stable) + revisionHistoryLimit (2) scaled-down ones.
		if n != 3 {
			t.Fatalf("shard %s keeps %d ReplicaSets, want 3", shard, n)
		}
	}
}

func (w *world) annotate(key, value string) {
	if w.rsvc.Annotations == nil {
		w.rsvc.Annotations = map[string]string{}
	}
	w.rsvc.Annotations[key] = value
}

func (w *world) sawEvent(reason string) bool {
	for _, e := range w.events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

// S-05 and S-06: a failed migration (a dirty schema) stays failed until the user retries; the
// retry is attempt 2 with its own name, the failed Job is kept, and v1 is current throughout.
func TestRetryAfterFailedMigration(t *testing.T) {
	w := steady(t)
	stable := w.rsvc.Status.StableRevision
	w.update("app:v2", "2", "migrate:fail-once")
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if len(w.jobs) != 2 {
		t.Fatalf("no automatic retry: %d Jobs, want 2 (schema 1 and the failed schema 2)", len(w.jobs))
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "1")
	w.run(300, func() bool {
		if w.rsvc.Status.StableRevision != stable && w.rsvc.Status.StableRevision != w.rsvc.Status.UpdateRevision {
			t.Fatalf("stable revision changed before v2 was promoted")
		}
		return w.isTrue(routingv1alpha1.ConditionReady)
	})
	if _, ok := w.jobs[MigrationJobName("rs-a", "2", 1)]; !ok {
		t.Fatal("the failed Job was deleted")
	}
	if _, ok := w.jobs[MigrationJobName("rs-a", "2", 2)]; !ok || len(w.jobs) != 3 {
		t.Fatalf("want exactly one Job per (version, attempt): %d Jobs", len(w.jobs))
	}
	if !w.sawEvent(EventMigrationRetried) {
		t.Fatal("no MigrationRetried Event")
	}
	// The template did not change: the Event says the same migration runs again.
	for _, e := range w.events {
		if e.Reason == EventMigrationRetried && !strings.Contains(e.Message, "unchanged since that attempt") {
			t.Fatalf("a retry of an unchanged migration does not say so: %s", e.Message)
		}
	}
	// The same value acts once.
	if plan := w.reconcile(); len(plan.Actions) != 0 || len(plan.Events) != 0 {
		t.Fatalf("a handled retry acted again: %v %v", plan.Actions, plan.Events)
	}
}

func TestRetryWithNothingFailedChangesNothing(t *testing.T) {
	w := steady(t)
	w.annotate(routingv1alpha1.AnnotationRetry, "x")
	plan := w.reconcile()
	if len(scaling(plan)) != 0 || len(plan.Events) != 1 || plan.Events[0].Reason != EventRetryIgnored {
		t.Fatalf("retry with nothing failed: %v %v", plan.Actions, plan.Events)
	}
	w.annotate(routingv1alpha1.AnnotationPromote, "x")
	plan = w.reconcile()
	if len(scaling(plan)) != 0 || len(plan.Events) != 1 || plan.Events[0].Reason != EventPromoteIgnored {
		t.Fatalf("promote with nothing baking: %v %v", plan.Actions, plan.Events)
	}
}

func TestRetryAFailedShard(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
	w.update("app:broken", "1", "migrate:ok")
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	w.annotate(routingv1alpha1.AnnotationRetry, "again")
	w.reconcile()
	if w.rsvc.Status.Failure != nil || w.isTrue(routingv1alpha1.ConditionStalled) {
		t.Fatalf("retry did not clear the failure: %+v", w.rsvc.Status.Failure)
	}
	if !w.sawEvent(EventRolloutRetried) {
		t.Fatal("no RolloutRetried Event")
	}
	// It fails again after a fresh progress deadline, not at once.
	if c := w.condition(routingv1alpha1.ConditionReconciling); c.Status != "True" {
		t.Fatalf("Reconciling = %+v", c)
	}
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
}

func TestPromoteEndsTheBake(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(3600))
	w.update("app:v2", "1", "migrate:ok")
	w.run(50, func() bool {
		c := w.condition(routingv1alpha1.ConditionReconciling)
		return c != nil && c.Reason == routingv1alpha1.ReasonShardBaking
	})
	w.annotate(routingv1alpha1.AnnotationPromote, "now")
	w.run(50, func() bool { return strings.Contains(w.shardImages(), "eu-west=app:v2") })
	if !w.sawEvent(EventBakeSkipped) {
		t.Fatal("no BakeSkipped Event")
	}
}

// Found by review: time spent paused must not count against a shard's progress deadline.
func TestPauseMidShardDoesNotUseUpTheDeadline(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "1", "migrate:ok")
	w.run(50, func() bool { return strings.Contains(w.shardImages(), "us-east=app:v2:1") })
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(30 * time.Second)
	}
	w.rsvc.Spec.Paused = false
	w.rsvc.Generation++
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("resuming failed a healthy rollout: %+v", w.rsvc.Status.Failure)
	}
}

// Found by review: an abort during the very first rollout halts it (there is nothing to roll
// back to) instead of being ignored.
func TestAbortDuringFirstRolloutHalts(t *testing.T) {
	w := newWorld(t)
	w.run(100, func() bool { return strings.Contains(w.shardImages(), "us-east=app:v1:3") })
	w.annotate(routingv1alpha1.AnnotationAbort, "stop")
	w.reconcile()
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Status != "True" || c.Reason != routingv1alpha1.ReasonAborted {
		t.Fatalf("Stalled = %+v", c)
	}
	frozen := w.shardImages()
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if w.shardImages() != frozen {
		t.Fatalf("an aborted first rollout went on: %s → %s", frozen, w.shardImages())
	}
}

// Found by review: a retry after schemagate's own deadline must not start attempt 2 while attempt
// 1's pods may still run; it suspends attempt 1 and waits for its pods to stop.
func TestRetryAfterDeadlineNeverRunsTwoMigrations(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.run(30, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
	w.annotate(routingv1alpha1.AnnotationRetry, "1")
	for i := 0; i < 5; i++ {
		w.reconcile()
		running := 0
		for _, j := range w.jobs {
			if j.Labels[LabelSchemaVersion] == "2" && j.Status.Active > 0 {
				running++
			}
		}
		if running > 1 {
			t.Fatalf("%d migrations for schema 2 run at once", running)
		}
		if _, ok := w.jobs[MigrationJobName("rs-a", "2", 2)]; ok && w.jobs[MigrationJobName("rs-a", "2", 1)].Status.Active > 0 {
			t.Fatal("attempt 2 was created while attempt 1 still had active pods")
		}
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if !w.sawEvent(EventMigrationSuspended) {
		t.Fatal("no MigrationSuspended Event")
	}
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
}

// I4: right after any transition, a second reconcile with nothing changed yields the same status.
func TestSecondReconcileIsAFixedPoint(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail-once")
	for i := 0; i < 200 && !w.isTrue(routingv1alpha1.ConditionReady); i++ {
		w.reconcile()
		before := w.rsvc.Status.DeepCopy()
		if plan := w.reconcile(); len(plan.Actions) == 0 && !equalStatus(before, &w.rsvc.Status) {
			t.Fatalf("step %d: a reconcile that changed nothing changed the status:\n%+v\n%+v", i, before.Conditions, w.rsvc.Status.Conditions)
		}
		if w.isTrue(routingv1alpha1.ConditionStalled) {
			w.annotate(routingv1alpha1.AnnotationRetry, fmt.Sprint(i))
		}
		w.tick()
		w.now = w.now.Add(time.Second)
	}
}

// S-10: the migration Job was created, then the status write was lost (a 409) and the next
// reconcile reads a cache that does not show the Job yet. The planner asks again for the same
// deterministic name, so the API server answers AlreadyExists instead of running a second
// migration; it never moves on to another attempt by itself. (schemagate holds no delete verb on
// Jobs: a Job is never deleted before its result is recorded.)
func TestStaleCacheNeverCreatesASecondMigration(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	before := w.rsvc.Status.DeepCopy()
	first := Compute(w.observed())
	if len(first.Actions) != 1 || first.Actions[0].Kind != CreateJob {
		t.Fatalf("first plan %v", first.Actions)
	}
	// The status write conflicted (status as before) and the cache has not seen the Job.
	w.rsvc.Status = *before
	again := Compute(w.observed())
	if len(again.Actions) != 1 || again.Actions[0].Kind != CreateJob || again.Actions[0].Job.Name != first.Actions[0].Job.Name {
		t.Fatalf("a stale cache must lead to the same Job name (AlreadyExists), got %v", again.Actions)
	}
	// Once the Job is seen, nothing more is created while it runs.
	w.reconcile()
	for i := 0; i < 20; i++ {
		w.tick()
		w.now = w.now.Add(time.Second)
		if plan := w.reconcile(); len(plan.Actions) != 0 {
			t.Fatalf("while the migration runs: %v", plan.Actions)
		}
	}
}

// scaling is the plan's actions but RecordControls: an ignored control is still recorded as
// handled on the ReplicaSets (controls.go), which changes no pod.
func scaling(plan Plan) []Action {
	var out []Action
	for _, a := range plan.Actions {
		if a.Kind != RecordControls {
			out = append(out, a)
		}
	}
	return out
}
