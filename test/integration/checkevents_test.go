package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// Shard-check Jobs and Events against the real API server: one Event per fact, every Event
// within the API's limits, and a check Job's name held by another object.

// eventsWith lists the Events the API server keeps for rs-a with reason.
func eventsWith(t *testing.T, ns, reason string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == "rs-a" && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func jobCheck(name, image string) routingv1alpha1.ShardCheck {
	return routingv1alpha1.ShardCheck{Name: name, Job: &routingv1alpha1.JobCheck{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "verify", Image: image}}}}}}
}

// Two checks pass in one reconcile: the API server has one ShardCheckPassed Event for each, with
// its own note. To make them pass in one reconcile for sure, both Jobs finish while spec.paused
// holds the rollout, and the next reconcile after unpausing reads both. Before, every Event had
// the action "Reconcile", and client-go's recorder folded the second Event of the reconcile (same
// regarding object, reason and action) into the first one's series, dropping its note.
func TestStoryOneEventPerFact(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		// "manual": the fake Job controller leaves them running until the test finishes them.
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{jobCheck("smoke", "verify:manual"), jobCheck("latency", "verify:manual")}
	})
	var checks []batchv1.Job
	story.Eventually(t, 30*time.Second, "two check Jobs in us-east", func() error {
		checks = nil
		for _, j := range kit.Jobs(t, ns) {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentShardCheck && j.Labels[rollout.LabelShard] == "us-east" {
				checks = append(checks, j)
			}
		}
		if len(checks) != 2 {
			return fmt.Errorf("%d check Jobs", len(checks))
		}
		return nil
	})
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Paused = true })
	story.Eventually(t, 10*time.Second, "Paused", kit.HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonPaused))
	for i := range checks {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			j := &batchv1.Job{}
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&checks[i]), j); err != nil {
				return err
			}
			return fake.finish(context.Background(), j, true)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the manager's cache has both Jobs finished
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Paused = false })
	story.Eventually(t, 20*time.Second, "one ShardCheckPassed Event per check", func() error {
		notes := map[string]bool{}
		for _, e := range eventsWith(t, ns, rollout.EventShardCheckPassed) {
			notes[e.Note] = true
		}
		for _, check := range []string{"smoke", "latency"} {
			found := false
			for note := range notes {
				found = found || strings.Contains(note, fmt.Sprintf("check %s passed in shard us-east ", check))
			}
			if !found {
				return fmt.Errorf("no ShardCheckPassed Event for check %s in us-east; notes %v", check, notes)
			}
		}
		return nil
	})
}

// A migration that fails with a 4 KiB termination message (the kubelet keeps up to 4096 bytes):
// the MigrationFailed Event quoting it is recorded, cut to the API's 1024 bytes on a rune
// boundary, keeping the start and the end of the error. Before, the API server refused the
// Event and the Warning that matters was lost.
func TestStoryLongMigrationFailureFitsAnEvent(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	name := rollout.MigrationJobName("rs-a", "2", 1)
	j := &batchv1.Job{}
	story.Eventually(t, 20*time.Second, "the migration Job", func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j)
	})
	message := "ERROR: migration 0002 failed: " + strings.Repeat("ü", 1990) + " (SQLSTATE 42P07) relation already exists"
	if len(message) > 4096 {
		t.Fatalf("message of %d bytes: more than the kubelet keeps", len(message))
	}
	if err := fake.leavePod(context.Background(), j, false, message); err != nil {
		t.Fatal(err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		now := metav1.Now()
		if j.Status.StartTime == nil {
			// Once set (the fake kubelet may have set it), startTime is immutable.
			j.Status.StartTime = &now
		}
		j.Status.Active, j.Status.Failed = 0, ptr.Deref(j.Spec.BackoffLimit, 6)+1
		j.Status.Conditions = append(j.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit", LastProbeTime: now, LastTransitionTime: now})
		return k8s.Status().Update(context.Background(), j)
	})
	if err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 20*time.Second, "Stalled MigrationFailed", hasStall(t, ns, routingv1alpha1.ReasonMigrationFailed, "SQLSTATE 42P07"))
	story.Eventually(t, 10*time.Second, "a MigrationFailed Event", func() error {
		events := eventsWith(t, ns, routingv1alpha1.ReasonMigrationFailed)
		if len(events) != 1 {
			return fmt.Errorf("%d MigrationFailed Events", len(events))
		}
		note := events[0].Note
		if len(note) > 1024 || !utf8.ValidString(note) || !strings.Contains(note, name) ||
			!strings.Contains(note, "relation already exists") || !strings.HasSuffix(note, "does not start") {
			return fmt.Errorf("note of %d bytes (valid UTF-8 %v): %q", len(note), utf8.ValidString(note), note)
		}
		return nil
	})
}

// A Job of another owner holds the name of us-east's first check Job: Stalled, NameConflict
// naming it, nothing rolled back, the revision not failed; once it is deleted the check runs and
// the rollout completes.
func TestStoryCheckJobNameTaken(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	spec := kit.Get(t, ns).Spec.DeepCopy()
	spec.Template.Spec.Containers[0].Image = "app:v2"
	name := rollout.ShardCheckJobName("rs-a", "us-east", "smoke", rollout.Revision(spec), routingv1alpha1.CheckWhenBake, 1)
	// A plain Job without schemagate's labels, as another team's tooling would create.
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "x", Image: "other:v1"}}}}}}
	if err := k8s.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{jobCheck("smoke", "verify:ok")}
	})
	story.Eventually(t, 30*time.Second, "Stalled NameConflict", hasStall(t, ns, routingv1alpha1.ReasonNameConflict, ns+"/"+name))
	story.Consistently(t, 5*time.Second, "nothing rolled back", func() error {
		rsvc := kit.Get(t, ns)
		if rsvc.Status.Failure != nil {
			return fmt.Errorf("failure %+v", rsvc.Status.Failure)
		}
		return kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v1:3/3 ap-south=app:v1:3/3")()
	})
	if len(eventsWith(t, ns, routingv1alpha1.ReasonNameConflict)) == 0 || len(eventsWith(t, ns, routingv1alpha1.ReasonShardCheckFailed)) != 0 {
		t.Fatal("want a NameConflict Event and no ShardCheckFailed")
	}
	if err := k8s.Delete(context.Background(), foreign, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 90*time.Second)
	checks := 0
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentShardCheck {
			checks++
		}
	}
	if checks != 3 {
		t.Fatalf("%d check Jobs, want one per shard", checks)
	}
}
