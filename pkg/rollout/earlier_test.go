package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// earlierV1 is eu-west's v1 ReplicaSet as it would still run in the cluster the shard left.
func (w *world) earlierV1() *appsv1.ReplicaSet {
	for _, rs := range w.rss {
		if rs.Labels[LabelShard] == "eu-west" && strings.Contains(rs.Spec.Template.Spec.Containers[0].Image, "v1") {
			old := rs.DeepCopy()
			old.Name += "-old"
			old.UID = old.UID + "-old"
			return old
		}
	}
	w.t.Fatal("no eu-west v1 ReplicaSet")
	return nil
}

// A retired place still serving v1 holds the contract: eu-west moved from cluster eu-old, which
// still runs its v1 ReplicaSet (the reconciler retires it only after Ready has held for a
// while). With a rollback window of 0 the contract would otherwise run at once and break v1
// there. It waits, saying which place and why, while that place runs v1, and while its cluster
// does not answer; once the place is cleaned up it runs.
func TestContractWaitsForAShardsEarlierPlace(t *testing.T) {
	w := steady(t)
	old := w.earlierV1()
	v1 := old.Labels[LabelRevision]
	w.earlier = []EarlierPlace{{Shard: "eu-west", Cluster: ClusterView{Name: "eu-old", State: routingv1alpha1.ClusterReachable},
		ReplicaSets: []*appsv1.ReplicaSet{old}, RoutingPods: map[string]int32{v1: 3}}}
	w.rsvc.Spec.Schema.Contract = contractSpec("3", "contract:ok", 0)
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision })
	hold := func(want string) {
		t.Helper()
		for i := 0; i < 10; i++ {
			w.step(10 * time.Second)
		}
		if jobs := w.contractJobs(); len(jobs) > 0 {
			t.Fatalf("contract Job %v while %s", jobs, want)
		}
		c := w.condition(routingv1alpha1.ConditionContractReady)
		if c == nil || c.Reason != routingv1alpha1.ReasonOlderPodsRemain || !strings.Contains(c.Message, "earlier place in cluster eu-old") || !strings.Contains(c.Message, want) {
			t.Fatalf("ContractReady %+v, want OlderPodsRemain naming eu-old and %q", c, want)
		}
	}
	hold("still runs revision " + v1)

	// Its ReplicaSet deleted, its pods still terminating: still held.
	w.earlier[0].ReplicaSets = nil
	hold("3 routing pods of revision " + v1)

	// The cluster stops answering before it is cleaned up: what runs there cannot be counted.
	w.earlier[0].Cluster.State, w.earlier[0].Cluster.Message = routingv1alpha1.ClusterUnreachable, "dial tcp: i/o timeout"
	hold("its cluster is Unreachable")

	// Cleaned up: nothing of it is left, and the contract runs.
	w.earlier = nil
	w.run(100, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractComplete })
	if jobs := w.contractJobs(); len(jobs) != 1 {
		t.Fatalf("contract Jobs %v, want one", jobs)
	}
}

