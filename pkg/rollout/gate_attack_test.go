package rollout

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemareport"
)

// Adversarial tests of the schema gate after issue 10 (the gate reads the database). Each test
// names the rule it checks. Those marked "failed before its fix" each found a defect, described
// as it was (in the past of the code: the fix is in evidence.go, check.go or schema.go); the
// others document tricky behaviour that holds.

// gateReport is a schema report as a container would write it.
func gateReport(t *testing.T, version string, dirty bool, at time.Time) string {
	t.Helper()
	b, err := schemareport.Encode(schemareport.Report{Version: version, Dirty: dirty, Tool: "attack", Time: at})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// finishJob marks a Job of the world Complete (or Failed) at the given time and leaves one pod,
// controlled by the Job, whose containers end with the given termination messages (in spec
// order: name, message, name, message, ...). The pod's container statuses are sorted by name,
// as the kubelet writes them.
func (w *world) finishJob(name string, failed bool, at time.Time, containers ...string) *corev1.Pod {
	w.t.Helper()
	j := w.jobs[name]
	if j == nil {
		w.t.Fatalf("no Job %s", name)
	}
	j.Status.Active = 0
	phase := corev1.PodSucceeded
	if failed {
		phase = corev1.PodFailed
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: metav1.Time{Time: at}}}
	} else {
		j.Status.Succeeded = 1
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: at}}}
		j.Status.CompletionTime = &metav1.Time{Time: at}
	}
	w.seq++
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-attack", Namespace: j.Namespace, Labels: j.Spec.Template.Labels,
			UID: types.UID(name + "-attack-pod"), CreationTimestamp: j.CreationTimestamp,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Status: corev1.PodStatus{Phase: phase},
	}
	var statuses []corev1.ContainerStatus
	for i := 0; i+1 < len(containers); i += 2 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: containers[i]})
		statuses = append(statuses, corev1.ContainerStatus{Name: containers[i],
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: containers[i+1]}}})
	}
	// The kubelet sorts a pod's (non-init) container statuses by container name.
	for i := range statuses {
		for k := i + 1; k < len(statuses); k++ {
			if statuses[k].Name < statuses[i].Name {
				statuses[i], statuses[k] = statuses[k], statuses[i]
			}
		}
	}
	pod.Status.ContainerStatuses = statuses
	w.pods[pod.Name] = pod
	return pod
}

func (w *world) schemaReason() string { return w.reason(routingv1alpha1.ConditionSchemaReady) }

// ---------------------------------------------------------------------------------------------
// 1. Failed before its fix; what went wrong then:
//
// Rule: with check.afterMigration the gate opens on the check's report when it says version >= N
// and not dirty; a report that says N is never "below the required N" (every state ends in a
// precise reason).
//
// The API server and the Job controller stamp creation and completion in whole seconds. A fast
// migration (already at the version, or one statement) and the check that follows it can both be
// created and finish within one second. readingBefore then breaks the tie by name, and
// "rs-a-check-…" sorts before "rs-a-schema-…", so the migration's reading counts as the latest:
// needsCheckAfter stays true for ever, checkDecides hands the gate to afterCheck, and afterCheck
// calls every usable report SchemaMismatch, even one that confirms the version.
func TestGateAttackSameSecondCheckAfterMigrationOpensTheGate(t *testing.T) {
	w := newWorld(t)
	withCheck(w, true)
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.update("app:v2", "2", "migrate:ok")
	w.step(time.Second) // creates the migration; the world completes it
	w.step(time.Second) // creates the check after it; the world completes it
	mig, chk := w.jobs[MigrationJobName("rs-a", "2", 1)], w.jobs[CheckJobName("rs-a", "2", 1)]
	if mig == nil || chk == nil || len(chk.Status.Conditions) == 0 {
		t.Fatalf("want a finished migration and check for schema 2: %v", w.log)
	}
	// All four stamps in one second, as the API shows them.
	second := mig.CreationTimestamp
	chk.CreationTimestamp = second
	mig.Status.Conditions[0].LastTransitionTime = second
	chk.Status.Conditions[0].LastTransitionTime = second
	w.reconcile()
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("the check's report says schema 2, yet SchemaReady = %s/%s: %s", c.Status, c.Reason, c.Message)
	}
}

