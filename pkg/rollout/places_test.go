package rollout

import (
	"reflect"
	"testing"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The plan's first intents are the clusters its shards run in, each with what the anchor there
// records: the stable revision as stored and the update revision. A shard in the hub has none; a
// shard whose cluster does not answer keeps its place (clusters-used must still name it); a
// namespace left empty is the RoutingService's.
func TestPlacesAreTheSpecsClusters(t *testing.T) {
	w := clusteredOn(t, nil)
	stable := w.rsvc.Status.StableRevision
	w.rsvc.Spec.Shards[0].Cluster = nil
	w.rsvc.Spec.Shards[2].Cluster.Namespace = "edge"
	w.cut(w.rsvc.Spec.Shards[1].Name, routingv1alpha1.ClusterUnreachable)
	w.update("app:v2", "1", "migrate:ok")
	plan := w.reconcile()
	update := plan.Status.UpdateRevision
	if update == stable || stable == "" {
		t.Fatalf("revisions: stable %q, update %q", stable, update)
	}
	want := []Place{
		{Shard: w.rsvc.Spec.Shards[1].Name, Cluster: routingv1alpha1.ShardCluster{Name: "c-" + w.rsvc.Spec.Shards[1].Name, Namespace: w.rsvc.Namespace}, Revisions: []string{stable, update}},
		{Shard: w.rsvc.Spec.Shards[2].Name, Cluster: routingv1alpha1.ShardCluster{Name: "c-" + w.rsvc.Spec.Shards[2].Name, Namespace: "edge"}, Revisions: []string{stable, update}},
	}
	if !reflect.DeepEqual(plan.Places, want) {
		t.Fatalf("places:\n got %+v\nwant %+v", plan.Places, want)
	}
	w.rsvc.Spec.Shards[1].Cluster, w.rsvc.Spec.Shards[2].Cluster = nil, nil
	if got := w.reconcile().Places; len(got) != 0 {
		t.Fatalf("a spec with every shard in the hub has places %+v", got)
	}
}
