package rollout

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemareport"
)

// spec.schema.migration.jobMetadata reaches the Job (a queue reads the Job, not its pods);
// schemagate's own keys win; a change of it alone starts no migration.
func TestMigrationJobMetadata(t *testing.T) {
	rsvc := fixture()
	rsvc.Spec.Schema.Migration.JobMetadata = &routingv1alpha1.JobMetadata{
		Labels:      map[string]string{"kueue.x-k8s.io/queue-name": "db-migrations", LabelComponent: "not-ours", LabelAttempt: "9"},
		Annotations: map[string]string{"example.com/team": "payments", annotationMigrationTemplate: "forged"},
	}
	j := NewMigrationJob(rsvc, "2", 1)
	if j.Labels["kueue.x-k8s.io/queue-name"] != "db-migrations" || j.Labels[LabelComponent] != ComponentMigration || j.Labels[LabelAttempt] != "1" {
		t.Fatalf("Job labels %v", j.Labels)
	}
	if j.Annotations["example.com/team"] != "payments" || j.Annotations[annotationMigrationTemplate] != migrationTemplateHash(rsvc) {
		t.Fatalf("Job annotations %v", j.Annotations)
	}
	if _, ok := j.Spec.Template.Labels["kueue.x-k8s.io/queue-name"]; ok {
		t.Fatalf("jobMetadata reached the pod template: %v", j.Spec.Template.Labels)
	}

	w := steady(t)
	w.rsvc.Spec.Schema.Migration.JobMetadata = &routingv1alpha1.JobMetadata{Labels: map[string]string{"team": "db"}}
	w.rsvc.Generation++
	for i := 0; i < 10; i++ {
		if plan := w.step(time.Second); len(plan.Actions) != 0 {
			t.Fatalf("a jobMetadata change acts: %v", plan.Actions)
		}
	}
}

// queue plays a queue such as Kueue: it suspends a new Job (the Job controller then sets its
// Suspended condition) until release.
func (w *world) queue(name string) {
	j := w.jobs[name]
	j.Spec.Suspend = ptr.To(true)
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue, Reason: "JobSuspended", LastTransitionTime: j.CreationTimestamp}}
}

// release lets a queued Job run: the Job controller resets its startTime.
func (w *world) release(name string) {
	j := w.jobs[name]
	j.Spec.Suspend = ptr.To(false)
	j.Status.Conditions = nil
	j.Status.StartTime = &metav1.Time{Time: w.now}
}

// A migration Job a queue keeps suspended is reported as suspended, since when; its deadline does
// not run meanwhile; past activeDeadlineSeconds suspended it is Stalled (I3); released, it runs
// with its whole deadline and opens the gate, once.
func TestQueuedMigrationIsReportedAndItsDeadlineWaits(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.reconcile()
	job := MigrationJobName("rs-a", "2", 1)
	w.queue(job)
	created := w.jobs[job].CreationTimestamp
	for i := 0; i < 10; i++ {
		w.step(10 * time.Second) // 100 s, within the 120 s deadline
	}
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	st := w.rsvc.Status.Schema
	if c.Reason != routingv1alpha1.ReasonMigrationSuspended || !strings.Contains(c.Message, created.UTC().Format(time.RFC3339)) ||
		st.SuspendedSince == nil || !st.SuspendedSince.Equal(&created) || w.reason(routingv1alpha1.ConditionReconciling) != routingv1alpha1.ReasonMigrationSuspended {
		t.Fatalf("SchemaReady %s: %s; status.schema %+v", c.Reason, c.Message, st)
	}
	for i := 0; i < 10; i++ {
		w.step(10 * time.Second) // 200 s: past the deadline, had it run
	}
	if !w.stalledWith(routingv1alpha1.ReasonMigrationSuspended) {
		t.Fatalf("after 200 s suspended: Stalled %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	w.release(job)
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.jobsOf(ComponentMigration)); n != 2 || w.rsvc.Status.Schema.SuspendedSince != nil {
		t.Fatalf("migration Jobs %v, status.schema %+v", w.jobsOf(ComponentMigration), w.rsvc.Status.Schema)
	}
	for _, l := range w.log {
		if strings.Contains(l, routingv1alpha1.ReasonMigrationDeadline) {
			t.Fatalf("the deadline fired while the Job was suspended: %s", l)
		}
	}
}

// One rule for a success after schemagate's deadline: it never opens the gate; the attempt stays
// MigrationDeadlineExceeded, saying so; a retry runs the next attempt, whose report decides.
func TestLateSuccessNeverOpensTheGate(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.run(200, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationDeadline) })
	job := MigrationJobName("rs-a", "2", 1)
	w.confirmed = "2" // the migration did its work after all
	w.finishJob(job, false, w.now, "migrate", gateReport(t, "2", false, w.now))
	for i := 0; i < 10; i++ {
		w.step(time.Second)
		c := w.condition(routingv1alpha1.ConditionSchemaReady)
		if w.v2Pods() != 0 || c.Reason != routingv1alpha1.ReasonMigrationDeadline || !strings.Contains(c.Message, "after schemagate's deadline") {
			t.Fatalf("round %d: v2 pods %d, SchemaReady %s: %s", i, w.v2Pods(), c.Reason, c.Message)
		}
	}
	w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
	w.rsvc.Generation++
	w.annotate(routingv1alpha1.AnnotationRetry, "accept")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.jobs[MigrationJobName("rs-a", "2", 2)] == nil {
		t.Fatalf("want attempt 2: %v", w.jobsOf(ComponentMigration))
	}
}

