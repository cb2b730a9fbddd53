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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// Issue 10 stories: the gate reads the schema report of the pods of the Jobs schemagate owns. The
// fake cluster's migrations and checks write reports of its fake database (fakecluster_test.go).

// noV2ReplicaSet fails if any ReplicaSet of a revision needing schema 2 exists in ns.
func noV2ReplicaSet(t *testing.T, ns string) func() error {
	return func() error {
		for _, rs := range kit.ReplicaSets(t, ns) {
			if rollout.RequiredSchema(&rs) == "2" {
				return fmt.Errorf("ReplicaSet %s of schema 2 exists (replicas %d)", rs.Name, ptr.Deref(rs.Spec.Replicas, 1))
			}
		}
		return nil
	}
}

func hasStall(t *testing.T, ns, reason, text string) func() error {
	return func() error {
		c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || !strings.Contains(c.Message, text) {
			return fmt.Errorf("Stalled = %+v", c)
		}
		return nil
	}
}

// The default: the migration's report says schema 2, the gate opens, and status.schema says what
// the report said and which Job confirmed it.
func TestStoryReportOpensTheGate(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	if got := kit.Get(t, ns).Spec.Schema.Evidence; got != routingv1alpha1.SchemaEvidenceReport {
		t.Fatalf("spec.schema.evidence defaults to %q, want Report", got)
	}
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:ok"))
	kit.WaitReady(t, ns, 60*time.Second)
	st := kit.Get(t, ns).Status.Schema
	if st.ConfirmedVersion != "2" || st.ConfirmedBy != rollout.MigrationJobName("rs-a", "2", 1) || st.ReportedVersion != "2" || st.ReportedBy != st.ConfirmedBy+" (fake)" {
		t.Fatalf("status.schema = %+v", st)
	}
}

// S-24: the migration Job is Complete, but its report says the database is still at schema 1.
// SchemaMismatch, Stalled, and no ReplicaSet of v2 is ever created.
func TestStoryS24CompleteJobWithLowerVersion(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:noop"))
	story.Eventually(t, 15*time.Second, "SchemaMismatch", hasStall(t, ns, routingv1alpha1.ReasonSchemaMismatch, "says the database is at version 1, below the required 2"))
	story.Eventually(t, 5*time.Second, "SchemaReady=False SchemaMismatch", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonSchemaMismatch))
	story.Consistently(t, 3*time.Second, "no v2 ReplicaSet, v1 serving", func() error {
		if err := noV2ReplicaSet(t, ns)(); err != nil {
			return err
		}
		return kit.ServingIs(t, ns, story.AllV1)()
	})
	if n := migrationJobs(t, ns)["2"]; n != 1 {
		t.Fatalf("%d migration Jobs for schema 2: a mismatch must not retry by itself", n)
	}
}

// A dirty database: SchemaDirty, Stalled, no retry loop, not even after the migration template is
// fixed in Git; once a person has cleaned the database, a retry runs attempt 2 and v2 goes out.
func TestStoryDirtyDatabaseThenFixedAndRetried(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:dirty"))
	story.Eventually(t, 15*time.Second, "SchemaDirty", hasStall(t, ns, routingv1alpha1.ReasonSchemaDirty, "dirty"))
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
	})
	// The status for the new generation first, then it must stay so.
	story.Eventually(t, 10*time.Second, "SchemaDirty for the new generation", hasStall(t, ns, routingv1alpha1.ReasonSchemaDirty, "dirty"))
	story.Consistently(t, 3*time.Second, "one migration Job, still SchemaDirty", func() error {
		if n := migrationJobs(t, ns)["2"]; n != 1 {
			return fmt.Errorf("%d migration Jobs for schema 2", n)
		}
		if err := noV2ReplicaSet(t, ns)(); err != nil {
			return err
		}
		return hasStall(t, ns, routingv1alpha1.ReasonSchemaDirty, "dirty")()
	})
	fake.setDatabase(ns, "1", false) // a person forced the version back and cleared the flag
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "fixed-by-hand"}
	})
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	if n := migrationJobs(t, ns)["2"]; n != 2 {
		t.Fatalf("%d migration Jobs for schema 2, want 2 (attempt 2 after the retry)", n)
	}
}

// Reports that cannot be read: not a report, over 4096 bytes, none at all. Each is
// InvalidSchemaReport with the cause, and never an open gate.
func TestStoryInvalidReports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ image, want string }{
		{"migrate:garbage", "not a JSON object"},
		{"migrate:huge", "more than the 4096 the kubelet keeps"},
		{"migrate:silent", "the termination message is empty"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			t.Parallel()
			ns := steadyV1(t)
			kit.Update(t, ns, story.ToV2("app:v2", tc.image))
			story.Eventually(t, 15*time.Second, "InvalidSchemaReport", hasStall(t, ns, routingv1alpha1.ReasonInvalidSchemaReport, tc.want))
			story.Consistently(t, 2*time.Second, "no v2 ReplicaSet", noV2ReplicaSet(t, ns))
		})
	}
}

