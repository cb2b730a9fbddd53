package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// A platform engineer creates rs-a and then updates it to v2 with schema 2: the migration runs
// first, v2 pods (whose readiness needs schema 2, S-02) start only after it, one shard at a time.
func TestStoryCreateThenUpdateMigratesFirstAndPromotesShardByShard(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	initial := story.Fixture(ns)
	if err := k8s.Create(context.Background(), initial); err != nil {
		t.Fatal(err)
	}
	capture(t, "no-status", initial)
	// The first reconcile says it is working on this generation (S-13).
	story.Eventually(t, 10*time.Second, "Reconciling=True", kit.HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, ""))
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v1 everywhere", kit.ServingIs(t, ns, story.AllV1))
	rsvc := kit.Get(t, ns)
	if rsvc.Status.Schema.ConfirmedVersion != "1" || rsvc.Status.PromotedShards != "3/3" || rsvc.Status.StableRevision == "" {
		t.Fatalf("status after the first rollout: %+v", rsvc.Status)
	}

	capture(t, "healthy", kit.Get(t, ns))
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:ok"))
	capture(t, "stale-generation", kit.Get(t, ns))
	story.Eventually(t, 10*time.Second, "SchemaReady for schema 2", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed))
	story.Eventually(t, 30*time.Second, "a shard promoting", kit.HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonShardProgressing))
	capture(t, "progressing", kit.Get(t, ns))
	kit.WaitReady(t, ns, 90*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))

	// The template's own metadata reaches the pods (the CRD keeps embedded ObjectMeta).
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Spec.Template.Labels["app"] != "rs-a" || rs.Spec.Template.Annotations["example.com/owner"] != "edge" {
			t.Fatalf("%s lost the template's labels or annotations: %v %v", rs.Name, rs.Spec.Template.Labels, rs.Spec.Template.Annotations)
		}
	}

	// Shards were promoted in order: each shard's v2 ReplicaSet was created after the previous
	// shard's had all its pods.
	created := map[string]time.Time{}
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
			created[rs.Labels[rollout.LabelShard]] = rs.CreationTimestamp.Time
		}
	}
	if !(created["us-east"].Before(created["eu-west"]) || created["us-east"].Equal(created["eu-west"])) ||
		created["eu-west"].After(created["ap-south"]) {
		t.Fatalf("v2 ReplicaSets created out of order: %v", created)
	}
	rsvc = kit.Get(t, ns)
	if rsvc.Status.StableRevision != rsvc.Status.UpdateRevision {
		t.Fatalf("stableRevision %s, updateRevision %s", rsvc.Status.StableRevision, rsvc.Status.UpdateRevision)
	}
	for _, reason := range []string{"MigrationStarted", routingv1alpha1.ReasonSchemaConfirmed, "ShardStarted", "ShardPromoted", routingv1alpha1.ReasonRolloutComplete} {
		if !slices.Contains(kit.EventsFor(t, ns), reason) {
			t.Errorf("no %s Event; got %v", reason, kit.EventsFor(t, ns))
		}
	}

	// I4: once steady, reconciles write nothing.
	before := kit.Get(t, ns).ResourceVersion
	story.Consistently(t, 3*time.Second, "I4: a steady RoutingService is not written", func() error {
		if after := kit.Get(t, ns).ResourceVersion; after != before {
			return fmt.Errorf("written again: resourceVersion %s → %s", before, after)
		}
		return nil
	})
}

// S-01: the migration keeps running, then fails until its backoff limit.
func TestStoryS01MigrationRunningThenFailing(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	story.Eventually(t, 10*time.Second, "SchemaReady=False Migrating", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating))
	capture(t, "migrating", kit.Get(t, ns))
	story.Consistently(t, 3*time.Second, "while migrating, no v2 pod anywhere", func() error {
		if strings.Contains(kit.Serving(t, ns), "app:v2") {
			return fmt.Errorf("v2 before its schema: %s", kit.Serving(t, ns))
		}
		return kit.HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonMigrating)()
	})

	finishJob(t, ns, "2", false)
	story.Eventually(t, 10*time.Second, "SchemaReady=False MigrationFailed", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrationFailed))
	story.Eventually(t, 5*time.Second, "Stalled=True", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonMigrationFailed))
	capture(t, "migration-failed", kit.Get(t, ns))
	story.Consistently(t, 2*time.Second, "v1 keeps serving everywhere at full size", kit.ServingIs(t, ns, story.AllV1))
	if n := len(kit.Jobs(t, ns)); n != 2 {
		t.Fatalf("a failed migration is not retried: %d Jobs, want 2 (schema 1 and 2)", n)
	}
}

