//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// R-8 empty routes: v2 passes its readiness probe but holds no routes (--lose-every-nth-route=1
// drops every domain it loads). A check at PodReady asks each new router for d03.example before
// the pod counts: the first v2 pod in us-east answers 404, us-east fails (ShardCheckFailed, naming
// the pod) and goes back to v1 without a v1 pod ever leaving (maxUnavailable 0, and no v2 pod is
// ever Ready), so no region answers a single 404. Without the check, v2 is Ready by its probe and
// reaches every region: each answers 404s. The two runs go one after the other.
func TestIncidentR8EmptyRoutesPerPodCheck(t *testing.T) {
	realStack(t)
	for _, withCheck := range []bool{true, false} {
		name := map[bool]string{true: "check at PodReady", false: "no check"}[withCheck]
		t.Run(name, func(t *testing.T) { r8Run(t, withCheck) })
	}
}

// r8Run rolls the empty-route v2 out under traffic, with or without the check at PodReady.
func r8Run(t *testing.T, withCheck bool) {
	ns := realNamespace(t)
	db := database(t, pg, map[bool]string{true: "r8_check", false: "r8_none"}[withCheck], 1)
	ctx := context.Background()
	rs := realRoutingService(ns, db)
	if withCheck {
		rs.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "resolves", When: []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenPodReady},
			HTTP:        &routingv1alpha1.HTTPCheck{URL: fmt.Sprintf("http://{{podIP}}:%d/", routerPort), Headers: []routingv1alpha1.HTTPHeader{{Name: "Host", Value: "d03.example"}}},
			Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(1)), TimeoutSeconds: ptr.To(int32(2))}}}
	}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	routing := client.MatchingLabels{rollout.LabelName: "rs-a", rollout.LabelComponent: rollout.ComponentRouting}
	if withCheck {
		// v1's pods passed the check too: each carries the gate, True.
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(ns), routing); err != nil {
			t.Fatal(err)
		}
		for i := range pods.Items {
			if g := gateOf(&pods.Items[i]); g == nil || g.Status != corev1.ConditionTrue || g.Reason != "CheckPassed" {
				t.Fatalf("v1 pod %s: gate %+v", pods.Items[i].Name, g)
			}
		}
	}
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	time.Sleep(3 * time.Second) // measured: traffic before the change, for the table
	began := time.Now()
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{routerContainer("v2", 1, db, "--lose-every-nth-route=1")}
	})
	// A v1 pod of us-east leaving would show as fewer than 2 v1 pods there.
	var fewest int32 = 2
	story.Eventually(t, 4*time.Minute, "the rollout ends", func() error {
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), routing); err == nil {
			v1 := int32(0)
			for i := range list.Items {
				if p := &list.Items[i]; p.Labels[rollout.LabelShard] == "us-east" && strings.HasSuffix(p.Spec.Containers[0].Image, ":v1") && p.DeletionTimestamp == nil {
					v1++
				}
			}
			fewest = min(fewest, v1)
		}
		r := kit().Get(t, ns)
		if !withCheck {
			if c := story.Condition(r, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != r.Generation {
				return fmt.Errorf("Ready %+v", c)
			}
			return nil
		}
		c := story.Condition(r, routingv1alpha1.ConditionStalled)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != routingv1alpha1.ReasonShardCheckFailed {
			return fmt.Errorf("Stalled %+v", c)
		}
		return kit().ServingIs(t, ns, realV1)()
	})
	took := time.Since(began)
	time.Sleep(3 * time.Second) // measured: traffic after the change, for the table
	rep := gen.Stop()
	table(t, "R-8 empty routes ("+map[bool]string{true: "check at PodReady", false: "no check"}[withCheck]+")", rep)
	t.Logf("R-8 %v: the rollout ended %s after the update; fewest v1 pods in us-east %d; 404s: us-east %d, eu-west %d, ap-south %d",
		map[bool]string{true: "with the check", false: "without a check"}[withCheck], took.Round(time.Second), fewest,
		rep.Totals["us-east"].NotFound, rep.Totals["eu-west"].NotFound, rep.Totals["ap-south"].NotFound)
	if !withCheck {
		for _, region := range []string{"us-east", "eu-west", "ap-south"} {
			if rep.Totals[region].NotFound == 0 {
				t.Errorf("the replay did not reproduce the incident in %s: %+v", region, rep.Totals[region])
			}
		}
		return
	}
	f := kit().Get(t, ns).Status.Failure
	if f == nil || f.Shard != "us-east" || !strings.Contains(f.Message, "pod rs-a-us-east-") || !strings.Contains(f.Message, "404") {
		t.Fatalf("status.failure %+v", f)
	}
	if fewest < 2 {
		t.Errorf("a v1 pod of us-east left before the check failed (fewest %d)", fewest)
	}
	for _, region := range []string{"us-east", "eu-west", "ap-south"} {
		if tot := rep.Totals[region]; tot.NotFound > 0 || tot.Revisions["v2"] > 0 {
			t.Errorf("%s: %d × 404, %d answers from v2", region, tot.NotFound, tot.Revisions["v2"])
		}
	}
}

// gateOf is the pod's condition of the check at PodReady, or nil.
func gateOf(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == routingv1alpha1.PodCheckGate {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