// 2. Failed before its fix; what went wrong then:
//
// Rule: the gate opens when the latest report says version >= N. A Job whose completion time is
// in the future (the Job controller's clock was ahead, then stepped back by NTP; a failover to a
// controller-manager whose clock is behind) must not outrank the report of a Job created, run and
// finished after it.
//
// readJobs orders readings by completion time only (readingBefore), and a time in the future is
// taken as is: schema 1's old report stays "the latest" until the clock reaches it, so schema 2's
// own report, which says 2, is ignored and the migration is declared SchemaMismatch.
func TestGateAttackFutureCompletionTimeDoesNotHideTheNewerReport(t *testing.T) {
	w := steady(t)
	old := w.jobs[MigrationJobName("rs-a", "1", 1)]
	future := metav1.Time{Time: w.now.Add(2 * time.Hour)}
	old.Status.Conditions[0].LastTransitionTime = future
	old.Status.CompletionTime = &future
	w.update("app:v2", "2", "migrate:ok")
	w.run(60, func() bool {
		return w.isTrue(routingv1alpha1.ConditionSchemaReady) || w.isTrue(routingv1alpha1.ConditionStalled)
	})
	if w.isTrue(routingv1alpha1.ConditionStalled) {
		t.Fatalf("migration Job %s reported schema 2 (the database is at %s), yet: %s: %s", MigrationJobName("rs-a", "2", 1), w.confirmed,
			w.condition(routingv1alpha1.ConditionStalled).Reason, w.condition(routingv1alpha1.ConditionStalled).Message)
	}
}

// 3. Failed before its fix; what went wrong then:
//
// Rule (docs/schema-report.md): the report is the termination message of the first container,
// in spec order, whose message is not empty.
//
// readReport walks pod.Status.ContainerStatuses, which the kubelet sorts by container name, not
// by spec order. A migration pod [migrate, cloudsql-proxy]: the migration did nothing and says so
// (schema 1); the proxy sidecar (alphabetically first) leaves a stale report of schema 2 (an
// image reused from another database, a wrapper that prints the target). The gate opens on the
// sidecar's report although the migration container, the first in spec order, says 1.
func TestGateAttackReportReadInSpecOrder(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.step(time.Second)
	name := MigrationJobName("rs-a", "2", 1)
	w.finishJob(name, false, w.now,
		"migrate", gateReport(t, "1", false, w.now),
		"cloudsql-proxy", gateReport(t, "2", false, w.now))
	w.skipI1 = true // the world's database is not what the forged pod says; the test checks the gate itself
	w.reconcile()
	if w.isTrue(routingv1alpha1.ConditionSchemaReady) || w.rsvc.Status.Schema.ConfirmedVersion == "2" {
		t.Fatalf("the gate opened on the sidecar's report: status.schema = %+v", w.rsvc.Status.Schema)
	}
	if !w.stalledWith(routingv1alpha1.ReasonSchemaMismatch) {
		t.Fatalf("want SchemaMismatch from the migrate container's report, got %s", w.schemaReason())
	}
}

// 4. Failed before its fix; what went wrong then:
//
// Rules: lost evidence never runs the migration again (with spec.schema.check a check asks the
// database); a deleted attempt's name is never reused; recomputing never creates a duplicate.
//
// A policy engine sets ttlSecondsAfterFinished: 0 on every Job (or the manager was down longer
// than the TTL): migration attempt 1 for schema 2 succeeds, migrates the database, and is deleted
// with its pod before the manager reads it. The stored status names attempt 1 (Migrating), but
// schemaGate's `latest == nil` case starts attempt 1 again, under the deleted Job's very name: the
// migration runs twice, and with TTL 0 it would run again after every success. failedJobGone
// covers a failed attempt whose Job is gone, evidenceLost covers one that was confirmed, but a
// succeeded attempt whose Job vanished before it was read falls through both.
func TestGateAttackSucceededAttemptDeletedBeforeItWasReadIsNotRunAgain(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.update("app:v2", "2", "migrate:ok")
	first := MigrationJobName("rs-a", "2", 1)
	w.step(time.Second) // attempt 1 is created; the world runs it: the database is at 2
	if w.jobs[first] == nil || w.confirmed != "2" {
		t.Fatalf("want attempt 1 done: jobs %v, database %s", w.jobsOf(ComponentMigration), w.confirmed)
	}
	w.deleteJob(first) // ttlSecondsAfterFinished: 0, before the manager saw it finish
	plan := w.reconcile()
	for _, a := range plan.Actions {
		if a.Kind == CreateJob && a.Job.Labels[LabelComponent] == ComponentMigration {
			t.Fatalf("the migration runs again (%s) after attempt 1 succeeded and was deleted; want a check Job (status.schema = %+v)",
				a.Job.Name, w.rsvc.Status.Schema)
		}
	}
}

