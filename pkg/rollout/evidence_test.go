package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Issue 10: the gate reads the database. Each test drives the simulated cluster of sim_test.go,
// whose migration and check Jobs write schema reports of a simulated database.

// withCheck adds a check Job template (its image does not matter to the simulation: a check
// reports the database as it is).
func withCheck(w *world, afterMigration bool) {
	w.rsvc.Spec.Schema.Check = &routingv1alpha1.SchemaCheckSpec{AfterMigration: afterMigration,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "check", Image: "schemagate-schema:dev"}}}}}
}

// v2Pods counts the pods asked for of ReplicaSets requiring schema 2.
func (w *world) v2Pods() int32 {
	n := int32(0)
	for _, rs := range w.rss {
		if RequiredSchema(rs) == "2" {
			n += *rs.Spec.Replicas
		}
	}
	return n
}

// creationOrder lists what the log shows created since steady(): "migration", "check" and shard
// check ("verify") Jobs, and
// ReplicaSets by the first part of their shard's name ("us", "eu", "ap").
func (w *world) creationOrder() string {
	var order []string
	for _, l := range w.log {
		switch {
		case strings.Contains(l, "CreateJob rs-a-schema-"):
			order = append(order, "migration")
		case strings.Contains(l, "CreateJob rs-a-check-"):
			order = append(order, "check")
		case strings.Contains(l, "CreateJob rs-a-verify-"):
			order = append(order, "verify")
		case strings.Contains(l, "CreateReplicaSet"):
			order = append(order, strings.Split(strings.Fields(l)[2], "-")[2])
		}
	}
	return strings.Join(order, ",")
}

func (w *world) jobsOf(component string) []string {
	var out []string
	for name, j := range w.jobs {
		if j.Labels[LabelComponent] == component {
			out = append(out, name)
		}
	}
	return out
}

// S-24: a migration Job that exits 0 without migrating (its report says schema 1) never opens
// the gate: SchemaMismatch, Stalled, no pod of v2; a retry runs it again (still a no-op: still
// stalled), and a fixed migration template applied through Git runs the next attempt.
func TestS24CompleteJobWithLowerReportNeverOpensTheGate(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:noop")
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaMismatch) })
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if c.Status != metav1.ConditionFalse || c.Reason != routingv1alpha1.ReasonSchemaMismatch || !strings.Contains(c.Message, "says the database is at version 1") {
		t.Fatalf("SchemaReady = %+v", c)
	}
	for i := 0; i < 20; i++ {
		w.step(5 * time.Second)
	}
	if n := w.v2Pods(); n != 0 || len(w.jobsOf(ComponentMigration)) != 2 {
		t.Fatalf("v2 pods %d, migration Jobs %v: a mismatch must not start pods or retry by itself", n, w.jobsOf(ComponentMigration))
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "r1")
	w.run(60, func() bool {
		return len(w.jobsOf(ComponentMigration)) == 3 && w.stalledWith(routingv1alpha1.ReasonSchemaMismatch)
	})
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
	w.rsvc.Generation++
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the fixed migration: %s", got)
	}
	if w.rsvc.Status.Schema.ReportedVersion != "2" || !strings.Contains(w.rsvc.Status.Schema.ReportedBy, "(sim)") {
		t.Fatalf("status.schema = %+v", w.rsvc.Status.Schema)
	}
}