// withCheck adds spec.schema.check to rs-a.
func withCheck(t *testing.T, ns string) {
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Schema.Check = &routingv1alpha1.SchemaCheckSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "check", Image: "check:ok"}}}}}
	})
}

func deleteJob(t *testing.T, ns, name string) {
	t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
}

func checkJobs(t *testing.T, ns string) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentCheck {
			out = append(out, j)
		}
	}
	return out
}

// replicaSnapshot is every ReplicaSet's spec.replicas.
func replicaSnapshot(t *testing.T, ns string) string {
	var out []string
	for _, rs := range kit.ReplicaSets(t, ns) {
		out = append(out, fmt.Sprintf("%s=%d", rs.Name, ptr.Deref(rs.Spec.Replicas, 1)))
	}
	return strings.Join(out, ",")
}

// S-23 in steady state, with spec.schema.check: the migration Job that confirmed schema 1 is
// deleted (a ttlSecondsAfterFinished, a person). One check Job asks the database; the migration
// does not run again; Ready never flips (same transition time); nothing is scaled; the check's
// report confirms schema 1.
func TestStoryS23EvidenceDeletedInSteadyState(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	withCheck(t, ns)
	kit.WaitReady(t, ns, 10*time.Second)
	ready := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionReady)
	replicas := replicaSnapshot(t, ns)
	deleteJob(t, ns, rollout.MigrationJobName("rs-a", "1", 1))
	check := rollout.CheckJobName("rs-a", "1", 1)
	story.Eventually(t, 20*time.Second, "the check confirms schema 1", func() error {
		steadyConditions(t, ns, ready, replicas)
		st := kit.Get(t, ns).Status.Schema
		if st.ConfirmedBy != check || st.ConfirmedVersion != "1" {
			return fmt.Errorf("status.schema = %+v", st)
		}
		return nil
	})
	story.Consistently(t, 2*time.Second, "steady after the check", func() error {
		steadyConditions(t, ns, ready, replicas)
		if n := len(checkJobs(t, ns)); n != 1 {
			return fmt.Errorf("%d check Jobs", n)
		}
		return nil
	})
	if events := strings.Join(kit.EventsFor(t, ns), "\n"); !strings.Contains(events, rollout.EventSchemaEvidenceLost) || !strings.Contains(events, rollout.EventCheckStarted) {
		t.Fatalf("events:\n%s", events)
	}
}

// steadyConditions fails the test at once if Ready moved from ready (status or transition time),
// a migration Job was created, or a ReplicaSet was scaled.
func steadyConditions(t *testing.T, ns string, ready *metav1.Condition, replicas string) {
	t.Helper()
	rsvc := kit.Get(t, ns)
	if c := story.Condition(rsvc, routingv1alpha1.ConditionReady); c == nil || c.Status != ready.Status || !c.LastTransitionTime.Equal(&ready.LastTransitionTime) {
		t.Fatalf("Ready flipped: %+v (was %+v)", c, ready)
	}
	if c := story.Condition(rsvc, routingv1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Stalled = %+v", c)
	}
	if n := len(migrationJobs(t, ns)); n != 0 {
		t.Fatalf("a migration Job was created: %v", migrationJobs(t, ns))
	}
	if got := replicaSnapshot(t, ns); got != replicas {
		t.Fatalf("ReplicaSets scaled: %s → %s", replicas, got)
	}
}

// S-23 without spec.schema.check: nothing runs, nothing flips, a Warning Event says what to do.
func TestStoryS23EvidenceDeletedWithoutCheck(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ready := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionReady)
	replicas := replicaSnapshot(t, ns)
	deleteJob(t, ns, rollout.MigrationJobName("rs-a", "1", 1))
	story.Eventually(t, 10*time.Second, "a SchemaEvidenceLost Event", func() error {
		if events := strings.Join(kit.EventsFor(t, ns), "\n"); !strings.Contains(events, rollout.EventSchemaEvidenceLost) {
			return fmt.Errorf("events:\n%s", events)
		}
		return nil
	})
	story.Consistently(t, 3*time.Second, "steady", func() error {
		steadyConditions(t, ns, ready, replicas)
		if n := len(kit.Jobs(t, ns)); n != 0 {
			return fmt.Errorf("%d Jobs", n)
		}
		return nil
	})
	if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionSchemaReady); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "spec.schema.check is not set") {
		t.Fatalf("SchemaReady = %+v", c)
	}
}

// S-23 mid-rollout: the schema-2 Job is deleted once us-east is promoted. The check runs, the
// migration does not run again, and the rollout finishes.
func TestStoryS23EvidenceDeletedMidRollout(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	withCheck(t, ns)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(3))
	})
	story.Eventually(t, 30*time.Second, "us-east promoted", func() error {
		if p := kit.Get(t, ns).Status.PromotedShards; p != "1/3" {
			return fmt.Errorf("promotedShards %s", p)
		}
		return nil
	})
	deleteJob(t, ns, rollout.MigrationJobName("rs-a", "2", 1))
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	if n := migrationJobs(t, ns)["2"]; n != 0 {
		t.Fatalf("the schema-2 migration ran again (%d Jobs)", n)
	}
	if n := len(checkJobs(t, ns)); n != 1 {
		t.Fatalf("%d check Jobs, want 1", n)
	}
	if st := kit.Get(t, ns).Status.Schema; st.ConfirmedBy != rollout.CheckJobName("rs-a", "2", 1) {
		t.Fatalf("status.schema = %+v", st)
	}
}