// waitingPod adds a pod of Job name whose container waits for reason (message).
func (w *world) waitingPod(name, reason, message string) {
	j := w.jobs[name]
	w.pods[name+"-waiting"] = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-waiting", Namespace: j.Namespace, Labels: j.Spec.Template.Labels, UID: types.UID(name + "-waiting"),
			CreationTimestamp: j.CreationTimestamp, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "migrate"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}},
	}
}

// A migration whose Secret name is mistyped: while it waits the condition names the cause; at
// the deadline the Job controller fails it (DeadlineExceeded) and deletes its pod, and the final
// condition is MigrationDeadlineExceeded, still naming the cause.
func TestDeadlineExceededNamesTheCause(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	job := MigrationJobName("rs-a", "2", 1)
	w.waitingPod(job, "CreateContainerConfigError", `secret "db-credentialz" not found`)
	w.step(time.Second)
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); !strings.Contains(c.Message, "CreateContainerConfigError") || !strings.Contains(w.rsvc.Status.Schema.Cause, `secret "db-credentialz" not found`) {
		t.Fatalf("while waiting: %s; cause %q", c.Message, w.rsvc.Status.Schema.Cause)
	}
	j := w.jobs[job]
	j.Status.Active = 0
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline"}}
	delete(w.pods, job+"-waiting")
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationDeadline) })
	for _, ct := range []string{routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionStalled} {
		if c := w.condition(ct); !strings.Contains(c.Message, "CreateContainerConfigError") || !strings.Contains(c.Message, "db-credentialz") {
			t.Fatalf("%s: %s: the cause is lost", ct, c.Message)
		}
	}
}

// A failed migration whose wrapper wrote a schema report with the tail of the tool's error: the
// condition describes the report and quotes the tool's error, never the raw JSON; text copied
// from the pod is valid UTF-8 and bounded.
func TestFailedMigrationQuotesTheToolsError(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	job := MigrationJobName("rs-a", "2", 1)
	sqlErr := strings.Repeat("goose run: applying 00002_users.sql\n", 100) + "ERROR: relation \"users\" already exists (SQLSTATE 42P07)\xff"
	b, err := schemareport.Encode(schemareport.Report{Version: "1", Tool: "goose", Time: w.now, Error: sqlErr})
	if err != nil {
		t.Fatal(err)
	}
	pod := w.finishJob(job, true, w.now, "migrate", string(b))
	pod.Status.ContainerStatuses[0].State.Terminated.ExitCode = 1
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationFailed) })
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if !strings.Contains(c.Message, `relation "users" already exists (SQLSTATE 42P07)`) || strings.Contains(c.Message, `"schemagate":`) ||
		!utf8.ValidString(c.Message) || len(c.Message) > 2048 || !strings.Contains(c.Message, "version 1") {
		t.Fatalf("SchemaReady: %d bytes: %s", len(c.Message), c.Message)
	}
	if cause := w.rsvc.Status.Schema.Cause; len(cause) > maxCause || !utf8.ValidString(cause) {
		t.Fatalf("status.schema.cause: %d bytes", len(cause))
	}
}

