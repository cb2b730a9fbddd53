//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// r7Limit is the routers' memory limit in R-7, enforced by the node agent as a kubelet's cgroup
// would be (an OOM kill, exit code 137).
const r7Limit = "96Mi"

// R-7 memory under load: v2 keeps 2 MiB per routed request (--memory-per-request), so under the
// replay's 20 requests per second per region its pods pass their 96 MiB limit within seconds and
// the node agent OOM-kills them; each comes back Ready after its restart, so a readiness probe
// alone sees little. With the pod-health gate (the default, no check written) the first OOM kill
// fails us-east (PodOOMKilled, naming the pod and the container), only the shards v2 touched go
// back to v1, and ap-south never runs v2. With podHealth Off the table shows what the gate saved.
//
// Not parallel with the other tests, nor its two runs with each other: v2's pods allocate and touch 20 MiB/s each until they are
// killed, and under the Off run every region does; on 2 cores that page-faulting slowed the
// routers of the replays running beside it past their traffic's 1 s timeout.
func TestIncidentR7MemoryUnderLoad(t *testing.T) {
	realStack(t)
	for _, c := range []struct {
		name string
		off  bool
	}{{"pod-health gate", false}, {"podHealth Off", true}} {
		t.Run(c.name, func(t *testing.T) { // one after the other: the Off run loads the machine
			ns := realNamespace(t)
			checker.ExemptI2(ns, "R-7: v2's pods are OOM-killed under load by design; schemagate's own steps are checked by the planner tests")
			db := database(t, pg, "r7_"+map[bool]string{false: "gate", true: "off"}[c.off], 0)
			ctx := context.Background()
			rs := realRoutingService(ns, db)
			rs.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(r7Limit)}
			if c.off {
				rs.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{Mode: routingv1alpha1.PodHealthOff}
			}
			if err := k8s.Create(ctx, rs); err != nil {
				t.Fatal(err)
			}
			kit().WaitReady(t, ns, 3*time.Minute)
			services := regionPods(rsvcSelector)
			waitServed(t, ns, services)
			gen := startTraffic(ns, services)
			time.Sleep(3 * time.Second) // measured: traffic before the change, for the table
			began := time.Now()
			kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				r.Spec.Template.Spec.Containers[0].Image = routerImage + ":v2"
				r.Spec.Template.Spec.Containers[0].Args = append(r.Spec.Template.Spec.Containers[0].Args[:0:0],
					"serve", "--schema=1", "--revision=v2", "--refresh=500ms", "--memory-per-request=2097152")
			})
			var took time.Duration
			if c.off {
				// Without the gate: what happens in the first 40 s.
				time.Sleep(40 * time.Second)
				took = time.Since(began)
			} else {
				story.Eventually(t, 2*time.Minute, "Stalled PodOOMKilled, rolled back to v1", func() error {
					c2 := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled)
					if c2 == nil || c2.Status != metav1.ConditionTrue || c2.Reason != routingv1alpha1.ReasonPodOOMKilled {
						return fmt.Errorf("Stalled %+v", c2)
					}
					return kit().ServingIs(t, ns, realV1)()
				})
				took = time.Since(began)
				f := kit().Get(t, ns).Status.Failure
				if f == nil || f.Shard != "us-east" || !strings.Contains(f.Message, "container router") || !strings.Contains(f.Message, "OOMKilled, exit code 137") {
					t.Fatalf("status.failure %+v", f)
				}
			}
			time.Sleep(3 * time.Second) // measured: traffic after the change, for the table
			rep := gen.Stop()
			table(t, "R-7 memory under load ("+c.name+")", rep)
			r := kit().Get(t, ns)
			t.Logf("R-7 %s: %s after the update: promoted %s, failure %s; lost requests (errors) per region: us-east %d, eu-west %d, ap-south %d",
				c.name, took.Round(time.Second), r.Status.PromotedShards, failureReason(r), rep.Totals["us-east"].Errors(), rep.Totals["eu-west"].Errors(), rep.Totals["ap-south"].Errors())
			if !c.off {
				if tot := rep.Totals["ap-south"]; tot.Revisions["v2"] > 0 || tot.Errors() > 0 || tot.NotFound > 0 {
					t.Errorf("ap-south was touched by the bad revision: %+v", tot)
				}
				if n := ptr.Deref(kit().Get(t, ns).Status.Failure, routingv1alpha1.RolloutFailure{}).Shard; n != "us-east" {
					t.Errorf("failed in %q, want us-east", n)
				}
			}
		})
	}
}

// failureReason is status.failure's reason, or "none".
func failureReason(r *routingv1alpha1.RoutingService) string {
	if r.Status.Failure == nil {
		return "none"
	}
	return r.Status.Failure.Reason
}
