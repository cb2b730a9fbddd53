package rollout

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemarange"
)

// The serving set: the planner's one answer to "which revisions may serve requests, where, and on
// which schema range", and "where would a rollback return each shard". The expand gate and
// binary-first (incompatibleWith), status.schema.revisions and RollbackSafe (lifecycle) read it;
// places whose content cannot be seen are part of it (unseen), so no reader can take "no
// ReplicaSet seen" for "nothing serves". A shard's earlier places (earlier.go) are part of it
// until they are cleaned up: what still runs there serves the shard as much as its new place.

// servingEntry is one ReplicaSet that serves a shard (asks for or has pods), or that a rollback of
// the shard would return to, with the range its revision runs on (revisionRange).
type servingEntry struct {
	shard string
	rs    *appsv1.ReplicaSet
	rng   schemarange.Range
	// target: a rollback of shard returns to rs; otherwise rs serves shard.
	target bool
	// earlier: rs serves shard in one of its earlier places, in cluster place ("": the
	// RoutingService's own), not yet cleaned up.
	earlier bool
	place   string
}

// where names the shard, and its earlier place when the entry is there.
func (e servingEntry) where() string {
	if e.earlier {
		return e.shard + " (its earlier place in " + placeName(e.place) + ")"
	}
	return e.shard
}

// servingSet is the serving entries (those that serve, in shard order, then the rollback targets,
// in shard order) and the places not seen.
type servingSet struct {
	entries []servingEntry
	unseen  []unseenPlace
}

// servingSet builds the set from the ReplicaSets as observed (nil view) or as this plan leaves
// them, with targets as the rollback targets by shard (failureTargets for the gates,
// rollbackTargets for the status).
func (p *planner) servingSet(view *plannedView, targets map[string]*appsv1.ReplicaSet) servingSet {
	var s servingSet
	for _, shard := range p.shardNames() {
		for _, rs := range view.all(p, shard) {
			if view.serving(rs) {
				s.entries = append(s.entries, servingEntry{shard: shard, rs: rs, rng: p.revisionRange(rs)})
			}
		}
	}
	s.unseen = p.unseenPlaces()
	for _, e := range p.earlierPlaces() {
		if e.Cluster.State != routingv1alpha1.ClusterReachable {
			since := e.Cluster.LastContact
			if since.IsZero() || since.After(p.now) {
				since = p.now
			}
			s.unseen = append(s.unseen, unseenPlace{shard: e.Shard, view: e.Cluster, since: since, earlier: true})
			continue
		}
		for _, rs := range e.ReplicaSets {
			if rs != nil && serving(rs) {
				s.entries = append(s.entries, servingEntry{shard: e.Shard, rs: rs, rng: p.revisionRange(rs), earlier: true, place: e.Cluster.Name})
			}
		}
	}
	for _, shard := range p.shardNames() {
		if rs := targets[shard]; rs != nil {
			s.entries = append(s.entries, servingEntry{shard: shard, rs: rs, rng: p.revisionRange(rs), target: true})
		}
	}
	return s
}

// targets are the rollback targets' entries, in shard order.
func (s servingSet) targets() []servingEntry {
	var out []servingEntry
	for _, e := range s.entries {
		if e.target {
			out = append(out, e)
		}
	}
	return out
}

// excluding lists, by revision and newest first, the entries whose range does not contain
// version: the revisions a migration to version would break where they serve, or where a
// rollback would return to them. A revision's range is that of its first such entry.
func (s servingSet) excluding(version string) []incompatible {
	byRev := map[string]*incompatible{}
	var order []string
	for _, e := range s.entries {
		if e.rng.Contains(version) {
			continue
		}
		rev := revisionOf(e.rs)
		in := byRev[rev]
		if in == nil {
			in = &incompatible{revision: rev, rng: e.rng}
			byRev[rev] = in
			order = append(order, rev)
		}
		if e.target {
			in.rollbackOf = appendOnce(in.rollbackOf, e.shard)
		} else {
			in.serves = appendOnce(in.serves, e.where())
		}
		if in.newest.Before(&e.rs.CreationTimestamp) {
			in.newest = e.rs.CreationTimestamp
		}
	}
	out := make([]incompatible, 0, len(order))
	for _, rev := range order {
		out = append(out, *byRev[rev])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[j].newest.Before(&out[i].newest) })
	return out
}

// revisionSchemas are status.schema.revisions: every revision of the set with its range (its
// first entry's) and the shards it serves, newest first (a ReplicaSet this plan creates is the
// newest of all, now being the planner's clock), at most maxRevisionSchemas, each listing at
// most 64 shards.
func (s servingSet) revisionSchemas(now time.Time) []routingv1alpha1.RevisionSchema {
	type entry struct {
		rs     routingv1alpha1.RevisionSchema
		newest metav1.Time
	}
	byRev := map[string]*entry{}
	var order []string
	for _, se := range s.entries {
		rev := revisionOf(se.rs)
		e := byRev[rev]
		if e == nil {
			e = &entry{rs: routingv1alpha1.RevisionSchema{Revision: rev, Min: se.rng.Min, Max: se.rng.Max, Assumed: se.rng.Assumed}}
			byRev[rev] = e
			order = append(order, rev)
		}
		if !se.target {
			e.rs.Shards = appendOnce(e.rs.Shards, se.shard)
		}
		created := se.rs.CreationTimestamp
		if created.IsZero() {
			// Created by this plan: the newest of all.
			created = metav1.Time{Time: now.Add(time.Hour)}
		}
		if e.newest.Before(&created) {
			e.newest = created
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := byRev[order[i]], byRev[order[j]]
		if a.newest.Equal(&b.newest) {
			return a.rs.Revision < b.rs.Revision
		}
		return b.newest.Before(&a.newest)
	})
	if len(order) > maxRevisionSchemas {
		order = order[:maxRevisionSchemas]
	}
	var out []routingv1alpha1.RevisionSchema
	for _, rev := range order {
		e := byRev[rev]
		if len(e.rs.Shards) > 64 {
			e.rs.Shards = e.rs.Shards[:64]
		}
		out = append(out, e.rs)
	}
	return out
}
