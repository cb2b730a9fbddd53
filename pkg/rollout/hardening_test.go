package rollout

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Tests of issue 8's failure kinds (scenarios S-15 … S-22), each replaying the smallest input
// that broke the planner before its fix.

// liveMigrations counts the migration Jobs that may be changing the database now.
// liveMigrations counts the migration Jobs that may still change the database; a live check Job
// beside a live migration counts as one more (a check never runs beside a migration, or it would
// read a database half-way through it). Checks beside checks are harmless (read-only).
func (w *world) liveMigrations() int {
	migrations, checks := 0, 0
	for _, j := range w.jobs {
		switch {
		case !live(j):
		case j.Labels[LabelComponent] == ComponentCheck:
			checks++
		default:
			migrations++
		}
	}
	if migrations > 0 && checks > 0 {
		return migrations + 1
	}
	return migrations
}

// step reconciles, checks that at most one migration runs, plays the controllers and advances
// the clock by d.
func (w *world) step(d time.Duration) Plan {
	w.t.Helper()
	plan := w.reconcile()
	w.tickChecked(d)
	return plan
}

// tickChecked checks that at most one migration runs, plays the controllers, checks again, and
// advances the clock by d.
func (w *world) tickChecked(d time.Duration) {
	w.t.Helper()
	if n := w.liveMigrations(); n > 1 {
		w.t.Fatalf("S-15: %d migration Jobs run at once; log:\n%s", n, strings.Join(w.log, "\n"))
	}
	w.tick()
	if n := w.liveMigrations(); n > 1 {
		w.t.Fatalf("S-15: %d migration Jobs run at once; log:\n%s", n, strings.Join(w.log, "\n"))
	}
	w.now = w.now.Add(d)
}

func (w *world) setReplicas(shard string, n int32) {
	for i := range w.rsvc.Spec.Shards {
		if w.rsvc.Spec.Shards[i].Name == shard {
			w.rsvc.Spec.Shards[i].Replicas = n
		}
	}
	w.rsvc.Generation++
}

func (w *world) reason(t string) string {
	if c := w.condition(t); c != nil {
		return c.Reason
	}
	return ""
}

// S-15: a newer version, or the same version spelled differently, never starts a second
// migration while one runs.
func TestS15NeverTwoMigrationsAtOnce(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	for i := 0; i < 5; i++ {
		w.step(time.Second)
	}
	// "2.0" is version 2: the same Job, no second one.
	w.update("app:v2", "2.0", "migrate:hang")
	for i := 0; i < 5; i++ {
		if plan := w.step(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("re-spelling the version acted: %v", plan.Actions)
		}
	}
	if len(w.jobs) != 2 || w.reason(routingv1alpha1.ConditionSchemaReady) != routingv1alpha1.ReasonMigrating {
		t.Fatalf("want the schema-1 Job and one schema-2 Job, Migrating; got %d Jobs, %s", len(w.jobs), w.reason(routingv1alpha1.ConditionSchemaReady))
	}
	// Version 3 waits for the schema-2 Job, which is suspended once past its deadline.
	w.update("app:v3", "3", "migrate:ok")
	w.step(time.Second)
	if len(w.jobs) != 2 {
		t.Fatalf("a schema-3 Job was created while schema 2's runs")
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonWaitingForMigration || !strings.Contains(c.Message, MigrationJobName("rs-a", "2", 1)) {
		t.Fatalf("SchemaReady = %+v, want WaitingForMigration naming the running Job", c)
	}
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if !w.sawEvent(EventMigrationSuperseded) {
		t.Fatal("no MigrationSuperseded Event")
	}
	if got := w.shardImages(); got != "us-east=app:v3:3 eu-west=app:v3:3 ap-south=app:v3:3" {
		t.Fatalf("after v3: %s", got)
	}
}

// S-16: with spec.paused a retry creates nothing; it acts once after unpausing.
func TestS16RetryWhilePausedWaits(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail-once")
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	w.annotate(routingv1alpha1.AnnotationRetry, "1")
	for i := 0; i < 10; i++ {
		if plan := w.step(time.Minute); len(plan.Actions) != 0 {
			t.Fatalf("paused, yet planned %v", plan.Actions)
		}
	}
	if w.rsvc.Status.LastHandledRetry == "1" || w.sawEvent(EventRetryIgnored) {
		t.Fatalf("a retry while paused must wait, not be used or ignored: %+v", w.rsvc.Status.LastHandledRetry)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "spec.paused") {
		t.Fatalf("Stalled does not say the retry waits for unpausing: %s", c.Message)
	}
	w.rsvc.Spec.Paused = false
	w.rsvc.Generation++
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if len(w.jobs) != 3 || w.rsvc.Status.LastHandledRetry != "1" {
		t.Fatalf("want attempt 2 exactly once: %d Jobs, lastHandledRetry %q", len(w.jobs), w.rsvc.Status.LastHandledRetry)
	}
}

// s17 brings the fixture to: v2 promoted in us-east and eu-west and baking in ap-south (bake
// 300 s), stable still v1; then applies v3, whose pods never become ready.
func s17(t *testing.T, w *world) {
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	w.run(2000, func() bool {
		ss := w.rsvc.Status.Shards
		return len(ss) == 3 && ss[2].Step == routingv1alpha1.ShardStepBaking
	})
	w.update("app:broken", "1", "migrate:ok")
	w.log = nil
}

// S-17: only the shard v3 touched changes, back to v2 (which served it last), not to v1.
func TestS17RollbackChangesOnlyTouchedShards(t *testing.T) {
	w := steady(t)
	s17(t, w)
	w.run(300, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	})
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the rollback: %s", got)
	}
	for _, l := range w.log {
		if (strings.Contains(l, "eu-west") || strings.Contains(l, "ap-south")) && !strings.Contains(l, " event ") {
			t.Fatalf("a shard v3 never touched was changed: %s", l)
		}
	}
	// Item 13: the failed shard itself reports its rollback.
	if !w.sawEvent(EventRollingBack) || !w.sawEvent(EventShardRolledBack) {
		t.Fatalf("no RollingBack/ShardRolledBack Events for us-east: %v", w.log)
	}
	// The ShardRolledBack Event names its shard (schemagate_shard_rollbacks_total counts by it).
	for _, e := range w.events {
		if e.Reason == EventShardRolledBack && e.Shard != "us-east" {
			t.Fatalf("ShardRolledBack Event of shard %q, want us-east: %s", e.Shard, e.Message)
		}
	}
}