// 5. Failed before its fix; what went wrong then:
//
// Rules: lost evidence never runs the migration again; with spec.schema.check a check Job asks the
// database (repeated loss: the check Job is deleted too).
//
// Mid-rollout (the gate open, us-east being rolled, no schema-2 ReplicaSet has served a shard
// yet), the schema-2 migration Job is deleted: a check Job starts, and hold() writes
// status.schema.confirmedVersion "1" (the latest usable reading left is schema 1's). The check
// Job is then deleted while it runs (the same TTL policy). wasConfirmed now finds neither a
// stored confirmation of 2 nor a served schema-2 ReplicaSet, so the gate starts migration
// attempt 1 again, under the name of the Job that was deleted.
func TestGateAttackCheckDeletedWhileRunningMidRolloutRunsNoMigration(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:hang"
	w.update("app:v2", "2", "migrate:ok")
	w.run(60, func() bool { return w.v2Pods() > 0 })
	w.deleteJob(MigrationJobName("rs-a", "2", 1))
	w.step(time.Second)
	check := CheckJobName("rs-a", "2", 1)
	if w.jobs[check] == nil {
		t.Fatalf("want check Job %s: %v", check, w.log)
	}
	w.step(time.Second)
	w.deleteJob(check)
	for i := 0; i < 5; i++ {
		plan := w.step(time.Second)
		for _, a := range plan.Actions {
			if a.Kind == CreateJob && a.Job.Labels[LabelComponent] == ComponentMigration {
				t.Fatalf("round %d: the migration runs again (%s) after its evidence and then the check were deleted; SchemaReady %s: %s",
					i, a.Job.Name, w.schemaReason(), w.condition(routingv1alpha1.ConditionSchemaReady).Message)
			}
		}
	}
}

// 6. Failed before its fix; what went wrong then:
//
// Rules: a check never reads a database a migration may be changing (README: "A check never
// starts while a migration pod may still be changing the database"); the latest report wins, and
// a migration's own report that says N confirms N.
//
// A check Job for schema 1 runs (lost evidence, a slow database). A version bump to 2 arrives:
// startMigration waits for running migration Jobs and stray migration pods, but not for a running
// check Job, so the schema-2 migration starts at once and finishes while the check is still
// connected. The check then ends with what it read (schema 1), and since readings are ordered by
// completion time its stale report outranks the migration's: SchemaMismatch naming the check,
// although the database is at 2. (Whichever fix: the migration waits for the check, or a reading
// taken before a migration never outranks it, the gate must end open here.)
func TestGateAttackVersionBumpWhileACheckRuns(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:hang"
	w.rsvc.Generation++
	w.step(time.Second)
	w.deleteJob(MigrationJobName("rs-a", "1", 1))
	w.step(time.Second)
	check := CheckJobName("rs-a", "1", 1)
	if w.jobs[check] == nil {
		t.Fatalf("want check Job %s: %v", check, w.log)
	}
	w.update("app:v2", "2", "migrate:ok")
	for i := 0; i < 3; i++ {
		// reconcile and tick, not step: step's S-15 check counts the running check as a migration.
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	started := w.jobs[MigrationJobName("rs-a", "2", 1)] != nil
	// The check ends now, with what it read when it connected: schema 1.
	w.finishJob(check, false, w.now, "check", gateReport(t, "1", false, w.now.Add(-4*time.Second)))
	w.run(100, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) || w.isTrue(routingv1alpha1.ConditionStalled)
	})
	if w.isTrue(routingv1alpha1.ConditionStalled) {
		t.Fatalf("migration started while the check ran: %v; database at %s; Stalled %s: %s", started, w.confirmed,
			w.condition(routingv1alpha1.ConditionStalled).Reason, w.condition(routingv1alpha1.ConditionStalled).Message)
	}
}

