package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
		left := 0
		for _, rs := range spokeReplicaSets(t, spokeNS) {
			if rs.DeletionTimestamp == nil {
				left++
			}
		}
		for _, j := range kit.Jobs(t, ns) {
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