func TestPodTextIsValidAndBounded(t *testing.T) {
	for _, in := range []string{"", "ok", "\xff\xfe", strings.Repeat("é", 2000), strings.Repeat("a", 5000) + "\xff"} {
		for _, n := range []int{8, 100, 1024} {
			out := podText(in, n)
			if !utf8.ValidString(out) || len(out) > n {
				t.Fatalf("podText(%d bytes, %d) = %d bytes, valid %v", len(in), n, len(out), utf8.ValidString(out))
			}
		}
	}
}

// resumeLagging plays a queue releasing a suspended Job (spec.suspend false) before the Job
// controller has acted on it: its Suspended condition still says True, its startTime is unset.
func (w *world) resumeLagging(name string) {
	j := w.jobs[name]
	j.Spec.Suspend = ptr.To(false)
	j.Status.StartTime = nil
}

// catchUp plays the Job controller acting on a resume that happened at resumed: Suspended=False
// since then, and a new startTime.
func (w *world) catchUp(name string, resumed time.Time) {
	j := w.jobs[name]
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse, Reason: "JobResumed", LastTransitionTime: metav1.Time{Time: resumed}}}
	j.Status.StartTime = &metav1.Time{Time: resumed}
}

// A migration Job resumed after a long suspension has its whole deadline from the resume, also
// in the moments before the Job controller writes its new startTime (or if it never does): no
// MigrationDeadlineExceeded at the resume, and the deadline still passes in bounded time (I3). A
// success within that deadline opens the gate (it is not late).
func TestResumedMigrationDeadlineCountsFromTheResume(t *testing.T) {
	for _, tc := range []struct {
		name      string
		catchUpIn time.Duration // 0: the Job controller never acts
	}{{"job-controller-lags", 30 * time.Second}, {"job-controller-never-acts", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			w := steady(t)
			w.update("app:v2", "2", "migrate:hang")
			w.reconcile()
			job := MigrationJobName("rs-a", "2", 1)
			w.queue(job)
			for range 20 {
				w.step(10 * time.Second) // 200 s suspended, past the 120 s deadline had it run
			}
			resumed := w.now
			w.resumeLagging(job)
			deadline := resumed.Add(120*time.Second + migrationGrace)
			for w.now.Before(deadline.Add(-time.Second)) {
				if tc.catchUpIn > 0 && w.now.Equal(resumed.Add(tc.catchUpIn)) {
					w.catchUp(job, resumed)
				}
				plan := w.step(time.Second)
				for _, a := range plan.Actions {
					if a.Kind == SuspendJob {
						t.Fatalf("%s after the resume: %v", w.now.Sub(resumed), a)
					}
				}
				if r := w.schemaReason(); r != routingv1alpha1.ReasonMigrating {
					t.Fatalf("%s after the resume: SchemaReady %s: %s", w.now.Sub(resumed), r, w.condition(routingv1alpha1.ConditionSchemaReady).Message)
				}
			}
			w.run(30, func() bool { return w.stalledWith(routingv1alpha1.ReasonMigrationDeadline) })
			if w.now.After(deadline.Add(5 * time.Second)) {
				t.Fatalf("the deadline passed at %s after the resume, want %s", w.now.Sub(resumed), deadline.Sub(resumed))
			}
		})
	}
	t.Run("succeeds-after-the-resume", func(t *testing.T) {
		w := steady(t)
		w.update("app:v2", "2", "migrate:hang")
		w.reconcile()
		job := MigrationJobName("rs-a", "2", 1)
		w.queue(job)
		for range 20 {
			w.step(10 * time.Second)
		}
		w.resumeLagging(job)
		for range 60 {
			w.step(time.Second)
		}
		// It completes while its Suspended condition still says True (the Job controller never
		// wrote the resume): the time schemagate recorded says when it was resumed.
		w.confirmed = "2"
		suspended := w.jobs[job].Status.Conditions
		w.finishJob(job, false, w.now, "migrate", gateReport(t, "2", false, w.now))
		w.jobs[job].Status.Conditions = append(suspended, w.jobs[job].Status.Conditions...)
		w.step(time.Second)
		if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Reason != routingv1alpha1.ReasonSchemaConfirmed {
			t.Fatalf("a success 60 s after the resume: SchemaReady %s: %s", c.Reason, c.Message)
		}
	})
}