// check.beforeEachShard: eu-west and ap-south each start only after a check Job of their own
// confirmed schema 2. (A database that goes behind mid-rollout is TestCheckBeforeEachShardFinds…
// in pkg/rollout: here the fake routers' readiness follows the fake database, so us-east would
// go unavailable too.)
func TestStoryCheckBeforeEachShard(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	withCheck(t, ns)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Schema.Check.BeforeEachShard = true
		story.ToV2("app:v2", "migrate:ok")(r)
	})
	kit.WaitReady(t, ns, 60*time.Second)
	if n := len(checkJobs(t, ns)); n != 2 {
		t.Fatalf("%d check Jobs, want 2 (before eu-west and before ap-south)", n)
	}

	for _, j := range checkJobs(t, ns) {
		if shard := j.Annotations["schemagate.io/before-shard"]; !strings.HasPrefix(shard, "eu-west/") && !strings.HasPrefix(shard, "ap-south/") {
			t.Fatalf("check Job %s is for %q", j.Name, shard)
		}
	}
}

// Issue 11, the job provider: a check that fails in us-east during its bake fails the shard at
// once (the bake is 300 s and the progress deadline 6 s do not matter), rolls us-east back,
// names the check, and eu-west and ap-south never run v2; a dryRun check that fails is only
// reported.
func TestStoryShardCheckFailsTheShardAtOnce(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	check := func(name, image string, dryRun bool) routingv1alpha1.ShardCheck {
		return routingv1alpha1.ShardCheck{Name: name, DryRun: dryRun, Job: &routingv1alpha1.JobCheck{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "verify", Image: image}}}}}}
	}
	began := time.Now()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{check("404-ratio", "verify:fail-in-us-east", false), check("latency", "verify:fail", true)}
	})
	story.Eventually(t, 30*time.Second, "Stalled ShardCheckFailed", hasStall(t, ns, routingv1alpha1.ReasonShardCheckFailed, "check 404-ratio failed in shard us-east"))
	story.Eventually(t, 20*time.Second, "us-east back on v1", kit.ServingIs(t, ns, story.AllV1))
	if d := time.Since(began); d > 40*time.Second {
		t.Fatalf("the failed check took %s", d)
	}
	st := kit.Get(t, ns).Status.Shards[0]
	phases := map[string]routingv1alpha1.CheckPhase{}
	for _, c := range st.Checks {
		phases[c.Name] = c.Phase
	}
	if phases["404-ratio"] != routingv1alpha1.CheckPhaseFailed || phases["latency"] != routingv1alpha1.CheckPhaseFailed {
		t.Fatalf("us-east checks %+v", st.Checks)
	}
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentShardCheck && j.Labels[rollout.LabelShard] != "us-east" {
			t.Fatalf("shard %s was checked: %s", j.Labels[rollout.LabelShard], j.Name)
		}
	}
}

// An attempt stalled as SchemaDirty or SchemaMismatch is deleted (a TTL, a policy): the reason it
// had stays, saying the Job was deleted, nothing runs again by itself, and a retry runs attempt 2.
func TestStoryDeletedAttemptKeepsItsReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ image, reason, says string }{
		{"migrate:dirty", routingv1alpha1.ReasonSchemaDirty, "dirty"},
		{"migrate:noop", routingv1alpha1.ReasonSchemaMismatch, "below schema 2"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			t.Parallel()
			ns := steadyV1(t)
			kit.Update(t, ns, story.ToV2("app:v2", tc.image))
			story.Eventually(t, 15*time.Second, tc.reason, hasStall(t, ns, tc.reason, ""))
			deleteJob(t, ns, rollout.MigrationJobName("rs-a", "2", 1))
			story.Eventually(t, 10*time.Second, tc.reason+" after the deletion", hasStall(t, ns, tc.reason, "has been deleted"))
			story.Consistently(t, 3*time.Second, "still "+tc.reason+", nothing run again", func() error {
				if n := migrationJobs(t, ns)["2"]; n != 0 {
					return fmt.Errorf("%d migration Jobs for schema 2", n)
				}
				if err := noV2ReplicaSet(t, ns)(); err != nil {
					return err
				}
				return hasStall(t, ns, tc.reason, tc.says)()
			})
			fake.setDatabase(ns, "1", false)
			kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
				r.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "after-the-deletion"}
			})
			kit.WaitReady(t, ns, 60*time.Second)
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rollout.MigrationJobName("rs-a", "2", 2)}, &batchv1.Job{}); err != nil {
				t.Fatalf("the retry must run attempt 2: %v", err)
			}
		})
	}
}
