package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// routingShard reads rs-a's RoutingShard of shard.
func routingShard(t *testing.T, ns, shard string) (*routingv1alpha1.RoutingShard, error) {
	t.Helper()
	rshard := &routingv1alpha1.RoutingShard{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: rollout.RoutingShardName("rs-a", shard)}, rshard)
	return rshard, err
}

// scaleShard writes the /scale subresource of rs-a's RoutingShard of shard, as an autoscaler does,
// under the field manager "test-autoscaler".
func scaleShard(t *testing.T, ns, shard string, replicas int32) {
	t.Helper()
	rshard, err := routingShard(t, ns, shard)
	if err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if err := k8s.SubResource("scale").Update(context.Background(), rshard, client.WithSubResourceBody(scale), client.FieldOwner("test-autoscaler")); err != nil {
		t.Fatal(err)
	}
}

// shardReplicaSets is "<image>:<spec.replicas>" of shard's ReplicaSets with pods asked for, in
// name order.
func shardReplicaSets(t *testing.T, ns, shard string) string {
	out := ""
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Labels[rollout.LabelShard] == shard && ptr.Deref(rs.Spec.Replicas, 0) > 0 {
			out += fmt.Sprintf("%s:%d ", rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas)
		}
	}
	return out
}

// An autoscaled shard (spec.shards[].autoscaling) gets a RoutingShard whose /scale subresource an
// autoscaler writes, and a HorizontalPodAutoscaler schemagate owns that targets it. The RoutingShard
// selects exactly the serving revision's pods of that shard. A scale change resizes the shard and
// nothing else: no new revision, ReplicaSet or Job, the RoutingService stays Ready and not
// Reconciling (what kstatus and Argo CD read), and a steady RoutingService writes nothing to the
// RoutingShard. During a promotion the new revision's ReplicaSet is sized to the autoscaled size
// (not spec.shards[].replicas), and a scale-down waits until the shard has baked, with a reason.
func TestAutoscaledShardFollowsItsScaleTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	rsvc := story.Fixture(ns)
	rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MinReplicas: ptr.To(int32(2)), MaxReplicas: ptr.To(int32(10))}
	rsvc.Spec.Strategy.BakeSeconds = ptr.To(int32(4))
	rsvc.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(30))
	if err := k8s.Create(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v1 everywhere", kit.ServingIs(t, ns, story.AllV1))
	rsvc = kit.Get(t, ns)

	// The scale target and the autoscaler.
	var rshard *routingv1alpha1.RoutingShard
	story.Eventually(t, 10*time.Second, "us-east's RoutingShard reports v1's pods", func() error {
		var err error
		if rshard, err = routingShard(t, ns, "us-east"); err != nil {
			return err
		}
		if rshard.Status.Revision == "" || rshard.Status.Replicas != 3 || rshard.Status.AppliedReplicas != 3 {
			return fmt.Errorf("status %+v", rshard.Status)
		}
		return nil
	})
	if !metav1.IsControlledBy(rshard, rsvc) || ptr.Deref(rshard.Spec.Replicas, -1) != 3 {
		t.Errorf("RoutingShard: owners %v, spec.replicas %v; want rs-a's, 3", rshard.OwnerReferences, rshard.Spec.Replicas)
	}
	sel, err := labels.Parse(rshard.Status.Selector)
	if err != nil {
		t.Fatalf("selector %q: %v", rshard.Status.Selector, err)
	}
	for _, rs := range kit.ReplicaSets(t, ns) {
		want := rs.Labels[rollout.LabelShard] == "us-east" && rs.Labels[rollout.LabelRevision] == rshard.Status.Revision
		if got := sel.Matches(labels.Set(rs.Spec.Template.Labels)); got != want {
			t.Errorf("the selector %q matches the pods of %s: %v, want %v", rshard.Status.Selector, rs.Name, got, want)
		}
	}
	for _, shard := range []string{"eu-west", "ap-south"} {
		if _, err := routingShard(t, ns, shard); err == nil {
			t.Errorf("shard %s has no autoscaling, yet a RoutingShard", shard)
		}
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a-us-east"}, hpa); err != nil {
		t.Fatal(err)
	}
	if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "RoutingShard" || ref.Name != "rs-a-us-east" || ref.APIVersion != "routing.schemagate.io/v1alpha1" ||
		ptr.Deref(hpa.Spec.MinReplicas, 0) != 2 || hpa.Spec.MaxReplicas != 10 || !metav1.IsControlledBy(hpa, rsvc) {
		t.Errorf("autoscaler: target %+v, min %v, max %d, owners %v", ref, hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, hpa.OwnerReferences)
	}

	// Steady: pokes write nothing to the RoutingShard or the autoscaler.
	rshard, _ = routingShard(t, ns, "us-east")
	for i := range 3 {
		kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
			if r.Annotations == nil {
				r.Annotations = map[string]string{}
			}
			r.Annotations["example.com/poke"] = strconv.Itoa(i)
		})
		time.Sleep(300 * time.Millisecond) // what is measured: a reconcile per poke, each one writing nothing
	}
	story.Consistently(t, time.Second, "steady: the RoutingShard and the autoscaler are not written", func() error {
		now, err := routingShard(t, ns, "us-east")
		if err != nil {
			return err
		}
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a-us-east"}, h); err != nil {
			return err
		}
		if now.ResourceVersion != rshard.ResourceVersion || h.ResourceVersion != hpa.ResourceVersion {
			return fmt.Errorf("written: RoutingShard %s → %s, autoscaler %s → %s", rshard.ResourceVersion, now.ResourceVersion, hpa.ResourceVersion, h.ResourceVersion)
		}
		return nil
	})

	// A change of spec.shards[].autoscaling reaches the autoscaler.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Shards[0].Autoscaling.MaxReplicas = ptr.To(int32(12)) })
	story.Eventually(t, 10*time.Second, "the autoscaler's maxReplicas follows the spec", func() error {
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a-us-east"}, h); err != nil {
			return err
		}
		if h.Spec.MaxReplicas != 12 {
			return fmt.Errorf("maxReplicas %d", h.Spec.MaxReplicas)
		}
		return nil
	})
	kit.WaitReady(t, ns, 30*time.Second)

	// A scale-up resizes us-east only, and reads as no rollout.
	before := kit.Get(t, ns)
	rsCount, jobCount := len(kit.ReplicaSets(t, ns)), len(kit.Jobs(t, ns))
	scaleShard(t, ns, "us-east", 7)
	notARollout := func() error {
		now := kit.Get(t, ns)
		if now.Generation != before.Generation || now.Status.UpdateRevision != before.Status.UpdateRevision {
			return fmt.Errorf("generation %d → %d, revision %s → %s", before.Generation, now.Generation, before.Status.UpdateRevision, now.Status.UpdateRevision)
		}
		if n, m := len(kit.ReplicaSets(t, ns)), len(kit.Jobs(t, ns)); n != rsCount || m != jobCount {
			return fmt.Errorf("%d ReplicaSets and %d Jobs, %d and %d before", n, m, rsCount, jobCount)
		}
		if c := story.Condition(now, routingv1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("Reconciling: %+v", c)
		}
		if c := story.Condition(now, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready: %+v", c)
		}
		return nil
	}
	story.Eventually(t, 10*time.Second, "us-east runs 7 pods", func() error {
		if got := kit.Serving(t, ns); got != "us-east=app:v1:7/7 eu-west=app:v1:3/3 ap-south=app:v1:3/3" {
			return fmt.Errorf("serving %q", got)
		}
		return notARollout()
	})
	story.Consistently(t, 2*time.Second, "a scale change is not a rollout", notARollout)
	st := kit.Get(t, ns).Status.Shards[0]
	if st.Replicas != 7 || st.Scaling == nil || ptr.Deref(st.Scaling.DesiredReplicas, 0) != 7 || st.Scaling.ScaledBy != "test-autoscaler" || st.Scaling.Held != "" {
		t.Errorf("status.shards[us-east]: replicas %d, scaling %+v; want 7, desired 7 by test-autoscaler", st.Replicas, st.Scaling)
	}
	if spec := kit.Get(t, ns).Spec.Shards[0].Replicas; spec != 3 {
		t.Errorf("spec.shards[us-east].replicas was written: %d", spec)
	}

	// A promotion: v2's ReplicaSet in us-east is sized to 7; a scale-down to 4 while it promotes
	// is held until us-east has baked, then applied.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Template.Spec.Containers[0].Image = "app:v2" })
	story.Eventually(t, 20*time.Second, "v2 in us-east at 7 pods", func() error {
		for _, rs := range kit.ReplicaSets(t, ns) {
			if rs.Labels[rollout.LabelShard] == "us-east" && rs.Spec.Template.Spec.Containers[0].Image == "app:v2" {
				if a := rs.Annotations[rollout.AnnotationPromotionReplicas]; a != "7" {
					return fmt.Errorf("%s records %q as the promotion's size, want 7", rs.Name, a)
				}
				if ptr.Deref(rs.Spec.Replicas, 0) == 7 {
					return nil
				}
			}
		}
		return fmt.Errorf("us-east: %s", shardReplicaSets(t, ns, "us-east"))
	})
	scaleShard(t, ns, "us-east", 4)
	story.Eventually(t, 10*time.Second, "the scale-down is held while us-east bakes", func() error {
		now := kit.Get(t, ns)
		st := now.Status.Shards[0]
		if st.Step == routingv1alpha1.ShardStepPromoted {
			return fmt.Errorf("us-east was promoted before the hold was seen")
		}
		if st.Scaling == nil || st.Scaling.Held == "" || st.Replicas != 7 {
			return fmt.Errorf("us-east %s: replicas %d, scaling %+v", st.Step, st.Replicas, st.Scaling)
		}
		return nil
	})
	if got := shardReplicaSets(t, ns, "us-east"); !strings.Contains(got, "app:v2:7 ") {
		t.Errorf("us-east while held: %q, want v2 at 7", got)
	}
	story.Eventually(t, 30*time.Second, "once baked, us-east shrinks to 4", func() error {
		if st := kit.Get(t, ns).Status.Shards[0]; st.Step != routingv1alpha1.ShardStepPromoted || st.Scaling == nil || st.Scaling.Held != "" {
			return fmt.Errorf("us-east %s, scaling %+v", st.Step, st.Scaling)
		}
		if got := shardReplicaSets(t, ns, "us-east"); got != "app:v2:4 " {
			return fmt.Errorf("us-east: %q", got)
		}
		return nil
	})
	kit.WaitReady(t, ns, 60*time.Second)
	if rshard, _ := routingShard(t, ns, "us-east"); rshard.Status.Revision != kit.Get(t, ns).Status.UpdateRevision {
		t.Errorf("the RoutingShard selects revision %s's pods once v2 is promoted, want %s", rshard.Status.Revision, kit.Get(t, ns).Status.UpdateRevision)
	}

	// Without autoscaling the shard is spec.shards[].replicas again, and the scale target and the
	// autoscaler are gone.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Shards[0].Autoscaling = nil })
	story.Eventually(t, 20*time.Second, "us-east back at 3, its RoutingShard and autoscaler deleted", func() error {
		if got := shardReplicaSets(t, ns, "us-east"); got != "app:v2:3 " {
			return fmt.Errorf("us-east: %q", got)
		}
		if rshard, err := routingShard(t, ns, "us-east"); err == nil && rshard.DeletionTimestamp == nil {
			return fmt.Errorf("the RoutingShard is still there")
		}
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a-us-east"}, h); err == nil && h.DeletionTimestamp == nil {
			return fmt.Errorf("the autoscaler is still there")
		}
		if st := kit.Get(t, ns).Status.Shards[0]; st.Scaling != nil {
			return fmt.Errorf("status still reports scaling: %+v", st.Scaling)
		}
		return nil
	})
}