// 7. Failed before its fix; what went wrong then:
//
// Rules: with check.afterMigration the gate opens only on a check's report after the migration;
// lost evidence (the confirming Job deleted) holds: nothing is created or scaled up until the
// check reports (hold's own message says so).
//
// With afterMigration, schema 1 was confirmed by check Job #1; a TTL deletes it. The latest
// usable reading is now the migration's own report, needsCheckAfter closes the gate and a new
// check Job starts, and hold() says "no pod is created or scaled up until it reports". But
// recordEvidence has already written status.schema.confirmedVersion = 1 from the migration's
// report, and mayRun reads only that: resize scales us-east from 3 to 5 while the check runs.
func TestGateAttackAfterMigrationCheckDeletedScalesNothingUp(t *testing.T) {
	w := newWorld(t)
	withCheck(w, true)
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.rsvc.Status.Schema.ConfirmedBy != CheckJobName("rs-a", "1", 1) {
		t.Fatalf("want schema 1 confirmed by the check: %+v", w.rsvc.Status.Schema)
	}
	w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:hang"
	w.deleteJob(CheckJobName("rs-a", "1", 1))
	w.setReplicas("us-east", 5)
	w.skipI2 = true
	for i := 0; i < 5; i++ {
		w.step(time.Second)
	}
	if len(w.jobsOf(ComponentCheck)) != 1 {
		t.Fatalf("want one new check Job: %v", w.jobsOf(ComponentCheck))
	}
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if got := w.shardImages(); !strings.Contains(got, "us-east=app:v1:3") {
		t.Fatalf("scaled up while the check that must confirm runs (SchemaReady %s: %s): %s", c.Reason, c.Message, got)
	}
}

// 8. Failed before its fix; what went wrong then:
//
// Rules: every state ends in a precise reason; Stalled only when nothing is in progress. The Job's
// schemagate.io/after-attempt annotation is untrusted input like its labels.
//
// A check found the database behind (restored) and a retry runs migration attempt 2. Someone
// edits the check Job's after-attempt to "99". checkDecides believes it, and since the check case
// comes before the `!ended` case in schemaGate, the RoutingService says Stalled/SchemaMismatch
// while attempt 2 is running, instead of Migrating.
func TestGateAttackHandEditedAfterAttemptCannotStallARunningMigration(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Generation++
	w.step(time.Second)
	w.confirmed = "0" // restored from an old backup
	w.skipI1 = true
	w.deleteJob(MigrationJobName("rs-a", "1", 1))
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaMismatch) })
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:hang"
	w.annotate(routingv1alpha1.AnnotationRetry, "migrate")
	w.step(time.Second)
	if w.jobs[MigrationJobName("rs-a", "1", 2)] == nil {
		t.Fatalf("want attempt 2: %v", w.log)
	}
	w.jobs[CheckJobName("rs-a", "1", 1)].Annotations[annotationAfterAttempt] = "99"
	for i := 0; i < 3; i++ {
		w.step(time.Second)
	}
	if w.isTrue(routingv1alpha1.ConditionStalled) || w.schemaReason() != routingv1alpha1.ReasonMigrating {
		t.Fatalf("attempt 2 runs, yet SchemaReady %s, Stalled %+v", w.schemaReason(), w.condition(routingv1alpha1.ConditionStalled))
	}
}

// 9. PASSES (documents). Rule: a report counts only from a pod whose controller is a migration or
// check Job this RoutingService controls. Pods that copy the labels of rs-a's migration pods but
// belong to another RoutingService's Job (another UID), or name rs-a's Job as an owner that is
// not the controller, say nothing about rs-a's migration: its Complete Job has no report of its
// own, so it ends InvalidSchemaReport and the gate never opens.
func TestGateAttackForeignAndRelabelledPodsConfirmNothing(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.step(time.Second)
	mig := w.jobs[MigrationJobName("rs-a", "2", 1)]
	mig.Status.Active, mig.Status.Succeeded = 0, 1
	mig.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: w.now}}}
	good := gateReport(t, "2", false, w.now)
	pod := func(name string, owner metav1.OwnerReference, phase corev1.PodPhase) {
		w.pods[name] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			Labels: mig.Spec.Template.Labels, CreationTimestamp: metav1.Time{Time: w.now}, OwnerReferences: []metav1.OwnerReference{owner}},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: good}}}}}}
	}
	// Another RoutingService's Job (same labels, another UID).
	pod("rs-b-pod", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: mig.Name, UID: "uid-of-rs-b-job", Controller: ptrTrue()}, corev1.PodSucceeded)
	// rs-a's Job, but not as controller.
	pod("not-controller", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: mig.Name, UID: mig.UID}, corev1.PodSucceeded)
	w.now = w.now.Add(time.Second)
	w.reconcile()
	if w.isTrue(routingv1alpha1.ConditionSchemaReady) || w.rsvc.Status.Schema.ConfirmedVersion == "2" {
		t.Fatalf("a foreign pod's report opened the gate: %+v", w.rsvc.Status.Schema)
	}
	// Complete with no pod of its own: its report is "gone", which confirms nothing.
	for i := 0; i < 40; i++ {
		w.now = w.now.Add(time.Second)
		w.reconcile()
		if w.v2Pods() != 0 || w.rsvc.Status.Schema.ConfirmedVersion == "2" {
			t.Fatalf("round %d: opened: %+v", i, w.rsvc.Status.Schema)
		}
	}
	if !w.stalledWith(routingv1alpha1.ReasonInvalidSchemaReport) {
		t.Fatalf("want InvalidSchemaReport, got %s: %s", w.schemaReason(), w.condition(routingv1alpha1.ConditionSchemaReady).Message)
	}
}