// A dirty database (a migration that failed half-way, or one that exits 0 and leaves it dirty)
// is SchemaDirty, Stalled, and never retried by itself, not even by a changed migration template;
// after a person cleans it up, a retry works.
func TestDirtyReportStallsUntilAPersonRetries(t *testing.T) {
	for _, image := range []string{"migrate:dirty", "migrate:dirty-ok"} {
		t.Run(image, func(t *testing.T) {
			w := steady(t)
			w.update("app:v2", "2", image)
			w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaDirty) })
			w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
			w.rsvc.Generation++
			for i := 0; i < 30; i++ {
				w.step(5 * time.Second)
			}
			if n := len(w.jobsOf(ComponentMigration)); n != 2 || !w.stalledWith(routingv1alpha1.ReasonSchemaDirty) || w.v2Pods() != 0 {
				t.Fatalf("migration Jobs %d, Stalled %+v, v2 pods %d: a dirty database must wait for a person", n, w.condition(routingv1alpha1.ConditionStalled), w.v2Pods())
			}
			// v1 keeps serving throughout.
			if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
				t.Fatalf("while dirty: %s", got)
			}
			w.dirty = false // a person forced the version and cleared the flag
			w.annotate(routingv1alpha1.AnnotationRetry, "fixed")
			w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
			if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
				t.Fatalf("after the fix: %s", got)
			}
		})
	}
}

// A report that cannot be read (none, not a report, over 4096 bytes, an unknown format, a version
// that is not a version) is InvalidSchemaReport and never opens the gate; with evidence
// JobSuccess the same silent migration opens it (today's behaviour, for images that cannot report).
func TestInvalidReportsNeverOpenTheGate(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"migrate:silent", "termination message is empty"},
		{"migrate:garbage", "not a JSON object"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			w := steady(t)
			w.update("app:v2", "2", tc.image)
			w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonInvalidSchemaReport) })
			if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, tc.want) || !strings.Contains(c.Message, "evidence: JobSuccess") {
				t.Fatalf("Stalled = %+v", c)
			}
			if w.v2Pods() != 0 {
				t.Fatal("an invalid report opened the gate")
			}
		})
	}
	t.Run("forged pod messages", func(t *testing.T) {
		for _, msg := range []string{
			strings.Repeat(" ", 10) + `{"schemagate":"schema-report/v1","version":"2","time":"2026-11-30T12:00:00Z","tool":"` + strings.Repeat("x", 5000) + `"}`,
			`{"schemagate":"schema-report/v9","version":"2","time":"2026-11-30T12:00:00Z"}`,
			`{"schemagate":"schema-report/v1","version":"2; DROP","time":"2026-11-30T12:00:00Z"}`,
			`{"schemagate":"schema-report/v1","version":"2","dirty":"no","time":"2026-11-30T12:00:00Z"}`,
		} {
			w := steady(t)
			w.update("app:v2", "2", "migrate:hang")
			w.step(time.Second)
			j := w.jobs[MigrationJobName("rs-a", "2", 1)]
			j.Status.Active, j.Status.Succeeded = 0, 1
			j.Status.Conditions = completeConditions()
			w.pods["forged"] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: "default", UID: "forged",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptrTrue()}}},
				Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
					State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}}}
			w.reconcile()
			if !w.stalledWith(routingv1alpha1.ReasonInvalidSchemaReport) || w.v2Pods() != 0 {
				t.Fatalf("message %.60q: Stalled %+v, v2 pods %d", msg, w.condition(routingv1alpha1.ConditionStalled), w.v2Pods())
			}
		}
	})
	t.Run("JobSuccess", func(t *testing.T) {
		w := newWorld(t)
		w.rsvc.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
		w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:silent"
		w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	})
}

func ptrTrue() *bool { b := true; return &b }