// What in an earlier place holds the contract, one case at a time.
func TestEarlierPlaceHolds(t *testing.T) {
	rsvc := fixture()
	update := Revision(&rsvc.Spec)
	rs := func(rev string, replicas, running int32) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{}
		r.Name, r.Labels = "rs-a-eu-west-"+rev, map[string]string{LabelRevision: rev}
		r.Spec.Replicas, r.Status.Replicas = ptr.To(replicas), running
		return r
	}
	reachable := ClusterView{Name: "eu-old", State: routingv1alpha1.ClusterReachable}
	cases := []struct {
		name  string
		place EarlierPlace
		want  string // a part of the answer; "" for none
	}{
		{"nothing left", EarlierPlace{Shard: "eu-west", Cluster: reachable}, ""},
		{"only the update revision", EarlierPlace{Shard: "eu-west", Cluster: reachable,
			ReplicaSets: []*appsv1.ReplicaSet{rs(update, 3, 3)}, RoutingPods: map[string]int32{update: 3}}, ""},
		{"an older revision scaled to 0, no pods", EarlierPlace{Shard: "eu-west", Cluster: reachable,
			ReplicaSets: []*appsv1.ReplicaSet{rs("old", 0, 0)}}, ""},
		{"an older revision asked for pods", EarlierPlace{Shard: "eu-west", Cluster: reachable,
			ReplicaSets: []*appsv1.ReplicaSet{rs("old", 2, 0)}}, "still runs revision old (ReplicaSet rs-a-eu-west-old, 2 pods)"},
		{"an older revision's pods still running", EarlierPlace{Shard: "eu-west", Cluster: reachable,
			ReplicaSets: []*appsv1.ReplicaSet{rs("old", 0, 1)}}, "still runs revision old"},
		{"pods only", EarlierPlace{Shard: "eu-west", Cluster: reachable, RoutingPods: map[string]int32{"old": 2}}, "2 routing pods of revision old"},
		{"the RoutingService's own cluster", EarlierPlace{Shard: "eu-west", Cluster: ClusterView{State: routingv1alpha1.ClusterReachable},
			ReplicaSets: []*appsv1.ReplicaSet{rs("old", 3, 3)}}, "earlier place in the RoutingService's own cluster still runs"},
		{"a cluster not answering", EarlierPlace{Shard: "eu-west", Cluster: ClusterView{Name: "eu-old", State: routingv1alpha1.ClusterCredentialsRefused, Message: "Secret x not found"}},
			"its cluster is CredentialsRefused (Secret x not found)"},
		{"a nil ReplicaSet", EarlierPlace{Shard: "eu-west", Cluster: reachable, ReplicaSets: []*appsv1.ReplicaSet{nil}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlanner(Observed{RoutingService: rsvc.DeepCopy(), Now: time.Now(), EarlierPlaces: []EarlierPlace{tc.place}})
			got := p.earlierPlaceWait()
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Binary-first with a shard's earlier place still running v1: every shard of the spec rolls v2
// (which runs on [1, 2]) first, but the migration to 2 waits while eu-west's earlier place in
// cluster eu-old still runs v1 (on [1, 1]) and while that cluster does not answer: it would break v1
// there. Once the place is cleaned up, the migration runs. status.schema.revisions lists v1 as
// serving eu-west there meanwhile.
func TestBinaryFirstWaitsForAShardsEarlierPlace(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	old := w.earlierV1()
	v1 := old.Labels[LabelRevision]
	w.earlier = []EarlierPlace{{Shard: "eu-west", Cluster: ClusterView{Name: "eu-old", State: routingv1alpha1.ClusterReachable},
		ReplicaSets: []*appsv1.ReplicaSet{old}, RoutingPods: map[string]int32{v1: 3}}}
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.run(300, func() bool { return w.shardImages() == "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" })
	hold := func(want string) {
		t.Helper()
		for i := 0; i < 10; i++ {
			w.step(10 * time.Second)
		}
		if n := w.migrationJobsFor("2"); n != 0 {
			t.Fatalf("%d migration Jobs for schema 2 while %s", n, want)
		}
		c := w.condition(routingv1alpha1.ConditionSchemaReady)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "earlier place in cluster eu-old") || !strings.Contains(c.Message, want) {
			t.Fatalf("SchemaReady %+v, want it to name eu-west's earlier place and %q", c, want)
		}
	}
	hold("runs on [1, 1]")
	found := false
	for _, r := range w.rsvc.Status.Schema.Revisions {
		found = found || r.Revision == v1 && slices.Contains(r.Shards, "eu-west")
	}
	if !found {
		t.Fatalf("status.schema.revisions %+v does not list v1 serving eu-west in its earlier place", w.rsvc.Status.Schema.Revisions)
	}

	w.earlier[0].Cluster.State, w.earlier[0].Cluster.Message = routingv1alpha1.ClusterUnreachable, "dial tcp: i/o timeout"
	w.earlier[0].ReplicaSets = nil
	hold("is Unreachable")

	w.earlier = nil
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) && w.confirmed == "2" })
	if n := w.migrationJobsFor("2"); n != 1 {
		t.Fatalf("%d migration Jobs for schema 2, want 1", n)
	}
}
