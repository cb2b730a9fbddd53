package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// What status.schema and SchemaReady say about a migration attempt must stay true after the
// attempt's Job (or only its pods) is deleted: a TTL, a policy, a person.

// An attempt stalled as SchemaDirty, SchemaMismatch or InvalidSchemaReport, then deleted (the
// Job, or only its pods): the reason stays, the message says what its report said and that it
// was deleted, nothing runs again by itself, and a retry runs the next attempt under a new name.
func TestFailedAttemptDeletedKeepsItsReason(t *testing.T) {
	for _, tc := range []struct{ image, reason, says string }{
		{"migrate:dirty", routingv1alpha1.ReasonSchemaDirty, "dirty"},
		{"migrate:dirty-ok", routingv1alpha1.ReasonSchemaDirty, "dirty"},
		{"migrate:noop", routingv1alpha1.ReasonSchemaMismatch, "below"},
		{"migrate:garbage", routingv1alpha1.ReasonInvalidSchemaReport, "schema report"},
		{"migrate:silent", routingv1alpha1.ReasonInvalidSchemaReport, "schema report"},
	} {
		for _, what := range []string{"job", "pods"} {
			t.Run(tc.image+"/"+what, func(t *testing.T) {
				w := steady(t)
				w.update("app:v2", "2", tc.image)
				w.run(60, func() bool { return w.stalledWith(tc.reason) })
				first := MigrationJobName("rs-a", "2", 1)
				if what == "job" {
					w.deleteJob(first)
				} else {
					for name, pod := range w.pods {
						if metav1.IsControlledBy(pod, w.jobs[first]) {
							delete(w.pods, name)
						}
					}
				}
				for i := 0; i < 40; i++ {
					plan := w.step(5 * time.Second)
					if len(plan.Actions) != 0 {
						t.Fatalf("round %d acts: %v", i, plan.Actions)
					}
					for _, ct := range []string{routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionStalled} {
						c := w.condition(ct)
						if c.Reason != tc.reason || !strings.Contains(c.Message, tc.says) || strings.Contains(c.Message, "never read") {
							t.Fatalf("round %d: %s = %s: %s; want %s, saying %q", i, ct, c.Reason, c.Message, tc.reason, tc.says)
						}
					}
				}
				if st := w.rsvc.Status.Schema; st.MigrationJob != first || st.Attempt != 1 {
					t.Fatalf("status.schema = %+v: want attempt 1 named", st)
				}
				w.dirty = false
				w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
				w.rsvc.Generation++
				w.annotate(routingv1alpha1.AnnotationRetry, "fixed")
				w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
				if w.jobs[MigrationJobName("rs-a", "2", 2)] == nil {
					t.Fatalf("the retry must run attempt 2: %v", w.jobsOf(ComponentMigration))
				}
			})
		}
	}
}

// An attempt deleted with a later attempt left (attempt 2 failed dirty and was deleted, attempt 1
// is kept): the stored attempt 2 is what the gate reports, and a retry runs attempt 3, never a
// second attempt 2.
func TestLaterAttemptDeletedIsNotReplacedByTheEarlierOne(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:fail")
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationFailed) })
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:dirty"
	w.rsvc.Generation++
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaDirty) })
	second := MigrationJobName("rs-a", "2", 2)
	if w.jobs[second] == nil {
		t.Fatalf("want attempt 2: %v", w.jobsOf(ComponentMigration))
	}
	w.deleteJob(second)
	for i := 0; i < 10; i++ {
		w.step(5 * time.Second)
		if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonSchemaDirty || !strings.Contains(c.Message, second) {
			t.Fatalf("round %d: SchemaReady %s: %s; want SchemaDirty naming %s", i, c.Reason, c.Message, second)
		}
	}
	w.dirty = false
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
	w.rsvc.Generation++
	w.annotate(routingv1alpha1.AnnotationRetry, "fixed")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.jobs[MigrationJobName("rs-a", "2", 3)] == nil {
		t.Fatalf("the retry must run attempt 3: %v", w.log)
	}
}

