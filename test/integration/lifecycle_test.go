package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// The API server refuses a compatibility range that does not contain spec.schema.version, and a
// contract version that is not above it and inside the range; each message names the field.
// Versions compare as numbers ("9" < "10"); a shape CEL cannot compare passes to the manager.
func TestSchemaRangeValidation(t *testing.T) {
	ns := kit.NewNamespace(t)
	contract := func(v string) *routingv1alpha1.ContractSpec {
		return &routingv1alpha1.ContractSpec{Version: v, Migration: story.Fixture(ns).Spec.Schema.Migration}
	}
	for i, tc := range []struct {
		version  string
		min, max string
		contract string
		want     string // "" accepted
	}{
		{"2", "3", "", "", "spec.schema.compatibility.min"},
		{"10", "", "9", "", "spec.schema.compatibility.max"},
		{"2.1", "2.10", "", "", "spec.schema.compatibility.min"},
		{"2", "", "", "2", "spec.schema.contract.version must be above"},
		{"2", "1", "2", "3", "spec.schema.contract.version must be inside"},
		{"10", "9", "10", "", ""},
		{"2", "1", "3", "3", ""},
		{"1.2.3.4.5", "1.2.3.4.6", "", "", ""}, // five segments: the manager decides
	} {
		r := story.Fixture(ns)
		r.Name = fmt.Sprintf("rs-range-%d", i)
		r.Spec.Schema.Version = tc.version
		if tc.min != "" || tc.max != "" {
			r.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: tc.min, Max: tc.max}
		}
		if tc.contract != "" {
			r.Spec.Schema.Contract = contract(tc.contract)
		}
		err := k8s.Create(context.Background(), r)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("version %s range [%s, %s] contract %q: refused: %v", tc.version, tc.min, tc.max, tc.contract, err)
		case tc.want != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("version %s range [%s, %s] contract %q: got %v, want Invalid naming %q", tc.version, tc.min, tc.max, tc.contract, err, tc.want)
		}
	}
}

// The expand gate from the cluster alone: v1 declares it runs on schema 1 only; a migration to 2
// is refused before its Job exists (IncompatibleRevision, naming v1, its range and its shards),
// RollbackSafe is present from the start, each ReplicaSet records its range, and a wiped status
// comes back with the same refusal (the ranges are read from the ReplicaSets).
func TestExpandRefusedStory(t *testing.T) {
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	r := story.Fixture(ns)
	r.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: "1"}
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "RollbackSafe=True", kit.HasCondition(t, ns, routingv1alpha1.ConditionRollbackSafe, metav1.ConditionTrue, routingv1alpha1.ReasonRollbackAvailable))
	v1 := kit.Get(t, ns).Status.StableRevision
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Annotations["schemagate.io/schema-min"] != "1" || rs.Annotations["schemagate.io/schema-max"] != "1" || rs.Annotations["schemagate.io/schema-range-assumed"] != "" {
			t.Fatalf("ReplicaSet %s records its range as %v", rs.Name, rs.Annotations)
		}
	}

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Schema.Compatibility = nil
	})
	refused := func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonIncompatibleRevision)(); err != nil {
			return err
		}
		c := meta.FindStatusCondition(kit.Get(t, ns).Status.Conditions, routingv1alpha1.ConditionStalled)
		if want := "revision " + v1 + " (runs on [1, 1]) serves us-east, eu-west, ap-south"; !strings.Contains(c.Message, want) {
			return fmt.Errorf("Stalled message %q does not say %q", c.Message, want)
		}
		return nil
	}
	story.Eventually(t, 20*time.Second, "the migration to 2 refused", refused)
	noJob := func() error {
		for _, j := range kit.Jobs(t, ns) {
			if j.Name == rollout.MigrationJobName("rs-a", "2", 1) {
				return fmt.Errorf("migration Job %s exists", j.Name)
			}
		}
		if got := kit.Serving(t, ns); got != story.AllV1 {
			return fmt.Errorf("serving %q", got)
		}
		return nil
	}
	story.Consistently(t, 3*time.Second, "no migration Job, v1 serving", noJob)
	if revs := kit.Get(t, ns).Status.Schema.Revisions; len(revs) != 1 || revs[0].Revision != v1 || revs[0].Max != "1" || len(revs[0].Shards) != 3 {
		t.Fatalf("status.schema.revisions %+v", revs)
	}

	rsvc := kit.Get(t, ns)
	rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
	if err := k8s.Status().Update(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{"example.com/restored": "yes"}
	})
	story.Eventually(t, 20*time.Second, "the refusal after a wiped status", refused)
	story.Consistently(t, 3*time.Second, "still no migration Job", noJob)
	story.Eventually(t, 10*time.Second, "RollbackSafe present again", kit.HasCondition(t, ns, routingv1alpha1.ConditionRollbackSafe, metav1.ConditionTrue, ""))
}

