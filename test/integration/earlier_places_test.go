package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// A shard's earlier place holds the contract, through the API server: eu-west runs v1 in a spoke,
// then one edit moves it back to the hub, rolls v2 (schema 2) and asks for a contract to 3 with
// no rollback window. The spoke keeps serving v1 until the RoutingService has been Ready for
// 10 s and retires it; the contract, which would break v1 there, waits for that (ContractReady
// OlderPodsRemain names the place), and runs once the spoke has nothing of eu-west left.
func TestStoryContractWaitsForAShardsEarlierPlace(t *testing.T) {
	t.Parallel()
	ns, spokeNS, _ := steadyWithEUInASpoke(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Shards[1].Cluster = nil
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Schema.Contract = &routingv1alpha1.ContractSpec{Version: "3", RollbackWindowSeconds: ptr.To(int32(0)),
			Migration: routingv1alpha1.MigrationSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "contract", Image: "contract:ok"}}}}}}
	})
	waited := false
	story.Eventually(t, 120*time.Second, "the contract complete, after the spoke was cleaned up", func() error {
		// The Jobs first: a ReplicaSet still in the spoke after a Job was seen was there when
		// the Job was created (read the other way round, a cleanup and a Job between the two
		// reads would look like a Job beside the ReplicaSet).
		jobs := kit.Jobs(t, ns)
		left := 0
		for _, rs := range spokeReplicaSets(t, spokeNS) {
			if rs.DeletionTimestamp == nil {
				left++
			}
		}
		for _, j := range jobs {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentContract && left > 0 {
				t.Fatalf("contract Job %s exists while the spoke still runs %d eu-west ReplicaSets", j.Name, left)
			}
		}
		c := meta.FindStatusCondition(kit.Get(t, ns).Status.Conditions, routingv1alpha1.ConditionContractReady)
		if c != nil && c.Reason == routingv1alpha1.ReasonOlderPodsRemain && strings.Contains(c.Message, "shard eu-west's earlier place in cluster eu still runs revision") {
			waited = true
		}
		if c == nil || c.Reason != routingv1alpha1.ReasonContractComplete {
			return fmt.Errorf("ContractReady %+v; %d eu-west ReplicaSets in the spoke", c, left)
		}
		return nil
	})
	if !waited {
		t.Fatal("ContractReady never said the contract waits for eu-west's earlier place")
	}
	if got := fake.schema(ns); got != "3" {
		t.Fatalf("database at %s after the contract, want 3", got)
	}
}

// A shard's earlier place holds a binary-first migration, through the API server, and the two do
// not wait on each other: eu-west runs v1 (schema 1 only) in a spoke; one edit moves it back to the
// hub and rolls v2, which runs on [1, 2] (binary first). Every shard rolls v2 on schema 1 while
// the spoke still serves v1; the migration to 2 would break v1 there, so it waits (SchemaReady
// names the place) until every shard has been promoted for a while and the spoke is cleaned up;
// then it runs, and the rollout completes.
func TestStoryBinaryFirstWaitsForAShardsEarlierPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS := kit.NewNamespace(t), kit.NewNamespace(t)
	fake.setDatabase(spokeNS, "1", false) // one database for both clusters
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu-kubeconfig"},
		Data: map[string][]byte{"value": spokeKubeconfig(t)}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rsvc := story.Fixture(ns)
	rsvc.Spec.Shards[1].Cluster = &routingv1alpha1.ShardCluster{Name: "eu", Namespace: spokeNS}
	rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: "1"}
	if err := k8s.Create(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Shards[1].Cluster = nil
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "1", Max: "2"}
	})
	waited := false
	const v2 = "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"
	story.Eventually(t, 120*time.Second, "the migration done after the spoke was cleaned up, v2 everywhere", func() error {
		jobs := kit.Jobs(t, ns) // first, as above
		left := 0
		for _, rs := range spokeReplicaSets(t, spokeNS) {
			if rs.DeletionTimestamp == nil && *rs.Spec.Replicas > 0 {
				left++
			}
		}
		for _, j := range jobs {
			if j.Name == rollout.MigrationJobName("rs-a", "2", 1) && left > 0 {
				t.Fatalf("migration Job %s exists while the spoke still runs %d eu-west ReplicaSets of v1", j.Name, left)
			}
		}
		r := kit.Get(t, ns)
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionSchemaReady)
		if c != nil && strings.Contains(c.Message, "eu-west (its earlier place in cluster eu)") {
			waited = true
		}
		if r.Status.Schema.ConfirmedVersion != "2" || kit.Serving(t, ns) != v2 || !meta.IsStatusConditionTrue(r.Status.Conditions, routingv1alpha1.ConditionReady) {
			return fmt.Errorf("serving %q, schema %+v, SchemaReady %+v; %d eu-west ReplicaSets of v1 in the spoke", kit.Serving(t, ns), r.Status.Schema.ConfirmedVersion, c, left)
		}
		return nil
	})
	if !waited {
		t.Fatal("SchemaReady never said the migration waits for eu-west's earlier place")
	}
}
