//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// evict asks the API server's eviction subresource to evict pod, as `kubectl drain` does, and
// returns the HTTP status code and the error it answered with.
func evict(ctx context.Context, cs kubernetes.Interface, ns, pod string) (int, error) {
	code := 0
	err := cs.PolicyV1().RESTClient().Post().AbsPath("/api/v1/namespaces", ns, "pods", pod, "eviction").
		Body(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}).
		Do(ctx).StatusCode(&code).Error()
	return code, err
}

// readyPods lists shard's routing pods that are Ready and not being deleted.
func readyPods(t *testing.T, ns, shard string) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	for _, p := range pods(t, ns, rollout.ComponentRouting) {
		if p.Labels[rollout.LabelShard] != shard {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out = append(out, p)
			}
		}
	}
	return out
}

// The per-shard budgets against the real eviction API and disruption controller: in a shard of 3
// with the default budget (1), a drain's first eviction succeeds (201) and its second is refused
// (429, the disruption budget's message), while a pod of another shard can be evicted at the same
// time: a drain across regions takes at most each shard's budget.
func TestPDBLimitsEvictionsPerShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Now()
	ns := steadyV1(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The disruption controller has computed each shard's budget: 3 healthy, 1 disruption allowed.
	for _, shard := range []string{"us-east", "eu-west"} {
		name := rollout.DisruptionBudgetName("rs-a", shard)
		story.Eventually(t, 30*time.Second, name+" computed", func() error {
			var pdb policyv1.PodDisruptionBudget
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pdb); err != nil {
				return err
			}
			st := pdb.Status
			if st.ObservedGeneration != pdb.Generation || st.CurrentHealthy != 3 || st.ExpectedPods != 3 || st.DisruptionsAllowed != 1 {
				return fmt.Errorf("status %+v (generation %d)", st, pdb.Generation)
			}
			return nil
		})
	}
	east, west := readyPods(t, ns, "us-east"), readyPods(t, ns, "eu-west")
	if len(east) != 3 || len(west) != 3 {
		t.Fatalf("ready pods: us-east %d, eu-west %d, want 3 each", len(east), len(west))
	}

	// From here the test removes pods itself, as a drain would; I2 is about what schemagate does.
	checker.ExemptI2(ns, "the test evicts routing pods itself (a drain), within each shard's budget")
	code, err := evict(ctx, cs, ns, east[0].Name)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("first eviction in us-east: %d %v, want 201", code, err)
	}
	code, err = evict(ctx, cs, ns, east[1].Name)
	if code != http.StatusTooManyRequests || err == nil || !strings.Contains(err.Error(), "Cannot evict pod as it would violate the pod's disruption budget") {
		t.Fatalf("second eviction in us-east: %d %v, want 429 naming the disruption budget", code, err)
	}
	code, err = evict(ctx, cs, ns, west[0].Name)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("eviction in eu-west beside us-east's: %d %v, want 201", code, err)
	}
	// The evicted pods are replaced (the ReplicaSet controller) and the shards are whole again.
	story.Eventually(t, 30*time.Second, "shards whole again", kit().ServingIs(t, ns, story.AllV1))
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the test took %s, more than its 60 s", d.Round(time.Second))
	}
	t.Logf("evictions checked in %s", time.Since(start).Round(100*time.Millisecond))
}