// Binary-first from the cluster alone: v1 runs on schema 1 only, v2 on [1, 2]. Every shard rolls
// to v2 on schema 1; the migration Job to 2 is created only once no v1 pod is asked for, and then
// RollbackSafe says a rollback to v1 would be refused.
func TestBinaryFirstStory(t *testing.T) {
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	r := story.Fixture(ns)
	r.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: "1"}
	if err := k8s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "1", Max: "2"}
	})
	const v2 = "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"
	deadline := time.Now().Add(90 * time.Second)
	for {
		jobs, rss := kit.Jobs(t, ns), kit.ReplicaSets(t, ns)
		for _, j := range jobs {
			if j.Name != rollout.MigrationJobName("rs-a", "2", 1) {
				continue
			}
			// The Job exists: every v1 ReplicaSet asked for no pod when it was created, and
			// none has been scaled up since.
			for _, rs := range rss {
				if rs.Spec.Template.Spec.Containers[0].Image == "app:v1" && *rs.Spec.Replicas > 0 {
					t.Fatalf("migration Job %s exists while %s (v1) asks for %d pods", j.Name, rs.Name, *rs.Spec.Replicas)
				}
			}
		}
		rsvc := kit.Get(t, ns)
		if rsvc.Status.Schema.ConfirmedVersion == "2" && kit.Serving(t, ns) == v2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("binary-first did not end: serving %q, status.schema %+v, conditions %+v, events %v", kit.Serving(t, ns), rsvc.Status.Schema, rsvc.Status.Conditions, kit.EventsFor(t, ns))
		}
		time.Sleep(200 * time.Millisecond)
	}
	story.Eventually(t, 20*time.Second, "RollbackSafe=False", kit.HasCondition(t, ns, routingv1alpha1.ConditionRollbackSafe, metav1.ConditionFalse, routingv1alpha1.ReasonRollbackUnsafe))
}

// Kubernetes refuses ephemeral containers in every pod template, so no ReplicaSet or Job could be
// made from a RoutingService template that has one: the API server refuses the RoutingService
// itself, naming the field (the CRD's schema, hack/crdtrim).
func TestEphemeralContainersAreRefused(t *testing.T) {
	ns := kit.NewNamespace(t)
	debug := []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	for _, tc := range []struct {
		field string
		set   func(*routingv1alpha1.RoutingService)
	}{
		{"spec.template.spec.ephemeralContainers", func(r *routingv1alpha1.RoutingService) { r.Spec.Template.Spec.EphemeralContainers = debug }},
		{"spec.schema.migration.template.spec.ephemeralContainers", func(r *routingv1alpha1.RoutingService) {
			r.Spec.Schema.Migration.Template.Spec.EphemeralContainers = debug
		}},
	} {
		r := story.Fixture(ns)
		r.Name = "rs-ephemeral"
		tc.set(r)
		err := k8s.Create(context.Background(), r)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "must have at most 0 items") {
			t.Errorf("%s set: got %v, want Invalid naming the field", tc.field, err)
		}
	}
	if err := k8s.Create(context.Background(), story.Fixture(ns)); err != nil {
		t.Fatalf("the fixture without them: %v", err)
	}
}
