//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// S-24 replayed on real controllers (issue 10): the schema-2 migration pod exits 0 with a
// termination message saying the database is at version 1 (kwok writes it from
// SCHEMAGATE_FAKE_REPORTED_VERSION). The real Job controller marks the Job Complete; the gate stays
// shut with SchemaMismatch, no v2 ReplicaSet is created, and v1 keeps serving. Before issue 10
// this promoted v2 in every shard.
func TestS24MigrationThatExits0WithoutMigrating(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:v2")(r)
		c := &r.Spec.Schema.Migration.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "SCHEMAGATE_FAKE_REPORTED_VERSION", Value: "1"})
	})
	story.Eventually(t, 60*time.Second, "Stalled=True SchemaMismatch", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonSchemaMismatch))
	c := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionSchemaReady)
	if c.Status != metav1.ConditionFalse || c.Reason != routingv1alpha1.ReasonSchemaMismatch || !strings.Contains(c.Message, "(kwok) says the database is at version 1") {
		t.Fatalf("SchemaReady = %+v", c)
	}
	story.Consistently(t, 5*time.Second, "no v2 ReplicaSet; v1 serving", func() error {
		for _, rs := range kit().ReplicaSets(t, ns) {
			if rollout.RequiredSchema(&rs) == "2" {
				return fmt.Errorf("ReplicaSet %s of schema 2 exists", rs.Name)
			}
		}
		return kit().ServingIs(t, ns, story.AllV1)()
	})
}
