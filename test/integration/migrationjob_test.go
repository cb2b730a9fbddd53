package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// Stories of the migration Job itself: a sidecar that never exits, Job-level metadata and a
// queue that suspends the Job, and a deadline whose cause must not get lost. envtest runs no
// kubelet and no Job controller: the test writes pod and Job status as they would.

// migrationJob waits for the migration Job of (version, attempt) and returns it.
func migrationJob(t *testing.T, ns, version string, attempt int32) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	story.Eventually(t, 10*time.Second, "the migration Job", func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rollout.MigrationJobName("rs-a", version, attempt)}, job)
	})
	return job
}

// jobPod creates a pod controlled by job with the given container statuses, as the Job
// controller and the kubelet would.
func jobPod(t *testing.T, job *batchv1.Job, spec corev1.PodSpec, phase corev1.PodPhase, statuses []corev1.ContainerStatus) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-p0d", Namespace: job.Namespace, Labels: job.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}}, Spec: spec}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: statuses}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// failByDeadline fails a Job as the Job controller does at activeDeadlineSeconds, and deletes its
// pod as it does then.
func failByDeadline(t *testing.T, job *batchv1.Job, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		now := metav1.Now()
		if j.Status.StartTime == nil {
			j.Status.StartTime = &now
		}
		j.Status.Active, j.Status.Failed = 0, 1
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline", LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline", LastProbeTime: now, LastTransitionTime: now})
		return k8s.Status().Update(ctx, j)
	})
	if err != nil {
		t.Fatal(err)
	}
	if pod != nil {
		if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
}

// A migration pod with a proxy that never exits: the migration container's clean report opens
// the gate once it has terminated; the report is recorded on the Job; the Job then fails at its
// deadline and its pod is deleted, and the rollout still finishes on the one migration.
func TestStorySidecarKeepsTheMigrationJobRunning(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	job := migrationJob(t, ns, "2", 1)
	fake.setDatabase(ns, "2", false) // the migration container migrated
	spec := *job.Spec.Template.Spec.DeepCopy()
	spec.Containers = append(spec.Containers, corev1.Container{Name: "istio-proxy", Image: "proxy:1"})
	pod := jobPod(t, job, spec, corev1.PodRunning, []corev1.ContainerStatus{
		{Name: "istio-proxy", Image: "proxy:1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}},
		{Name: "migrate", Image: "migrate:manual", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed",
			Message: fake.report(ns), StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}},
	})
	story.Eventually(t, 15*time.Second, "SchemaReady=True", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed))
	story.Eventually(t, 10*time.Second, "the report recorded on the Job", func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		if j.Annotations[rollout.AnnotationSchemaReport] == "" {
			return fmt.Errorf("annotations %v", j.Annotations)
		}
		return nil
	})
	failByDeadline(t, job, pod)
	kit.WaitReady(t, ns, 90*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	if n := migrationJobs(t, ns)["2"]; n != 1 {
		t.Fatalf("%d migration Jobs for schema 2: the migration ran again", n)
	}
	if st := kit.Get(t, ns).Status.Schema; st.ConfirmedBy != job.Name || st.ConfirmedVersion != "2" {
		t.Fatalf("status.schema = %+v", st)
	}
}