// S-23, with spec.schema.check: the Job that confirmed the schema is deleted in steady state.
// One check Job runs instead of the migration, every condition stays as it was (Ready never
// flips), nothing is scaled, and the check's report confirms the schema again. A restart mid-check
// (the same observed state computed again) starts no second check.
func TestS23EvidenceDeletedInSteadyStateRunsOneCheck(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Generation++
	w.step(time.Second)
	before := w.rsvc.Status.DeepCopy()
	w.deleteJob(MigrationJobName("rs-a", "1", 1))
	for i := 0; i < 40; i++ {
		plan := w.reconcile()
		for _, a := range plan.Actions {
			if a.Kind != CreateJob || a.Job.Labels[LabelComponent] != ComponentCheck {
				t.Fatalf("round %d: %s: only a check Job may be created", i, a)
			}
		}
		// A restart mid-check: the same state computed again acts the same, creating nothing new.
		if again := Compute(w.observed()); len(again.Actions) != 0 {
			t.Fatalf("round %d: a second reconcile of the same state acts: %v", i, again.Actions)
		}
		for _, ct := range []string{routingv1alpha1.ConditionReady, routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionStalled, routingv1alpha1.ConditionReconciling, routingv1alpha1.ConditionAvailable} {
			old, now := storedCondition(before, ct), w.condition(ct)
			if old.Status != now.Status || !old.LastTransitionTime.Equal(&now.LastTransitionTime) {
				t.Fatalf("round %d: %s went %s → %s (%s)", i, ct, old.Status, now.Status, now.Message)
			}
		}
		w.tickChecked(time.Second)
	}
	if checks, migrations := w.jobsOf(ComponentCheck), w.jobsOf(ComponentMigration); len(checks) != 1 || len(migrations) != 0 {
		t.Fatalf("check Jobs %v, migration Jobs %v: want one check, no migration", checks, migrations)
	}
	if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "1" || st.ConfirmedBy != CheckJobName("rs-a", "1", 1) {
		t.Fatalf("status.schema = %+v", st)
	}
	if !w.sawEvent(EventSchemaEvidenceLost) || !w.sawEvent(EventCheckStarted) {
		t.Fatalf("events: %v", w.log)
	}
	// And the next version goes through the migration as always.
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
}

func storedCondition(st *routingv1alpha1.RoutingServiceStatus, t string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// S-23 without spec.schema.check: nothing runs again, no condition flips, a Warning says so once;
// a replica increase waits (the gate is closed), and a retry runs the migration as attempt 2,
// never under the deleted attempt's name.
func TestS23EvidenceDeletedWithoutCheckHoldsAndWaitsForRetry(t *testing.T) {
	w := steady(t)
	w.deleteJob(MigrationJobName("rs-a", "1", 1))
	for i := 0; i < 20; i++ {
		if plan := w.step(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("round %d acts: %v", i, plan.Actions)
		}
		if !w.isTrue(routingv1alpha1.ConditionReady) || !w.isTrue(routingv1alpha1.ConditionSchemaReady) || w.isTrue(routingv1alpha1.ConditionStalled) {
			t.Fatalf("round %d: conditions flipped: %+v", i, w.rsvc.Status.Conditions)
		}
	}
	lost := 0
	for _, e := range w.events {
		if e.Reason == EventSchemaEvidenceLost {
			lost++
		}
	}
	if lost != 1 {
		t.Fatalf("%d SchemaEvidenceLost events, want 1", lost)
	}
	w.rsvc.Spec.Shards[0].Replicas = 5
	w.rsvc.Generation++
	w.skipI2 = true // the shard is short because the gate is held, not because of an action
	for i := 0; i < 5; i++ {
		w.step(time.Second)
	}
	if got := w.shardImages(); !strings.Contains(got, "us-east=app:v1:3") {
		t.Fatalf("scaled up without evidence: %s", got)
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "again")
	w.run(100, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if _, ok := w.jobs[MigrationJobName("rs-a", "1", 2)]; !ok {
		t.Fatalf("the retry must run attempt 2: %v", w.jobsOf(ComponentMigration))
	}
	if got := w.shardImages(); !strings.Contains(got, "us-east=app:v1:5") {
		t.Fatalf("after the retry: %s", got)
	}
}

// S-23 mid-rollout: the schema-2 Job is deleted while eu-west promotes. The check runs, nothing is
// scaled up meanwhile, and the rollout then finishes.
func TestS23EvidenceDeletedMidRollout(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool {
		return w.rsvc.Status.PromotedShards == "1/3" && w.v2Pods() > 3
	})
	w.deleteJob(MigrationJobName("rs-a", "2", 1))
	pods := w.v2Pods()
	plan := w.step(time.Second)
	if len(plan.Actions) != 1 || plan.Actions[0].Kind != CreateJob || plan.Actions[0].Job.Labels[LabelComponent] != ComponentCheck {
		t.Fatalf("want only the check Job: %v", plan.Actions)
	}
	if w.v2Pods() != pods {
		t.Fatalf("v2 pods %d → %d while checking", pods, w.v2Pods())
	}
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if len(w.jobsOf(ComponentMigration)) != 1 {
		t.Fatalf("migration Jobs %v: the migration ran again", w.jobsOf(ComponentMigration))
	}
}

// A database restored from an old backup: the evidence Job is gone and the check reports schema
// 0. SchemaMismatch, Stalled, nothing is scaled down (fail-static); a retry runs the migration.
func TestCheckFindsTheDatabaseBehind(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Generation++
	w.step(time.Second)
	w.confirmed = "0" // restored
	w.skipI1 = true   // v1 runs on a database that went back under it; shardImages checks nothing scales
	w.deleteJob(MigrationJobName("rs-a", "1", 1))
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaMismatch) })
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("while the database is behind: %s", got)
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "migrate")
	w.run(100, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) && w.confirmed == "1" })
	if _, ok := w.jobs[MigrationJobName("rs-a", "1", 2)]; !ok {
		t.Fatalf("want attempt 2: %v", w.jobsOf(ComponentMigration))
	}
}

