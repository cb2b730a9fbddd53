package rollout

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// annotationServedAt records on a ReplicaSet when its revision last served its shard alone and
// fully (RFC 3339, seconds). It is how a rollback knows, from the cluster alone, where each shard
// returns to (S-17); a ReplicaSet without it (or with a value that does not parse) never served.
const annotationServedAt = "schemagate.io/served-at"

// ServedAt returns a ReplicaSet's schemagate.io/served-at time, and false when it has none or the
// value is not an RFC 3339 time (the annotation is untrusted input).
func ServedAt(rs *appsv1.ReplicaSet) (time.Time, bool) {
	v, ok := rs.Annotations[annotationServedAt]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// SetServedAt sets rs's schemagate.io/served-at annotation to t.
func SetServedAt(rs *appsv1.ReplicaSet, t time.Time) {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[annotationServedAt] = t.UTC().Format(time.RFC3339)
}

// lastServed returns the ReplicaSet of shard, other than except, that served it last: the latest
// served-at time, the newer ReplicaSet on a tie. When none of them carries the annotation
// (ReplicaSets made by a schemagate before it existed) it is the stable revision's, if any.
func (p *planner) lastServed(shard string, except *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var best *appsv1.ReplicaSet
	var bestAt time.Time
	set := p.set(shard)
	for _, rs := range set.all {
		at, ok := ServedAt(rs)
		if rs == except || !ok {
			continue
		}
		if best == nil || at.After(bestAt) || (at.Equal(bestAt) && best.CreationTimestamp.Before(&rs.CreationTimestamp)) {
			best, bestAt = rs, at
		}
	}
	if best == nil {
		if rs := set.byRev[p.status.StableRevision]; rs != nil && rs != except {
			return rs
		}
	}
	return best
}

// markServed records, for each shard that one ReplicaSet serves alone and fully, that it does, when
// it is not already the shard's last-served ReplicaSet. It writes once per shard and revision, when
// the revision completes a shard (or when an older schemagate's ReplicaSets are first seen).
func (p *planner) markServed() {
	for _, shard := range p.rsvc.Spec.Shards {
		if shard.Replicas == 0 || p.mismatch[shard.Name] != "" {
			continue
		}
		set := p.set(shard.Name)
		for _, rs := range set.all {
			if !set.completeRS(rs, shard.Replicas) {
				continue
			}
			if _, ok := ServedAt(rs); ok && p.lastServed(shard.Name, nil) == rs {
				break
			}
			p.act(Action{Kind: MarkServed, ReplicaSet: rs, Time: p.now,
				Note: fmt.Sprintf("revision %s serves shard %s alone, with all %d replicas available", rs.Labels[LabelRevision], shard.Name, shard.Replicas)})
			break
		}
	}
}

// mayRun reports whether the schema rs's revision requires is confirmed, so that its pods may run
// (I1). Every scale-up of a ReplicaSet other than through the schema gate checks it.
func (p *planner) mayRun(rs *appsv1.ReplicaSet) bool {
	need := RequiredSchema(rs)
	return need == "" || schemaversion.AtLeast(p.status.Schema.ConfirmedVersion, need)
}
