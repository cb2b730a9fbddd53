package controllers

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// listCache answers a cache's List from a client (a narrow unit test of retireSpokes' rules).
type listCache struct {
	cache.Cache
	c client.Client
}

func (l listCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.c.List(ctx, list, opts...)
}

// retireWorld is rs-a "web" whose clusters-used names eu through Secret eu-old, a spoke namespace
// "app" with the anchor and one ReplicaSet of shard eu, and a connection for eu-old.
func retireWorld(t *testing.T, spec []routingv1alpha1.ShardSpec) (*RoutingServiceReconciler, *routingv1alpha1.RoutingService, client.Client, *corev1.ConfigMap) {
	t.Helper()
	now := time.Now()
	rsvc := &routingv1alpha1.RoutingService{}
	rsvc.Namespace, rsvc.Name, rsvc.UID, rsvc.Generation = "team", "web", "u1", 3
	rsvc.Spec.Shards = spec
	rsvc.Annotations = map[string]string{routingv1alpha1.AnnotationClustersUsed: `[{"shard":"eu","cluster":{"name":"eu","namespace":"app","secretRef":{"name":"eu-old"}}}]`}
	rsvc.Status.ObservedGeneration = 3
	rsvc.Status.Conditions = []metav1.Condition{{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "RolloutComplete",
		ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	anchor := spoke.NewAnchor(rsvc, "app", "hub1", nil)
	anchor.UID = "anchor-uid"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-eu-abc", Namespace: "app", UID: "rs-uid",
		Labels:          map[string]string{rollout.LabelName: "web", rollout.LabelShard: "eu", rollout.LabelManagedBy: rollout.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{spoke.AnchorRef(anchor)}}}
	spokeClient := indexed(fake.NewClientBuilder().WithScheme(Scheme())).WithObjects(anchor, rs).Build()
	data := map[string][]byte{"value": []byte("a kubeconfig")}
	hub := indexed(fake.NewClientBuilder().WithScheme(Scheme())).WithObjects(rsvc.DeepCopy(),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "eu-old"}, Data: data}).Build()
	old := routingv1alpha1.ShardCluster{Name: "eu", Namespace: "app", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "eu-old"}}
	key := connKey(rsvc, &old)
	s := &Spokes{Hub: "hub1", Secrets: hub, conns: map[string]*spokeConn{}}
	s.defaults()
	s.conns[key] = &spokeConn{key: key, namespace: "app", client: spokeClient, cache: listCache{c: spokeClient}, secretRead: now,
		fingerprint: spoke.Fingerprint(data), state: routingv1alpha1.ClusterReachable, synced: true,
		users: map[types.NamespacedName]bool{}, cancel: func() {}}
	r := &RoutingServiceReconciler{Client: hub, Spokes: s, Clock: clocktesting.NewFakeClock(now)}
	if err := hub.Get(context.Background(), client.ObjectKeyFromObject(rsvc), rsvc); err != nil {
		t.Fatal(err)
	}
	return r, rsvc, spokeClient, anchor
}

func spokeSets(t *testing.T, c client.Client) int {
	var got appsv1.ReplicaSetList
	if err := c.List(context.Background(), &got, client.InNamespace("app")); err != nil {
		t.Fatal(err)
	}
	return len(got.Items)
}

// A shard removed from the spec is cleaned up where it ran; the same place named another way (a
// new Secret for the same cluster and namespace: the same anchor) is the shard's live place, and
// nothing there is deleted; nor while Ready has not held for retireSettle.
func TestRetireSpokes(t *testing.T) {
	ctx := context.Background()

	r, rsvc, spokeClient, _ := retireWorld(t, []routingv1alpha1.ShardSpec{{Name: "us", Replicas: 2}})
	stored := rsvc.Status.DeepCopy()
	if err := r.retireSpokes(ctx, rsvc, stored, &rsvc.Status, nil); err != nil {
		t.Fatal(err)
	}
	if n := spokeSets(t, spokeClient); n != 0 {
		t.Fatalf("removed shard: %d ReplicaSets left where it ran", n)
	}

	renamed := []routingv1alpha1.ShardSpec{{Name: "eu", Replicas: 2,
		Cluster: &routingv1alpha1.ShardCluster{Name: "eu", Namespace: "app", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "eu-new"}}}}
	r, rsvc, spokeClient, anchor := retireWorld(t, renamed)
	live := map[string]*spokeShard{"eu": {conn: r.Spokes.conns[connKey(rsvc, &routingv1alpha1.ShardCluster{Name: "eu", Namespace: "app", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "eu-old"}})], anchor: anchor}}
	if err := r.retireSpokes(ctx, rsvc, rsvc.Status.DeepCopy(), &rsvc.Status, live); err != nil {
		t.Fatal(err)
	}
	if n := spokeSets(t, spokeClient); n != 1 {
		t.Fatalf("a Secret renamed: the shard's live ReplicaSet was deleted (%d left)", n)
	}
	if got := readClustersUsed(rsvc); len(got) != 0 {
		t.Fatalf("the entry for the old name is kept: %+v", got)
	}

	r, rsvc, spokeClient, _ = retireWorld(t, []routingv1alpha1.ShardSpec{{Name: "us", Replicas: 2}})
	stored = rsvc.Status.DeepCopy()
	stored.Conditions[0].LastTransitionTime = metav1.NewTime(r.Clock.Now().Add(-time.Second))
	if err := r.retireSpokes(ctx, rsvc, stored, &rsvc.Status, nil); err != nil {
		t.Fatal(err)
	}
	if n := spokeSets(t, spokeClient); n != 1 {
		t.Fatalf("Ready for 1 s: %d ReplicaSets left, want the one untouched", n)
	}
}