// ttlSecondsAfterFinished: 0 and no check: the Job that confirmed schema 2 is deleted once its
// report was read. Status keeps saying what confirmed schema 2 and which attempt ran; SchemaReady
// agrees with it; nothing more is scaled up (the gate reads only the cluster).
func TestConfirmingJobDeletedStatusStillSaysWhatConfirmed(t *testing.T) {
	t.Run("after the rollout", func(t *testing.T) {
		w := steady(t)
		w.update("app:v2", "2", "migrate:ok")
		w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
		job := MigrationJobName("rs-a", "2", 1)
		w.deleteJob(job)
		for i := 0; i < 10; i++ {
			w.step(time.Second)
		}
		st := w.rsvc.Status.Schema
		if st.ConfirmedVersion != "2" || st.ConfirmedBy != job || st.MigrationJob != job || st.Attempt != 1 || !w.isTrue(routingv1alpha1.ConditionSchemaReady) {
			t.Fatalf("status.schema = %+v, SchemaReady %+v", st, w.condition(routingv1alpha1.ConditionSchemaReady))
		}
		w.setReplicas("us-east", 5)
		w.skipI2 = true
		for i := 0; i < 5; i++ {
			w.step(time.Second)
		}
		if got := w.shardImages(); !strings.Contains(got, "us-east=app:v2:3") {
			t.Fatalf("scaled up without evidence: %s", got)
		}
	})
	t.Run("mid-rollout", func(t *testing.T) {
		w := steady(t)
		w.update("app:v2", "2", "migrate:ok")
		w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionSchemaReady) })
		job := MigrationJobName("rs-a", "2", 1)
		w.deleteJob(job)
		w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaEvidenceLost) })
		c := w.condition(routingv1alpha1.ConditionStalled)
		if strings.Contains(c.Message, "never read") || !strings.Contains(c.Message, job) {
			t.Fatalf("Stalled: %s: the report of %s was read", c.Message, job)
		}
		if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "2" || st.ConfirmedBy != job || st.MigrationJob != job || st.Attempt != 1 {
			t.Fatalf("status.schema = %+v", st)
		}
	})
	t.Run("then a check confirms", func(t *testing.T) {
		w := steady(t)
		w.update("app:v2", "2", "migrate:ok")
		w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
		withCheck(w, false)
		w.rsvc.Generation++
		job := MigrationJobName("rs-a", "2", 1)
		w.deleteJob(job)
		check := CheckJobName("rs-a", "2", 1)
		w.run(60, func() bool {
			return w.rsvc.Status.Schema.ConfirmedBy == check && w.isTrue(routingv1alpha1.ConditionReady)
		})
		if st := w.rsvc.Status.Schema; st.ConfirmedVersion != "2" || st.CheckJob != check || st.MigrationJob != job || st.Attempt != 1 {
			t.Fatalf("status.schema = %+v: want the check as confirmedBy and checkJob, attempt 1 as migrationJob", st)
		}
	})
}

// A hand-edited status.schema.startTime in the future is taken as now, as shard times are: it
// cannot hold the gate until then.
func TestFutureSchemaStartTimeIsTakenAsNow(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.step(time.Second)
	gone := MigrationJobName("rs-a", "2", 1)
	w.deleteJob(gone)
	w.rsvc.Status.Schema.StartTime = &metav1.Time{Time: w.now.Add(24 * time.Hour)}
	w.rsvc.Status.Schema.CompletionTime = &metav1.Time{Time: w.now.Add(48 * time.Hour)}
	start := w.now
	w.run(100, func() bool { return w.reason(routingv1alpha1.ConditionSchemaReady) != routingv1alpha1.ReasonMigrating })
	if waited := w.now.Sub(start); waited > reportLag+5*time.Second {
		t.Fatalf("the gate waited %s for a Job the cache does not show", waited)
	}
	if st := w.rsvc.Status.Schema; st.StartTime == nil || st.StartTime.After(w.now) || (st.CompletionTime != nil && st.CompletionTime.After(w.now)) {
		t.Fatalf("status.schema = %+v: times in the future", st)
	}
}