// S-36: a migration that waits (its DDL queued behind another session's lock: to the planner a
// Job that stays active) says how long it has run and when the deadline ends it, refreshed in
// steps that keep status writes few (10 s in the first minute, then minutes); the deadline
// ends it; a retry starts attempt 2 only once attempt 1's pods are gone (tickChecked fails the
// test if two run at once).
func TestMigratingSaysHowLongItRuns(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	job := MigrationJobName("rs-a", "2", 1)
	created := w.jobs[job].CreationTimestamp.Time
	deadline := created.Add(120*time.Second + migrationGrace).UTC().Format(time.RFC3339)
	messages := map[string]bool{}
	for i := 0; i < 47; i++ { // 47 s, in steps of 1 s
		plan := w.step(time.Second)
		if plan.RequeueAfter == 0 || plan.RequeueAfter > 10*time.Second {
			t.Fatalf("at %s: requeue after %s; want the message refreshed within 10 s", w.now.Sub(created), plan.RequeueAfter)
		}
		messages[w.condition(routingv1alpha1.ConditionSchemaReady).Message] = true
	}
	w.reconcile()
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if c.Reason != routingv1alpha1.ReasonMigrating || !strings.Contains(c.Message, "attempt 1 has been running for 40 s") ||
		!strings.Contains(c.Message, "deadline ends it at "+deadline) || !strings.Contains(c.Message, "lock") {
		t.Fatalf("SchemaReady %s %q; want attempt 1 running for 40 s, the deadline %s, and a hint at locks", c.Reason, c.Message, deadline)
	}
	if len(messages) > 6 {
		t.Errorf("%d different messages in 47 s: %v (each one a status write)", len(messages), messages)
	}
	for i := 0; i < 30; i++ { // to 77 s: minutes now
		w.step(time.Second)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); !strings.Contains(c.Message, "running for 1 min") {
		t.Fatalf("SchemaReady %q at 77 s; want running for 1 min", c.Message)
	}
	for i := 0; i < 60; i++ {
		w.step(time.Second)
	}
	if r := w.reason(routingv1alpha1.ConditionStalled); r != routingv1alpha1.ReasonMigrationDeadline {
		t.Fatalf("Stalled %s after the deadline; want %s", r, routingv1alpha1.ReasonMigrationDeadline)
	}
	// A retry while attempt 1's pod still waits: it is suspended first, attempt 2 starts once
	// it has no pod left.
	w.rsvc.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "after-the-lock"}
	w.jobs[job].Spec.Template.Spec.Containers[0].Image = "migrate:hang" // the Job keeps its pods
	plan := w.reconcile()
	if !hasAction(plan, SuspendJob, job) || w.jobs[MigrationJobName("rs-a", "2", 2)] != nil {
		t.Fatalf("retry while attempt 1 runs: %v; want attempt 1 suspended and no attempt 2 yet", plan.Actions)
	}
	w.tickChecked(time.Second) // the Job controller stops the suspended Job's pods
	w.step(time.Second)
	if w.jobs[MigrationJobName("rs-a", "2", 2)] == nil {
		t.Fatalf("attempt 2 did not start once attempt 1's pods were gone; log:\n%s", strings.Join(w.log, "\n"))
	}
}

// hasAction reports whether plan has an action of kind on the Job named job.
func hasAction(plan Plan, kind ActionKind, job string) bool {
	for _, a := range plan.Actions {
		if a.Kind == kind && a.Job != nil && a.Job.Name == job {
			return true
		}
	}
	return false
}