// 10. PASSES (documents). Rules: dirty → SchemaDirty, never retried automatically, not by a
// changed migration template, and not by lowering the required version back (Git revert): the
// dirty report is still the latest reading, so even schema 1, which the database once had, is
// not confirmed; v1 keeps serving (nothing is scaled down) and no Job is created.
func TestGateAttackDirtyThenVersionLoweredStaysDirty(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:dirty-ok")
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaDirty) })
	jobs := len(w.jobs)
	w.update("app:v1", "1", "migrate:ok") // revert in Git, with a "fixed" template too
	w.skipI1 = true                       // the world's I1 reads its dirty database as schema 1; the test checks the gate
	for i := 0; i < 20; i++ {
		if plan := w.step(5 * time.Second); len(plan.Actions) != 0 {
			t.Fatalf("round %d acts on a dirty database: %v", i, plan.Actions)
		}
	}
	if len(w.jobs) != jobs || !w.stalledWith(routingv1alpha1.ReasonSchemaDirty) {
		t.Fatalf("Jobs %d → %d, Stalled %+v", jobs, len(w.jobs), w.condition(routingv1alpha1.ConditionStalled))
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("while dirty: %s", got)
	}
}

// 11. Failed before its fix, on a rule the spec left open: is a known dirty report overridden by
// switching spec.schema.evidence to JobSuccess? Decided: no; under JobSuccess a report that
// parses still decides (docs/schema-report.md).
//
// Rules: dirty → SchemaDirty + Stalled, never retried or passed automatically; only a person may
// clear it (then says so with a retry). The brief's rule for JobSuccess ("a migration Job of version
// >= N succeeded") says nothing about a report that exists and says dirty.
//
// A migration exits 0 but leaves the database dirty and says so (dirty-ok): SchemaDirty. Someone
// switches evidence to JobSuccess mid-rollout (to get past an unrelated InvalidSchemaReport
// elsewhere, or by a shared Kustomize patch): readJobs then drops the Job's report entirely and
// the gate opens on a database the report says is dirty; v2 pods start.
func TestGateAttackJobSuccessStillHonoursADirtyReport(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:dirty-ok")
	w.run(60, func() bool { return w.stalledWith(routingv1alpha1.ReasonSchemaDirty) })
	w.rsvc.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
	w.rsvc.Generation++
	w.skipI1 = true // the world's database is dirty at 1; the test checks what the gate does
	for i := 0; i < 10; i++ {
		w.step(time.Second)
	}
	if w.v2Pods() != 0 || w.isTrue(routingv1alpha1.ConditionSchemaReady) {
		t.Fatalf("the gate opened on a database whose report says dirty: v2 pods %d, status.schema %+v", w.v2Pods(), w.rsvc.Status.Schema)
	}
}