// check.afterMigration: the gate opens only on the check's report, created after the migration.
func TestCheckAfterMigrationConfirmsBeforeTheGateOpens(t *testing.T) {
	w := steady(t)
	withCheck(w, true)
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.creationOrder(); !strings.HasPrefix(got, "migration,check,us,") {
		t.Fatalf("order %s; log:\n%s", got, strings.Join(w.log, "\n"))
	}
	if st := w.rsvc.Status.Schema; st.ConfirmedBy != CheckJobName("rs-a", "2", 1) {
		t.Fatalf("status.schema = %+v", st)
	}
	// A no-op migration is caught by the check too.
	w.update("app:v3", "3", "migrate:noop")
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaMismatch) })
}

// check.beforeEachShard: each shard after the first starts only once a check Job created for it
// confirms the schema.
func TestCheckBeforeEachShard(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Check.BeforeEachShard = true
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.creationOrder(); got != "migration,us,check,eu,check,ap" {
		t.Fatalf("order %s; log:\n%s", got, strings.Join(w.log, "\n"))
	}
}

// check.beforeEachShard finds the database behind (changed by other hands after us-east was
// promoted): the gate closes with SchemaMismatch; eu-west and ap-south never run v2.
func TestCheckBeforeEachShardFindsTheDatabaseBehind(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Check.BeforeEachShard = true
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.rsvc.Status.PromotedShards == "1/3" })
	w.confirmed, w.skipI1 = "1", true // restored behind v2, which already serves us-east
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaMismatch) })
	for i := 0; i < 20; i++ {
		w.step(time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after the check found the database behind: %s", got)
	}
}

// A check before a shard that never finishes: SchemaCheckFailed within its deadline, the shard
// does not start, and a retry runs a second check for that shard.
func TestCheckBeforeEachShardThatHangs(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Check.BeforeEachShard = true
	w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:hang"
	w.rsvc.Spec.Schema.Check.ActiveDeadlineSeconds = ptr.To(int64(20))
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaCheckFailed) })
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "before shard eu-west did not finish within activeDeadlineSeconds (20s)") {
		t.Fatalf("Stalled = %+v", c)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("while the check hangs: %s", got)
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "check-again")
	w.step(time.Second)
	if n := len(w.jobsOf(ComponentCheck)); n != 2 {
		t.Fatalf("%d check Jobs after the retry, want 2", n)
	}
}
