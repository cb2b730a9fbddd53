package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// The pod-health gate through the controller: the routing pods reach the planner from the
// manager's cache. v2 bakes in us-east (a long bake); one of its pods, as a kubelet would report
// it, was OOM-killed: the shard fails with PodOOMKilled naming the pod and the container, us-east
// goes back to v1, and eu-west and ap-south are never touched.
func TestStoryPodOOMKilledFailsTheShard(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	ctx := context.Background()
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(120))
	})
	var v2 *appsv1.ReplicaSet
	story.Eventually(t, 30*time.Second, "us-east bakes v2", func() error {
		r := kit.Get(t, ns)
		for _, ss := range r.Status.Shards {
			if ss.Name == "us-east" && ss.Step == routingv1alpha1.ShardStepBaking {
				for _, rs := range kit.ReplicaSets(t, ns) {
					if rs.Labels[rollout.LabelShard] == "us-east" && rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
						v2 = rs.DeepCopy()
						return nil
					}
				}
			}
		}
		return fmt.Errorf("status.shards %+v", r.Status.Shards)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "v2-pod-0", Namespace: ns, Labels: v2.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(v2, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v2"}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:v2", RestartCount: 1, Ready: true,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.Now()}}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "Stalled=True PodOOMKilled", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonPodOOMKilled))
	story.Eventually(t, 20*time.Second, "us-east back to full v1", kit.ServingIs(t, ns, story.AllV1))
	f := kit.Get(t, ns).Status.Failure
	if f == nil || f.Shard != "us-east" || !strings.Contains(f.Message, "pod v2-pod-0") || !strings.Contains(f.Message, "container app") {
		t.Fatalf("status.failure %+v", f)
	}
	for _, rs := range kit.ReplicaSets(t, ns) {
		if shard := rs.Labels[rollout.LabelShard]; shard != "us-east" && rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
			t.Fatalf("shard %s was touched: %s", shard, rs.Name)
		}
	}
}
