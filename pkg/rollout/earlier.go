package rollout

import (
	"fmt"
	"sort"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// A shard's earlier places. A shard moved to another cluster (or back to the RoutingService's
// own, or removed) leaves its old place serving until the reconciler retires it: once the
// RoutingService has been Ready for a while (controllers/spoke_retired.go, hub_retired.go). Until
// then the revision it ran there still serves there, on whatever schema the database is at, and
// an old place whose cluster does not answer may serve it for as long as it does not. The
// contract reads this answer and waits, since it would break that revision where it still runs;
// the retirement does not wait for the contract, so the two never wait on each other. The serving
// set counts these places too (serving.go), so the expand gate and binary-first never start a
// migration that a revision still running there cannot run on. Nor do those two wait on each
// other: a binary-first rollout is Ready once every shard is promoted, before its migration
// starts, and the retirement waits for Ready (TestStoryBinaryFirstWaitsForAShardsEarlierPlace).

// maxEarlierPlaces bounds how many earlier places are read (what the reconciler observes comes
// from clusters-used, itself bounded at 150 entries, and from the RoutingService's own cluster).
const maxEarlierPlaces = 200

// earlierPlaceWait says why the contract must wait for an earlier place ("" when none holds it):
// the first, in shard order, whose cluster does not answer, or that still has a ReplicaSet or a
// routing pod of a revision other than the update revision.
func (p *planner) earlierPlaceWait() string {
	var out []string
	for _, e := range p.earlierPlaces() {
		if msg := p.earlierHolds(e); msg != "" {
			out = append(out, msg)
		}
	}
	if len(out) == 0 {
		return ""
	}
	sort.Strings(out)
	return out[0]
}

// earlierPlaces are the observed earlier places, at most maxEarlierPlaces of them.
func (p *planner) earlierPlaces() []EarlierPlace {
	places := p.observed.EarlierPlaces
	if len(places) > maxEarlierPlaces {
		places = places[:maxEarlierPlaces]
	}
	return places
}

// earlierHolds says what in e would run on a contracted schema, or "" when nothing does.
func (p *planner) earlierHolds(e EarlierPlace) string {
	where := fmt.Sprintf("shard %s's earlier place in %s", e.Shard, placeName(e.Cluster.Name))
	if e.Cluster.State != routingv1alpha1.ClusterReachable {
		msg := fmt.Sprintf("%s is not cleaned up and its cluster is %s", where, e.Cluster.State)
		if e.Cluster.Message != "" {
			msg += " (" + podText(e.Cluster.Message, 256) + ")"
		}
		return msg + ": what runs there cannot be counted (remove its entry from " + routingv1alpha1.AnnotationClustersUsed + " to give up on a cluster that is gone for good)"
	}
	for _, rs := range e.ReplicaSets {
		if rs == nil || rs.Labels[LabelRevision] == p.update {
			continue
		}
		if n := max(replicasOf(rs), rs.Status.Replicas); n > 0 {
			return fmt.Sprintf("%s still runs revision %s (ReplicaSet %s, %d pods) until it is cleaned up", where, rs.Labels[LabelRevision], rs.Name, n)
		}
	}
	revs := make([]string, 0, len(e.RoutingPods))
	for rev, n := range e.RoutingPods {
		if rev != p.update && n > 0 {
			revs = append(revs, rev)
		}
	}
	if len(revs) > 0 {
		sort.Strings(revs)
		return fmt.Sprintf("%s still has %d routing pods of revision %s (terminating ones included)", where, e.RoutingPods[revs[0]], revs[0])
	}
	return ""
}

// placeName names a cluster in a message: the RoutingService's own for "".
func placeName(cluster string) string {
	if cluster == "" {
		return "the RoutingService's own cluster"
	}
	return "cluster " + cluster
}