// jobMetadata reaches the Job (a queue reads the Job's labels); the API server refuses
// schemagate's own keys. A queue suspends the Job: MigrationSuspended, since when, no deadline;
// released, it runs and the rollout goes on.
func TestStoryJobMetadataAndAQueue(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ctx := context.Background()
	for _, bad := range []routingv1alpha1.JobMetadata{
		{Labels: map[string]string{rollout.LabelManagedBy: "me"}},
		{Labels: map[string]string{rollout.LabelAttempt: "7"}},
		{Annotations: map[string]string{rollout.AnnotationSchemaReport: "{}"}},
	} {
		r := kit.Get(t, ns)
		r.Spec.Schema.Migration.JobMetadata = &bad
		if err := k8s.Update(ctx, r); err == nil || !strings.Contains(err.Error(), "spec.schema.migration.jobMetadata") {
			t.Fatalf("jobMetadata %+v: %v; want a refusal naming the field", bad, err)
		}
	}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:manual")(r)
		r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(5))
		r.Spec.Schema.Migration.JobMetadata = &routingv1alpha1.JobMetadata{Labels: map[string]string{"kueue.x-k8s.io/queue-name": "db"}}
	})
	job := migrationJob(t, ns, "2", 1)
	if job.Labels["kueue.x-k8s.io/queue-name"] != "db" || job.Labels[rollout.LabelManagedBy] != rollout.ManagedByValue {
		t.Fatalf("Job labels %v", job.Labels)
	}
	// The queue suspends it (the fake Job controller then stops its pods and says Suspended).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		j.Spec.Suspend = ptr.To(true)
		return k8s.Update(ctx, j)
	})
	if err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 10*time.Second, "MigrationSuspended with suspendedSince", func() error {
		r := kit.Get(t, ns)
		c := story.Condition(r, routingv1alpha1.ConditionSchemaReady)
		if c == nil || c.Reason != routingv1alpha1.ReasonMigrationSuspended || r.Status.Schema.SuspendedSince == nil || !strings.Contains(c.Message, "suspended since") {
			return fmt.Errorf("SchemaReady %+v, status.schema %+v", c, r.Status.Schema)
		}
		return nil
	})
	// Longer than the 5 s deadline (+10 s): the deadline does not run while suspended.
	story.Consistently(t, 17*time.Second, "no MigrationDeadlineExceeded while suspended", func() error {
		if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionSchemaReady); c == nil || c.Reason == routingv1alpha1.ReasonMigrationDeadline {
			return fmt.Errorf("SchemaReady %+v", c)
		}
		return nil
	})
	story.Eventually(t, 10*time.Second, "Stalled MigrationSuspended", hasStall(t, ns, routingv1alpha1.ReasonMigrationSuspended, "longer than activeDeadlineSeconds"))
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		// The Job controller gives a resumed Job a new status.startTime. The API server lets it
		// change only while the Job is suspended, and the fake Job controller of this suite may
		// have set one before the suspension: set it first, then resume.
		now := metav1.Now()
		j.Status.StartTime = &now
		if err := k8s.Status().Update(ctx, j); err != nil {
			return err
		}
		j.Spec.Suspend = ptr.To(false)
		return k8s.Update(ctx, j)
	})
	if err != nil {
		t.Fatal(err)
	}
	finishJob(t, ns, "2", true)
	kit.WaitReady(t, ns, 90*time.Second)
	if n := migrationJobs(t, ns)["2"]; n != 1 {
		t.Fatalf("%d migration Jobs for schema 2", n)
	}
}

// A mistyped Secret: the pod waits in CreateContainerConfigError; at the deadline the Job
// controller fails the Job (DeadlineExceeded) and deletes the pod; the final condition is
// MigrationDeadlineExceeded and still names the cause.
func TestStoryDeadlineNamesTheCause(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	job := migrationJob(t, ns, "2", 1)
	pod := jobPod(t, job, *job.Spec.Template.Spec.DeepCopy(), corev1.PodPending, []corev1.ContainerStatus{{Name: "migrate", Image: "migrate:manual",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "db-credentialz" not found`}}}})
	story.Eventually(t, 10*time.Second, "status.schema.cause", func() error {
		if st := kit.Get(t, ns).Status.Schema; !strings.Contains(st.Cause, "CreateContainerConfigError") {
			return fmt.Errorf("status.schema = %+v", st)
		}
		return nil
	})
	failByDeadline(t, job, pod)
	story.Eventually(t, 15*time.Second, "Stalled MigrationDeadlineExceeded naming the cause", hasStall(t, ns, routingv1alpha1.ReasonMigrationDeadline, `CreateContainerConfigError: secret "db-credentialz" not found`))
}

// A queue releases a migration Job that was suspended for longer than its deadline, and the Job
// controller has not yet acted on the resume (its Suspended condition still says True, its
// startTime is the one from before the suspension): the deadline counts from the resume, which
// schemagate records on the Job, so the release does not fail the migration at once, and its
// success opens the gate.
func TestStoryResumedMigrationDeadlineCountsFromTheResume(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ctx := context.Background()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:manual")(r)
		r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(5))
	})
	job := migrationJob(t, ns, "2", 1)
	setSuspend := func(v bool) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			j := &batchv1.Job{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
				return err
			}
			j.Spec.Suspend = ptr.To(v)
			return k8s.Update(ctx, j)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	story.Eventually(t, 10*time.Second, "the Job started", func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil || j.Status.StartTime == nil {
			return fmt.Errorf("no startTime yet (%v)", err)
		}
		return nil
	})
	setSuspend(true)
	story.Eventually(t, 10*time.Second, "Stalled MigrationSuspended", hasStall(t, ns, routingv1alpha1.ReasonMigrationSuspended, "longer than activeDeadlineSeconds"))
	// What is measured: the time suspended, past startTime + 5 s + 10 s, so that a deadline
	// counted from the old startTime has passed.
	time.Sleep(12 * time.Second)
	setSuspend(false)
	story.Consistently(t, 8*time.Second, "no MigrationDeadlineExceeded after the resume", func() error {
		if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionSchemaReady); c == nil || c.Reason == routingv1alpha1.ReasonMigrationDeadline {
			return fmt.Errorf("SchemaReady %+v", c)
		}
		return nil
	})
	j := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
		t.Fatal(err)
	}
	if _, ok := j.Annotations["schemagate.io/resumed-at"]; !ok {
		t.Fatalf("the resume is not recorded on the Job: %v", j.Annotations)
	}
	finishJob(t, ns, "2", true)
	kit.WaitReady(t, ns, 90*time.Second)
}