// An autoscaler pointed at a shard's ReplicaSet instead of its RoutingShard (here: a /scale write
// under the field manager "test-hpa") does not win and does not fight unseen: schemagate sets the
// shard back to its size and a Warning Event names the other writer.
func TestForeignScaleOfAReplicaSetIsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	var target *appsv1.ReplicaSet
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Labels[rollout.LabelShard] == "eu-west" && ptr.Deref(rs.Spec.Replicas, 0) == 3 {
			target = &rs
		}
	}
	if target == nil {
		t.Fatalf("no serving ReplicaSet in eu-west: %s", kit.Serving(t, ns))
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 6}}
	if err := k8s.SubResource("scale").Update(ctx, target, client.WithSubResourceBody(scale), client.FieldOwner("test-hpa")); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 15*time.Second, "eu-west set back to 3, the writer named", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		named := false
		for _, e := range list.Items {
			if e.Reason == rollout.EventReplicasOverwritten && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "by test-hpa") && strings.Contains(e.Note, target.Name) {
				named = true
			}
		}
		if !named {
			return fmt.Errorf("no %s Event naming test-hpa: %v", rollout.EventReplicasOverwritten, kit.EventsFor(t, ns))
		}
		return kit.ServingIs(t, ns, story.AllV1)()
	})
}