// S-17, item 4: the reconcile that completes v2 everywhere loses its status write, so stable is
// still v1 when v3 fails; the outcome is the same, since what served each shard is in the cluster.
func TestS17LostStatusWriteChangesNothing(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
	w.update("app:v2", "1", "migrate:ok")
	w.loseStatus = func(p Plan) bool {
		for _, e := range p.Events {
			if e.Reason == EventRolloutComplete {
				return true
			}
		}
		return false
	}
	w.run(300, func() bool { return strings.Contains(w.log[len(w.log)-1], "RolloutComplete") })
	w.loseStatus = nil
	stable := w.rsvc.Status.StableRevision
	w.update("app:broken", "1", "migrate:ok")
	w.run(300, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	})
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the rollback (stable in status was %s): %s", stable, got)
	}
}

// S-18: a replica change applies at once to what serves each shard, in every state but paused.
func TestS18ReplicaChangesApplyNow(t *testing.T) {
	t.Run("while the migration runs", func(t *testing.T) {
		w := steady(t)
		w.update("app:v2", "2", "migrate:hang")
		w.step(time.Second)
		w.setReplicas("ap-south", 5)
		w.step(time.Second)
		if got := w.shardImages(); !strings.Contains(got, "ap-south=app:v1:5") {
			t.Fatalf("ap-south not resized: %s", got)
		}
		w.step(time.Second)
		if !w.isTrue(routingv1alpha1.ConditionAvailable) || !w.sawEvent(EventShardResized) {
			t.Fatalf("Available %+v, events %v", w.condition(routingv1alpha1.ConditionAvailable), w.log)
		}
	})
	t.Run("after the migration failed", func(t *testing.T) {
		w := steady(t)
		w.update("app:v2", "2", "migrate:fail")
		w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
		w.setReplicas("eu-west", 1)
		w.step(time.Second)
		if got := w.shardImages(); !strings.Contains(got, "eu-west=app:v1:1") {
			t.Fatalf("eu-west not resized: %s", got)
		}
	})
	t.Run("in a shard the rollout has not reached", func(t *testing.T) {
		w := steady(t)
		w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(3600))
		w.update("app:v2", "1", "migrate:ok")
		w.run(50, func() bool { return strings.Contains(w.shardImages(), "us-east=app:v2:1") })
		w.setReplicas("ap-south", 5)
		w.step(time.Second)
		if got := w.shardImages(); !strings.Contains(got, "ap-south=app:v1:5") {
			t.Fatalf("ap-south not resized: %s", got)
		}
	})
	t.Run("paused: nothing is scaled", func(t *testing.T) {
		w := steady(t)
		w.rsvc.Spec.Paused = true
		w.setReplicas("ap-south", 5)
		if plan := w.step(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("paused, yet planned %v", plan.Actions)
		}
	})
	t.Run("mid-step with a never-ready revision", func(t *testing.T) {
		w := steady(t)
		w.update("app:broken", "1", "migrate:ok")
		w.run(20, func() bool { return strings.Contains(w.shardImages(), "us-east=app:broken:1") })
		w.setReplicas("us-east", 8) // surge 25% of 8 = 2
		w.step(time.Second)
		if got := w.shardImages(); !strings.Contains(got, "us-east=app:broken:1 us-east=app:v1:8") {
			t.Fatalf("the serving set must grow first, the unproven revision not at all: %s", got)
		}
		for i := 0; i < 3; i++ {
			w.step(time.Second)
			// Afterwards the step goes on as a rolling update of 8 would: at most surge (2)
			// unproven pods.
			if got := w.shardImages(); !strings.Contains(got, "us-east=app:v1:8") || strings.Contains(got, "app:broken:3") {
				t.Fatalf("the surge landed on the unproven revision: %s", got)
			}
		}
		w.setReplicas("us-east", 3) // surge 1: at most 4 pods
		for i := 0; i < 3; i++ {
			w.step(time.Second)
			var total int32
			for _, rs := range w.rss {
				if rs.Labels[LabelShard] == "us-east" {
					total += *rs.Spec.Replicas
				}
			}
			if i > 0 && total > 4 {
				t.Fatalf("us-east asks for %d pods > replicas + surge: %s", total, w.shardImages())
			}
		}
	})
}