// 12. PASSES (documents). Rules: lost evidence in steady state runs one check and holds every
// condition; the hold survives spec.paused set and cleared mid-check, a restarted manager (the
// same state computed twice creates nothing twice), and spec.schema.check removed while its Job
// runs (the running check still decides; nothing runs the migration).
func TestGateAttackCheckSurvivesPauseRestartAndRemoval(t *testing.T) {
	w := steady(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:hang"
	w.rsvc.Generation++
	w.step(time.Second)
	before := w.rsvc.Status.DeepCopy()
	w.deleteJob(MigrationJobName("rs-a", "1", 1))
	w.reconcile()
	w.tick()
	check := CheckJobName("rs-a", "1", 1)
	if w.jobs[check] == nil {
		t.Fatalf("want check %s", check)
	}
	steps := []func(){
		func() { w.rsvc.Spec.Paused = true; w.rsvc.Generation++ },
		func() { w.rsvc.Spec.Paused = false; w.rsvc.Generation++ },
		func() { w.rsvc.Spec.Schema.Check = nil; w.rsvc.Generation++ },
	}
	for _, change := range steps {
		change()
		for i := 0; i < 3; i++ {
			w.now = w.now.Add(time.Second)
			plan := w.reconcile()
			if len(plan.Actions) != 0 {
				t.Fatalf("acts mid-check: %v", plan.Actions)
			}
			if again := Compute(w.observed()); len(again.Actions) != 0 {
				t.Fatalf("a restart acts: %v", again.Actions)
			}
			w.tick()
			for _, ct := range []string{routingv1alpha1.ConditionReady, routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionStalled} {
				old, now := storedCondition(before, ct), w.condition(ct)
				if old.Status != now.Status || !old.LastTransitionTime.Equal(&now.LastTransitionTime) {
					t.Fatalf("%s went %s → %s (%s)", ct, old.Status, now.Status, now.Message)
				}
			}
		}
	}
	// The check reports (with the spec's check gone): the schema is confirmed again.
	w.finishJob(check, false, w.now, "check", gateReport(t, "1", false, w.now))
	w.now = w.now.Add(time.Second)
	w.reconcile()
	if st := w.rsvc.Status.Schema; st.ConfirmedBy != check || !w.isTrue(routingv1alpha1.ConditionReady) || len(w.jobsOf(ComponentMigration)) != 0 {
		t.Fatalf("status.schema %+v, Ready %v, migrations %v", st, w.isTrue(routingv1alpha1.ConditionReady), w.jobsOf(ComponentMigration))
	}
}

// 13. PASSES (documents a choice: a report is a fact about the database, whatever the Job's exit). Rule: the latest usable report
// decides, whatever the Job's outcome. A migration Job that failed (BackoffLimitExceeded: a
// post-migration hook crashed, say) but whose failed pod reported the database clean at 2 opens
// the gate: SchemaConfirmed, no attempt 2, not Stalled. Under evidence JobSuccess too (readJobs
// reads a Failed Job's report in both modes), although the brief's JobSuccess rule speaks only of
// a migration Job that succeeded.
func TestGateAttackFailedJobWithACleanHigherReportOpensTheGate(t *testing.T) {
	for _, evidence := range []routingv1alpha1.SchemaEvidence{routingv1alpha1.SchemaEvidenceReport, routingv1alpha1.SchemaEvidenceJobSuccess} {
		t.Run(string(evidence), func(t *testing.T) {
			w := steady(t)
			w.rsvc.Spec.Schema.Evidence = evidence
			w.update("app:v2", "2", "migrate:hang")
			w.step(time.Second)
			w.confirmed = "2" // the migration did migrate
			w.finishJob(MigrationJobName("rs-a", "2", 1), true, w.now, "migrate", gateReport(t, "2", false, w.now))
			w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
			if n := len(w.jobsOf(ComponentMigration)); n != 2 || w.rsvc.Status.Schema.ConfirmedBy != MigrationJobName("rs-a", "2", 1) {
				t.Fatalf("migration Jobs %d, status.schema %+v", n, w.rsvc.Status.Schema)
			}
		})
	}
}

// A contract pod left running by a contract Job deleted with --cascade=orphan (no controller
// any more) still changes the database: the next migration waits for it, saying so, and starts
// once it has ended. A migration pod whose Job is gone blocked it already; a contract pod did not.
func TestOrphanedContractPodBlocksTheNextMigration(t *testing.T) {
	w := steady(t)
	w.pods["rs-a-contract-orphan"] = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-a-contract-orphan", Namespace: w.rsvc.Namespace, UID: "pod-contract-orphan",
			Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelName: "rs-a", LabelComponent: ComponentContract, LabelSchemaVersion: "1", LabelAttempt: "1"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	w.update("app:v2", "2", "migrate:v2")
	for i := 0; i < 5; i++ {
		w.reconcile()
		w.now = w.now.Add(time.Second)
	}
	if w.jobs[MigrationJobName("rs-a", "2", 1)] != nil {
		t.Fatal("the migration to schema 2 started beside a running contract pod")
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c == nil || !strings.Contains(c.Message, "rs-a-contract-orphan") || !strings.Contains(c.Message, "contract Job") {
		t.Fatalf("SchemaReady does not name the contract pod: %+v", c)
	}
	w.pods["rs-a-contract-orphan"].Status.Phase = corev1.PodSucceeded
	w.run(300, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
}
