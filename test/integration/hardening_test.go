package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// migrationJobs counts rs-a's migration Jobs in ns by schema-version label.
func migrationJobs(t *testing.T, ns string) map[string]int {
	out := map[string]int{}
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration {
			out[j.Labels[rollout.LabelSchemaVersion]]++
		}
	}
	return out
}

// S-15: while the schema-2 migration runs, re-spelling the version as "2.0" or asking for schema
// 3 starts no second migration; schema 3's starts when schema 2's has ended.
func TestStoryS15NeverTwoMigrationsAtOnce(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:manual"))
	story.Eventually(t, 10*time.Second, "Migrating", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating))

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Schema.Version = "2.0" })
	story.Consistently(t, 2*time.Second, "one Job for 2 and 2.0", func() error {
		if got := migrationJobs(t, ns); len(got) != 2 || got["2"] != 1 {
			return fmt.Errorf("migration Jobs by version: %v", got)
		}
		return nil
	})

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v3"
		r.Spec.Schema.Version = "3"
		r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
	})
	story.Eventually(t, 10*time.Second, "schema 3 waits", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration))
	story.Consistently(t, 2*time.Second, "no schema-3 Job while schema 2's runs", func() error {
		if got := migrationJobs(t, ns); got["3"] != 0 {
			return fmt.Errorf("migration Jobs by version: %v", got)
		}
		return nil
	})
	finishJob(t, ns, "2", true)
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v3 everywhere", kit.ServingIs(t, ns, "us-east=app:v3:3/3 eu-west=app:v3:3/3 ap-south=app:v3:3/3"))
	if got := migrationJobs(t, ns); got["3"] != 1 {
		t.Fatalf("want exactly one schema-3 Job: %v", got)
	}
}

// S-21: a plain Job (no labels, no owner) holds the name of the schema-2 migration Job. It is
// never evidence and never a create loop: Stalled=True NameConflict naming it, the status written
// once, no MigrationStarted Events; deleting it lets the migration start.
func TestStoryS21NameTakenByAPlainJob(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ctx := context.Background()
	name := rollout.MigrationJobName("rs-a", "2", 1)
	plain := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}},
	}
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := fake.finish(ctx, plain, true); err != nil {
		t.Fatal(err)
	}
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:ok"))
	story.Eventually(t, 10*time.Second, "Stalled=True NameConflict", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonNameConflict))
	if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, name) {
		t.Fatalf("the condition does not name the Job: %s", c.Message)
	}
	rv := kit.Get(t, ns).ResourceVersion
	story.Consistently(t, 3*time.Second, "no loop", func() error {
		if got := kit.Get(t, ns).ResourceVersion; got != rv {
			return fmt.Errorf("the RoutingService was written again (%s → %s)", rv, got)
		}
		if got := kit.Serving(t, ns); got != story.AllV1 {
			return fmt.Errorf("v2 started: %s", got)
		}
		return nil
	})
	for _, e := range kit.EventsFor(t, ns) {
		if e == rollout.EventMigrationStarted {
			// The schema-1 migration of the fixture is the only one that started.
			if n := countOf(kit.EventsFor(t, ns), e); n > 1 {
				t.Fatalf("%d MigrationStarted Events over a taken name", n)
			}
		}
	}
	if err := k8s.Delete(ctx, plain, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	// A plain Job is in no watch of schemagate's: it looks again within 15 s.
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
}

func countOf(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}

// S-22 (a): the sample manifest and the same object read back from the API server (which applies
// the CRD's defaults, none of them inside the template) have the same revision, and it is the one
// schemagate reports.
func TestStoryS22RevisionDoesNotDependOnServerDefaults(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	raw, err := os.ReadFile(filepath.Join(rootDir, "config/samples/routing_v1alpha1_routingservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sample := &routingv1alpha1.RoutingService{}
	if err := yaml.UnmarshalStrict(raw, sample); err != nil {
		t.Fatal(err)
	}
	// The sample declares a port without a protocol, which earlier CRDs defaulted on the server.
	if len(sample.Spec.Template.Spec.Containers[0].Ports) == 0 || sample.Spec.Template.Spec.Containers[0].Ports[0].Protocol != "" {
		t.Fatalf("the sample must declare a containerPort without a protocol for this test")
	}
	local := rollout.Revision(&sample.Spec)
	sample.Namespace = ns
	if err := k8s.Create(context.Background(), sample); err != nil {
		t.Fatal(err)
	}
	stored := &routingv1alpha1.RoutingService{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sample), stored); err != nil {
		t.Fatal(err)
	}
	// The CRD declares no default inside the template (a GitOps diff would see it as drift):
	// the template is stored as written, and pods get the protocol where they are created.
	if p := stored.Spec.Template.Spec.Containers[0].Ports[0].Protocol; p != "" {
		t.Fatalf("the API server filled in the protocol %q inside the template", p)
	}
	if got := rollout.Revision(&stored.Spec); got != local {
		t.Fatalf("revision of the manifest %s, of the stored object %s", local, got)
	}
	story.Eventually(t, 10*time.Second, "status.updateRevision", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sample), stored); err != nil {
			return err
		}
		if stored.Status.UpdateRevision != local {
			return fmt.Errorf("updateRevision %q, want %q", stored.Status.UpdateRevision, local)
		}
		return nil
	})
}
