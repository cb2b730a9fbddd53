package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// S-04 then S-05: the migration cannot start (its pod is stuck pulling its image) and the Job never
// fails by itself; schemagate's own deadline ends it, naming the cause. Then the user retries.
func TestStoryS04MigrationThatCannotStartThenRetry(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ctx := context.Background()
	stable := kit.Get(t, ns).Status.StableRevision
	began := time.Now()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:manual")(r)
		r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(2))
	})
	// The Job's pod, as the Job controller creates it (controlled by the Job) and the kubelet
	// reports it, stuck pulling.
	job := &batchv1.Job{}
	story.Eventually(t, 10*time.Second, "the migration Job", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rollout.MigrationJobName("rs-a", "2", 1)}, job)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x7k2p", Namespace: ns, Labels: job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "migrate", Image: "migrate:manual",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "migrate:manual"`}},
	}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 10*time.Second, "Migrating names the cause", func() error {
		c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionSchemaReady)
		if c == nil || c.Reason != routingv1alpha1.ReasonMigrating || !strings.Contains(c.Message, "ImagePullBackOff") {
			return fmt.Errorf("SchemaReady = %+v", c)
		}
		return nil
	})
	story.Eventually(t, 30*time.Second, "SchemaReady=False MigrationDeadlineExceeded", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrationDeadline))
	story.Eventually(t, 5*time.Second, "Stalled=True", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonMigrationDeadline))
	if d := time.Since(began); d > 25*time.Second {
		t.Fatalf("I3: the stuck migration took %s to end (deadline 2 s + 10 s grace)", d)
	}
	if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "ImagePullBackOff") {
		t.Fatalf("Stalled does not name the cause: %s", c.Message)
	}
	if got := kit.Serving(t, ns); got != story.AllV1 {
		t.Fatalf("no v2 ReplicaSet may run: %s", got)
	}

	// S-05: the user retries. A new Job (attempt 2) runs; the first is kept for its logs; there is
	// no "already exists"; v1 is the stable revision until v2 is promoted.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "1"}
		r.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(600))
	})
	story.Eventually(t, 10*time.Second, "attempt 2 runs", func() error {
		if s := kit.Get(t, ns).Status.Schema; s.Attempt != 2 {
			return fmt.Errorf("schema status %+v", s)
		}
		return nil
	})
	for _, j := range kit.Jobs(t, ns) {
		if j.Name == rollout.MigrationJobName("rs-a", "2", 1) && !ptr.Deref(j.Spec.Suspend, false) {
			t.Fatal("attempt 2 started while attempt 1, past its deadline, was not suspended")
		}
	}
	if !slices.Contains(kit.EventsFor(t, ns), rollout.EventMigrationSuspended) {
		t.Fatalf("no MigrationSuspended Event: %v", kit.EventsFor(t, ns))
	}
	finishAttempt(t, ns, "2", 2, true)
	story.Eventually(t, 60*time.Second, "v2 rolls out", func() error {
		rsvc := kit.Get(t, ns)
		if rsvc.Status.StableRevision != stable && rsvc.Status.StableRevision != rsvc.Status.UpdateRevision {
			return fmt.Errorf("stableRevision %s is neither v1 nor v2", rsvc.Status.StableRevision)
		}
		return kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)()
	})
	names := map[string]bool{}
	for _, j := range kit.Jobs(t, ns) {
		names[j.Name] = true
	}
	if len(names) != 3 || !names[rollout.MigrationJobName("rs-a", "2", 1)] || !names[rollout.MigrationJobName("rs-a", "2", 2)] {
		t.Fatalf("Jobs %v: want schema 1, and schema 2 attempts 1 (kept) and 2", names)
	}
}

// S-06: the migration exits non-zero after partly applying (a dirty schema). No automatic retry,
// no down-migration: Stalled with a clear message, v1 serving; a later retry works.
func TestStoryS06DirtySchema(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	story.Eventually(t, 10*time.Second, "migrating", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating))
	finishJob(t, ns, "2", false)
	story.Eventually(t, 10*time.Second, "Stalled=True MigrationFailed", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonMigrationFailed))
	c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled)
	if !strings.Contains(c.Message, "not retried automatically") || !strings.Contains(c.Message, routingv1alpha1.AnnotationRetry) {
		t.Fatalf("the message should say what happened and how to retry: %s", c.Message)
	}
	story.Consistently(t, 3*time.Second, "no retry loop, v1 serving", func() error {
		if n := len(kit.Jobs(t, ns)); n != 2 {
			return fmt.Errorf("%d Jobs", n)
		}
		return kit.ServingIs(t, ns, story.AllV1)()
	})
	// The operator repairs the database by hand, then retries.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "after-manual-fix"}
	})
	story.Eventually(t, 10*time.Second, "attempt 2", func() error {
		if a := kit.Get(t, ns).Status.Schema.Attempt; a != 2 {
			return fmt.Errorf("attempt %d", a)
		}
		return nil
	})
	finishAttempt(t, ns, "2", 2, true)
	kit.WaitReady(t, ns, 60*time.Second)
}

// S-11: while the migration completes, another client keeps editing the RoutingService's labels.
// Status writes conflict; schemagate retries them and the rollout goes on without a restart.
func TestStoryS11ConflictsAreRetried(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	story.Eventually(t, 10*time.Second, "migrating", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	edits := 0
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				r := &routingv1alpha1.RoutingService{}
				if err := k8s.Get(context.Background(), kitKey(ns), r); err != nil {
					return err
				}
				if r.Labels == nil {
					r.Labels = map[string]string{}
				}
				r.Labels["example.com/touched"] = fmt.Sprint(i)
				return k8s.Update(context.Background(), r)
			})
			edits++
		}
	}()
	finishJob(t, ns, "2", true)
	story.Eventually(t, 15*time.Second, "SchemaReady=True despite conflicts", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed))
	kit.WaitReady(t, ns, 60*time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d label edits raced the status writes", edits)
}