// Item 11: time paused counts against neither the progress deadline nor the bake.
func TestPauseDoesNotCountAgainstTheBake(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(20))
	w.update("app:v2", "1", "migrate:ok")
	w.run(50, func() bool {
		return w.reason(routingv1alpha1.ConditionReconciling) == routingv1alpha1.ReasonShardBaking
	})
	w.rsvc.Spec.Paused = true
	w.rsvc.Generation++
	for i := 0; i < 22; i++ {
		w.step(time.Second)
	}
	w.rsvc.Spec.Paused = false
	w.rsvc.Generation++
	for i := 0; i < 15; i++ {
		w.step(time.Second)
		if strings.Contains(w.shardImages(), "eu-west=app:v2") {
			t.Fatalf("us-east was promoted %d s after the pause ended; the bake is 20 s", i)
		}
	}
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
}

// Item 10: a fixed migration template applied through Git starts the next attempt by itself.
func TestFixedMigrationInGitRunsNextAttempt(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail")
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:fixed"
	w.rsvc.Generation++
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if _, ok := w.jobs[MigrationJobName("rs-a", "2", 2)]; !ok || len(w.jobs) != 3 {
		t.Fatalf("want attempt 2 and nothing more: %d Jobs", len(w.jobs))
	}
	for i := 0; i < 5; i++ {
		if plan := w.step(time.Minute); len(plan.Actions) != 0 {
			t.Fatalf("a confirmed version ran again: %v", plan.Actions)
		}
	}
}

// A migration template changed while its attempt runs does not interrupt it.
func TestChangedMigrationWaitsForTheRunningAttempt(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.step(time.Second)
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:other"
	w.rsvc.Generation++
	for i := 0; i < 10; i++ {
		if plan := w.step(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("a running migration was interrupted: %v", plan.Actions)
		}
	}
}