// A retired place whose cluster does not answer is left alone, and said once (a Warning Event
// naming the shard, the cluster and its state) over several reconciles; once the cluster answers
// the place is cleaned up.
func TestRetirementWaitingIsReportedOnce(t *testing.T) {
	ctx := context.Background()
	r, rsvc, spokeClient, _ := retireWorld(t, []routingv1alpha1.ShardSpec{{Name: "us", Replicas: 2}})
	rec := &recorded{}
	r.Recorder = rec
	conn := r.Spokes.conns[connKey(rsvc, &routingv1alpha1.ShardCluster{Name: "eu", Namespace: "app", SecretRef: &routingv1alpha1.ClusterSecretRef{Name: "eu-old"}})]
	conn.state, conn.message = routingv1alpha1.ClusterUnreachable, "dial tcp 127.0.0.1:1: connection refused"
	for i := 0; i < 4; i++ {
		if err := r.retireSpokes(ctx, rsvc, rsvc.Status.DeepCopy(), &rsvc.Status, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := spokeSets(t, spokeClient); n != 1 {
		t.Fatalf("cluster unreachable: %d ReplicaSets left, want the one untouched", n)
	}
	if n := rec.count(EventRetirementPending); n != 1 {
		t.Fatalf("%d %s Events over 4 reconciles, want 1 (%v)", n, EventRetirementPending, rec.reasons)
	}
	if len(readClustersUsed(rsvc)) != 1 {
		t.Fatalf("the waiting entry was dropped: %+v", readClustersUsed(rsvc))
	}
	conn.state, conn.message = routingv1alpha1.ClusterReachable, ""
	if err := r.retireSpokes(ctx, rsvc, rsvc.Status.DeepCopy(), &rsvc.Status, nil); err != nil {
		t.Fatal(err)
	}
	if n := spokeSets(t, spokeClient); n != 0 {
		t.Fatalf("cluster back: %d ReplicaSets left where the shard ran", n)
	}
}

// eventMemo: a standing fact is fresh once; a changed value is fresh again; a fact gone and back
// is fresh again.
func TestEventMemo(t *testing.T) {
	var m eventMemo
	key := types.NamespacedName{Namespace: "ns", Name: "rs"}
	steps := []struct {
		current map[string]string
		want    int
	}{
		{map[string]string{"a": "x"}, 1},
		{map[string]string{"a": "x"}, 0},
		{map[string]string{"a": "y", "b": "x"}, 2},
		{map[string]string{"b": "x"}, 0},
		{nil, 0},
		{map[string]string{"b": "x"}, 1},
	}
	for i, s := range steps {
		if got := m.fresh(key, s.current); len(got) != s.want {
			t.Fatalf("step %d: fresh %v, want %d", i, got, s.want)
		}
	}
	m.forget(key)
	if got := m.fresh(key, map[string]string{"b": "x"}); len(got) != 1 {
		t.Fatalf("after forget: fresh %v", got)
	}
}

// The retirement controller cleans up from the status alone: Ready for a minute, the removed
// shard's place is cleaned up; Ready for a second, it waits for the rest of retireSettle and looks
// again then.
func TestRetirementController(t *testing.T) {
	ctx := context.Background()
	r, rsvc, spokeClient, _ := retireWorld(t, []routingv1alpha1.ShardSpec{{Name: "us", Replicas: 2}})
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rsvc)}
	res, err := r.reconcileRetirement(ctx, req)
	if err != nil || res.RequeueAfter != spokeRecheck {
		t.Fatalf("reconcileRetirement = %+v, %v; want a look again while the entry remains", res, err)
	}
	if n := spokeSets(t, spokeClient); n != 0 {
		t.Fatalf("Ready for a minute: %d ReplicaSets left where the removed shard ran", n)
	}
	// Nothing of it left there: the entry goes, and nothing more is asked.
	if res, err = r.reconcileRetirement(ctx, req); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcileRetirement = %+v, %v", res, err)
	}
	if err := r.Get(ctx, req.NamespacedName, rsvc); err != nil || len(readClustersUsed(rsvc)) != 0 {
		t.Fatalf("clusters-used %+v (%v), want the entry dropped", readClustersUsed(rsvc), err)
	}

	r, rsvc, spokeClient, _ = retireWorld(t, []routingv1alpha1.ShardSpec{{Name: "us", Replicas: 2}})
	rsvc.Status.Conditions[0].LastTransitionTime = metav1.NewTime(r.Clock.Now().Add(-time.Second))
	if err := r.Update(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	res, err = r.reconcileRetirement(ctx, req)
	if err != nil || res.RequeueAfter < 8*time.Second || res.RequeueAfter > retireSettle {
		t.Fatalf("Ready for 1 s: reconcileRetirement = %+v, %v; want a look again in about 9 s", res, err)
	}
	if n := spokeSets(t, spokeClient); n != 1 {
		t.Fatalf("Ready for 1 s: %d ReplicaSets left, want the one untouched", n)
	}
}