// S-03: stale records claim schema 2 while its migration never succeeded.
func TestStoryS03StaleEvidenceIsNotTrusted(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ctx := context.Background()

	// An old status field claims schema 2 …
	rsvc := kit.Get(t, ns)
	rsvc.Status.Schema.ConfirmedVersion = "2"
	if err := k8s.Status().Update(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	// … so does an annotation, and a succeeded Job for schema 2 with rs-a's labels and even its
	// deterministic name for attempt 5, owned by another RoutingService.
	other := story.Fixture(ns)
	other.Name = "rs-b"
	other.Spec.Paused = true
	if err := k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	forged := rollout.NewMigrationJob(kit.Get(t, ns), "2", 5)
	forged.OwnerReferences[0].Name, forged.OwnerReferences[0].UID = other.Name, other.UID
	if err := k8s.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	// The fake cluster may be writing the new Job too (a conflict under load): finish it on a
	// fresh read, as finishAttempt does.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(forged), forged); err != nil {
			return err
		}
		return fake.finish(ctx, forged, true)
	}); err != nil {
		t.Fatal(err)
	}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:manual")(r)
		r.Annotations = map[string]string{"schemagate.io/schema-confirmed": "2"}
	})
	story.Eventually(t, 10*time.Second, "SchemaReady=False Migrating", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating))
	story.Consistently(t, 3*time.Second, "v2 never starts on schema 1", func() error {
		if strings.Contains(kit.Serving(t, ns), "app:v2") {
			return fmt.Errorf("v2 before its schema: %s", kit.Serving(t, ns))
		}
		if v := kit.Get(t, ns).Status.Schema.ConfirmedVersion; v != "1" {
			return fmt.Errorf("confirmedVersion %q, want 1", v)
		}
		return nil
	})
	// rs-b is paused: it reports its state but changes nothing.
	story.Eventually(t, 10*time.Second, "rs-b observed", func() error {
		b := &routingv1alpha1.RoutingService{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-b"}, b); err != nil {
			return err
		}
		if b.Status.ObservedGeneration != b.Generation {
			return fmt.Errorf("rs-b not observed yet")
		}
		capture(t, "paused", b)
		return nil
	})
	// Its own migration then succeeds, and v2 rolls out.
	finishJob(t, ns, "2", true)
	kit.WaitReady(t, ns, 60*time.Second)
}

// S-07: schema already in place; the new image cannot start in the first shard.
func TestStoryS07BadImageInFirstShard(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Template.Spec.Containers[0].Image = "app:broken" })
	story.Eventually(t, 30*time.Second, "Stalled=True ProgressDeadlineExceeded", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded))
	story.Eventually(t, 10*time.Second, "us-east back to full v1", kit.ServingIs(t, ns, story.AllV1))
	capture(t, "progress-deadline-exceeded", kit.Get(t, ns))
	for _, rs := range kit.ReplicaSets(t, ns) {
		shard := rs.Labels[rollout.LabelShard]
		if rs.Spec.Template.Spec.Containers[0].Image == "app:broken" && shard != "us-east" {
			t.Fatalf("shard %s was touched: %s", shard, rs.Name)
		}
		if rs.Spec.Template.Spec.Containers[0].Image == "app:broken" && *rs.Spec.Replicas != 0 {
			t.Fatalf("%s not scaled to 0", rs.Name)
		}
	}
	rsvc := kit.Get(t, ns)
	if rsvc.Status.Failure == nil || rsvc.Status.Failure.Shard != "us-east" {
		t.Fatalf("status.failure %+v", rsvc.Status.Failure)
	}
	// A following spec change is accepted without manual cleanup.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Template.Spec.Containers[0].Image = "app:v3" })
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v3 everywhere", kit.ServingIs(t, ns, "us-east=app:v3:3/3 eu-west=app:v3:3/3 ap-south=app:v3:3/3"))
	if kit.Get(t, ns).Status.Failure != nil {
		t.Fatal("a stale failure is left in status")
	}
}

// S-08: us-east promoted fine; v2 pods crash in eu-west. With failurePolicy Rollback (the
// default) every shard v2 touched goes back to v1, stable scaled up before v2 down; with Halt
// everything stays where it is.
func TestStoryS08RollbackNeverRemovesTheOnlyHealthyPods(t *testing.T) {
	t.Parallel()
	for _, policy := range []routingv1alpha1.FailurePolicy{routingv1alpha1.FailurePolicyRollback, routingv1alpha1.FailurePolicyHalt} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			ns := steadyV1(t)
			kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				story.ToV2("app:v2-broken-in-eu-west", "migrate:ok")(r)
				r.Spec.Strategy.FailurePolicy = policy
			})
			story.Eventually(t, 60*time.Second, "Stalled=True", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded))
			if f := kit.Get(t, ns).Status.Failure; f == nil || f.Shard != "eu-west" {
				t.Fatalf("status.failure %+v", f)
			}
			switch policy {
			case routingv1alpha1.FailurePolicyRollback:
				story.Eventually(t, 20*time.Second, "every shard back on v1", kit.ServingIs(t, ns, story.AllV1))
			case routingv1alpha1.FailurePolicyHalt:
				want := "us-east=app:v2-broken-in-eu-west:3/3 eu-west=app:v1:3/3 eu-west=app:v2-broken-in-eu-west:1/0 ap-south=app:v1:3/3"
				story.Consistently(t, 3*time.Second, "Halt leaves everything as it was", kit.ServingIs(t, ns, want))
			}
			if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("Available = %+v", c)
			}
		})
	}
}

// S-09: all shards steady on v1; the user aborts. Nothing changes; Ready stays True.
func TestStoryS09AbortWithNothingInProgress(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	versions := map[string]string{}
	for _, rs := range kit.ReplicaSets(t, ns) {
		versions[rs.Name] = fmt.Sprint(*rs.Spec.Replicas)
	}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationAbort: "2026-11-30T12:00:00Z"}
	})
	story.Eventually(t, 10*time.Second, "abort recorded", func() error {
		if got := kit.Get(t, ns).Status.LastHandledAbort; got != "2026-11-30T12:00:00Z" {
			return fmt.Errorf("lastHandledAbort %q", got)
		}
		return nil
	})
	story.Consistently(t, 2*time.Second, "Ready stays True", kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete))
	for _, rs := range kit.ReplicaSets(t, ns) {
		if versions[rs.Name] != fmt.Sprint(*rs.Spec.Replicas) {
			t.Fatalf("%s replicas changed: %s → %d", rs.Name, versions[rs.Name], *rs.Spec.Replicas)
		}
	}
	if !slices.Contains(kit.EventsFor(t, ns), "AbortIgnored") {
		t.Fatalf("no AbortIgnored Event: %v", kit.EventsFor(t, ns))
	}
	if kit.Get(t, ns).Status.Failure != nil {
		t.Fatal("abort with nothing in progress recorded a failure")
	}
}