// S-21: a Job with schemagate's name that it does not control is never evidence and never a
// create loop: Stalled=True NameConflict naming it, cleared once the name is free.
func TestS21NameTakenByAnotherJob(t *testing.T) {
	for _, labelled := range []bool{true, false} {
		w := steady(t)
		name := MigrationJobName("rs-a", "2", 1)
		plain := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "plain"},
			Status: batchv1.JobStatus{Conditions: completeConditions()}}
		if labelled {
			// An orphan: schemagate's labels, no controller (S-20).
			plain.Labels = NewMigrationJob(w.rsvc, "2", 1).Labels
			w.jobs[name] = plain
		} else {
			// Unlabelled: the reconciler reports it after the create's AlreadyExists.
			w.conflicts = []Conflict{{Kind: "Job", Name: name, Holder: Holder(plain)}}
		}
		w.update("app:v2", "2", "migrate:ok")
		plan := w.step(time.Second)
		for _, a := range plan.Actions {
			if a.Kind == CreateJob {
				t.Fatalf("labelled=%v: created a Job over a taken name", labelled)
			}
		}
		c := w.condition(routingv1alpha1.ConditionStalled)
		if c.Status != "True" || c.Reason != routingv1alpha1.ReasonNameConflict || !strings.Contains(c.Message, name) {
			t.Fatalf("labelled=%v: Stalled = %+v", labelled, c)
		}
		before := w.rsvc.Status.DeepCopy()
		for i := 0; i < 5; i++ {
			if plan := w.step(time.Second); len(plan.Actions) != 0 || len(plan.Events) != 0 {
				t.Fatalf("labelled=%v: a conflict must not loop: %v %v", labelled, plan.Actions, plan.Events)
			}
		}
		if !equalStatus(before, &w.rsvc.Status) {
			t.Fatalf("labelled=%v: the status changed while nothing did", labelled)
		}
		if strings.Contains(w.shardImages(), "app:v2") {
			t.Fatalf("labelled=%v: v2 started on a Job that is not ours", labelled)
		}
		delete(w.jobs, name)
		w.conflicts = nil
		w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	}
}

// S-20: re-created after a delete with --cascade=orphan, rs-a adopts its orphaned ReplicaSets and
// never counts an orphaned migration Job as evidence; an update then leaves one revision per shard.
func TestS20OrphansAreAdoptedNeverEvidence(t *testing.T) {
	w := steady(t)
	w.rsvc.UID = "uid-rs-a-2"
	w.rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
	for _, rs := range w.rss {
		rs.OwnerReferences = nil
	}
	for _, j := range w.jobs {
		j.OwnerReferences = nil
	}
	plan := w.step(time.Second)
	adopted := 0
	for _, a := range plan.Actions {
		if a.Kind == AdoptReplicaSet {
			adopted++
		}
		if a.Kind == CreateJob || a.Kind == CreateReplicaSet {
			t.Fatalf("created over orphans: %v", a)
		}
	}
	if adopted != 3 {
		t.Fatalf("adopted %d ReplicaSets, want 3: %v", adopted, plan.Actions)
	}
	// The adopted ReplicaSets served schema 1, so it was confirmed; the orphaned Job is not
	// evidence, and without spec.schema.check nothing may confirm it again but a retry (S-23).
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonSchemaEvidenceLost {
		t.Fatalf("the orphaned schema-1 Job is not evidence: Stalled = %+v", c)
	}
	// A retry runs attempt 1, whose name the orphaned Job holds.
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	w.step(time.Second)
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonNameConflict {
		t.Fatalf("the orphaned schema-1 Job holds the name: Stalled = %+v", c)
	}
	if w.isTrue(routingv1alpha1.ConditionSchemaReady) {
		t.Fatal("an orphaned Job opened the gate")
	}
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after v2: %s", got)
	}
}

