package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// A check at PodReady through the controller: v2's ReplicaSets carry the readiness gate, the
// manager asks a new us-east pod (a loopback server standing in for its router, which answers
// 404) and writes the answer into the pod's gate condition; the shard fails with
// ShardCheckFailed naming the pod, and us-east goes back to v1.
func TestStoryPodReadyCheckFailsTheShard(t *testing.T) {
	t.Parallel()
	router := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no route for "+r.Host, http.StatusNotFound)
	}))
	t.Cleanup(router.Close)
	_, port, _ := net.SplitHostPort(router.Listener.Addr().String())
	ns := steadyV1(t)
	ctx := context.Background()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(120))
		r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "resolves", When: []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenPodReady},
			HTTP:        &routingv1alpha1.HTTPCheck{URL: "http://{{podIP}}:" + port + "/", Headers: []routingv1alpha1.HTTPHeader{{Name: "Host", Value: "d03.example"}}},
			Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(1)), TimeoutSeconds: ptr.To(int32(2))}}}
	})
	var v2 *appsv1.ReplicaSet
	story.Eventually(t, 30*time.Second, "us-east gets v2's ReplicaSet, with the gate", func() error {
		for _, rs := range kit.ReplicaSets(t, ns) {
			if rs.Labels[rollout.LabelShard] == "us-east" && rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
				if g := rs.Spec.Template.Spec.ReadinessGates; len(g) != 1 || g[0].ConditionType != routingv1alpha1.PodCheckGate {
					t.Fatalf("v2's template has readiness gates %+v", g)
				}
				v2 = rs.DeepCopy()
				return nil
			}
		}
		return fmt.Errorf("no v2 ReplicaSet in us-east")
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "v2-pod-0", Namespace: ns, Labels: v2.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(v2, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: *v2.Spec.Template.Spec.DeepCopy(),
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// As a kubelet reports it: the containers are ready, the pod is not (its gate is not set).
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", Conditions: []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady", LastTransitionTime: metav1.Now()}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "Stalled=True ShardCheckFailed", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonShardCheckFailed))
	f := kit.Get(t, ns).Status.Failure
	if f == nil || f.Shard != "us-east" || !strings.Contains(f.Message, "pod v2-pod-0") || !strings.Contains(f.Message, "404") {
		t.Fatalf("status.failure %+v", f)
	}
	// The answer is on the pod, written by the manager through pods/status.
	var got corev1.Pod
	story.Eventually(t, 10*time.Second, "the pod's gate says CheckFailed", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got); err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == routingv1alpha1.PodCheckGate {
				if c.Status != corev1.ConditionFalse || c.Reason != "CheckFailed" || !strings.Contains(c.Message, "404") {
					return fmt.Errorf("gate %+v", c)
				}
				return nil
			}
		}
		return fmt.Errorf("no gate condition in %+v", got.Status.Conditions)
	})
	story.Eventually(t, 20*time.Second, "us-east back to full v1", kit.ServingIs(t, ns, story.AllV1))
}