// A RoutingShard or autoscaler name an autoscaled shard needs, held by objects schemagate does not
// control, is left alone: a Warning Event names each holder, and the shard keeps
// spec.shards[].replicas while the rollout goes on.
func TestScaleTargetNameHeldByAnother(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	theirs := &routingv1alpha1.RoutingShard{ObjectMeta: metav1.ObjectMeta{Name: "rs-a-us-east", Namespace: ns}, Spec: routingv1alpha1.RoutingShardSpec{Replicas: ptr.To(int32(9))}}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "rs-a-us-east", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 4, ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "other"}}}
	if err := k8s.Create(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	rsvc := story.Fixture(ns)
	rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MaxReplicas: ptr.To(int32(10))}
	if err := k8s.Create(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "both holders named, us-east at its spec size", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		named := map[string]bool{}
		for _, e := range list.Items {
			if e.Reason == "ScaleTargetConflict" && e.Type == corev1.EventTypeWarning {
				for _, kind := range []string{"RoutingShard rs-a-us-east", "HorizontalPodAutoscaler rs-a-us-east"} {
					if strings.Contains(e.Note, kind) {
						named[kind] = true
					}
				}
			}
		}
		if len(named) != 2 {
			return fmt.Errorf("named %v: %v", named, kit.EventsFor(t, ns))
		}
		return kit.ServingIs(t, ns, story.AllV1)()
	})
	got, err := routingShard(t, ns, "us-east")
	if err != nil || metav1.GetControllerOf(got) != nil || ptr.Deref(got.Spec.Replicas, 0) != 9 {
		t.Errorf("their RoutingShard was changed: %+v (%v)", got, err)
	}
	h := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(hpa), h); err != nil || metav1.GetControllerOf(h) != nil || h.Spec.MaxReplicas != 4 {
		t.Errorf("their autoscaler was changed: %+v (%v)", h.Spec, err)
	}
}