// S-22 (c): a ReplicaSet named for the revision that runs another template is not the revision.
func TestS22TemplateMismatchIsReported(t *testing.T) {
	w := steady(t)
	var edited string
	for name, rs := range w.rss {
		if rs.Labels[LabelShard] == "us-east" {
			rs.Spec.Template.Spec.Containers[0].Image = "app:evil"
			edited = name
		}
	}
	w.step(time.Second)
	c := w.condition(routingv1alpha1.ConditionStalled)
	if c.Status != "True" || c.Reason != routingv1alpha1.ReasonTemplateMismatch || !strings.Contains(c.Message, edited) || !strings.Contains(c.Message, "app:evil") {
		t.Fatalf("Stalled = %+v", c)
	}
	if w.isTrue(routingv1alpha1.ConditionReady) {
		t.Fatal("Ready=True while us-east runs another image")
	}
	w.rss[edited].Spec.Template.Spec.Containers[0].Image = "app:v1"
	w.run(50, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
}

// S-22 (b): ReplicaSets named by another revision hash (an older schemagate) whose templates are
// the spec's are the update revision: nothing re-rolls and Ready stays True.
func TestS22RenamedRevisionReRollsNothing(t *testing.T) {
	w := steady(t)
	w.tick()
	update := w.rsvc.Status.UpdateRevision
	for name, rs := range w.rss {
		delete(w.rss, name)
		rs.Labels[LabelRevision] = "oldhash123"
		rs.Spec.Selector.MatchLabels[LabelRevision] = "oldhash123"
		rs.Spec.Template.Labels[LabelRevision] = "oldhash123"
		rs.Name = ReplicaSetName("rs-a", rs.Labels[LabelShard], "oldhash123")
		w.rss[rs.Name] = rs
	}
	st := &w.rsvc.Status
	st.UpdateRevision, st.StableRevision = "oldhash123", "oldhash123"
	for i := range st.Shards {
		st.Shards[i].StepRevision = "oldhash123"
	}
	for i := 0; i < 5; i++ {
		if plan := w.step(time.Minute); len(plan.Actions) != 0 {
			t.Fatalf("a renamed revision re-rolled: %v", plan.Actions)
		}
		if !w.isTrue(routingv1alpha1.ConditionReady) {
			t.Fatalf("Ready flipped: %+v", w.condition(routingv1alpha1.ConditionReady))
		}
	}
	if st.UpdateRevision != update || st.StableRevision != update {
		t.Fatalf("status revisions %s/%s, want %s", st.UpdateRevision, st.StableRevision, update)
	}
}

// S-19: a hand-edited status cannot panic the planner or open the gate.
func TestS19HandEditedStatus(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	rev := Revision(&w.rsvc.Spec)
	for _, step := range []routingv1alpha1.ShardStep{routingv1alpha1.ShardStepProgressing, routingv1alpha1.ShardStepBaking, routingv1alpha1.ShardStepRollingBack, "Exploded"} {
		w.rsvc.Status.Shards = []routingv1alpha1.ShardStatus{{Name: "us-east", Step: step, StepRevision: rev}, {Name: "nowhere", Step: step}}
		w.rsvc.Status.Schema.ConfirmedVersion = "2"
		w.rsvc.Status.Failure = &routingv1alpha1.RolloutFailure{Revision: "unknown"}
		w.step(time.Second)
		if strings.Contains(w.shardImages(), "app:v2") || w.isTrue(routingv1alpha1.ConditionSchemaReady) {
			t.Fatalf("step %s: the gate opened on a hand-edited status", step)
		}
	}
}

// R-3 (issue 9), found on the real stack: a revision that becomes ready and then crashes under
// load completes its shard, regresses while baking, and must not get a fresh progress deadline
// each time; it fails in bounded time (I3).
func TestFlappingRevisionFailsWithinTheDeadline(t *testing.T) {
	w := steady(t)
	w.update("app:flap", "1", "migrate:ok")
	began := w.now
	for !w.isTrue(routingv1alpha1.ConditionStalled) {
		if w.now.Sub(began) > 120*time.Second {
			t.Fatalf("a flapping revision has not failed after %s; the progress deadline is 60 s; log:\n%s", w.now.Sub(began), strings.Join(w.log, "\n"))
		}
		w.step(time.Second)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonProgressDeadlineExceeded {
		t.Fatalf("Stalled = %+v", c)
	}
	if !w.sawEvent(EventShardRegressed) {
		t.Fatalf("the flap never reached the bake, so this test proves nothing; log:\n%s", strings.Join(w.log, "\n"))
	}
}

// Found by a new user's trial: reverting to the stable revision after a failure ends with
// Ready=True, and a RolloutComplete Event says so (tools count Events and the outcome metric).
func TestRevertAfterFailureRecordsRolloutComplete(t *testing.T) {
	w := steady(t)
	w.update("app:broken", "1", "migrate:ok")
	w.run(200, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	})
	w.events = nil
	w.update("app:v1", "1", "migrate:ok")
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if !w.sawEvent(EventRolloutComplete) {
		t.Fatal("no RolloutComplete Event for the revert")
	}
	n := len(w.events)
	for i := 0; i < 5; i++ {
		w.step(time.Minute)
	}
	if len(w.events) != n {
		t.Fatalf("events after the end: %v", w.events[n:])
	}
}
