package rollout

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// annotationServedOrder records on a ReplicaSet the order in which revisions served its shard
// alone and fully: a decimal counter, higher is later, compared only within a shard. It is how a
// rollback knows, from the cluster alone, where each shard returns to (S-17). A counter rather than
// a time, so that no clock (a leader's clock that was ahead, a restored backup) can make a
// ReplicaSet look later than the one serving now. A ReplicaSet without it (or with a value that is
// not a number in 1..maxServedOrder) never served.
const annotationServedOrder = "schemagate.io/served-order"

// maxServedOrder bounds the counter, so that a hand-edited value cannot overflow it.
const maxServedOrder = 1_000_000_000_000

// ServedOrder returns a ReplicaSet's schemagate.io/served-order, and false when it has none or the
// value is out of range (the annotation is untrusted input).
func ServedOrder(rs *appsv1.ReplicaSet) (int64, bool) {
	v, ok := rs.Annotations[annotationServedOrder]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n >= 1 && n <= maxServedOrder
}

// SetServedOrder sets rs's schemagate.io/served-order annotation to n.
func SetServedOrder(rs *appsv1.ReplicaSet, n int64) {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[annotationServedOrder] = strconv.FormatInt(n, 10)
}

// lastServed returns the ReplicaSet of shard, other than except, that served it last: the highest
// served-order, the newer ReplicaSet on a tie. When none of them carries the annotation
// (ReplicaSets made by a schemagate before it existed) it is the stable revision's, if any.
func (p *planner) lastServed(shard string, except *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	var best *appsv1.ReplicaSet
	var bestOrder int64
	set := p.set(shard)
	for _, rs := range set.all {
		order, ok := ServedOrder(rs)
		if rs == except || !ok || p.untrusted[rs] {
			continue
		}
		if best == nil || order > bestOrder || (order == bestOrder && best.CreationTimestamp.Before(&rs.CreationTimestamp)) {
			best, bestOrder = rs, order
		}
	}
	if best == nil {
		if rs := set.byRev[p.status.StableRevision]; rs != nil && rs != except && !p.untrusted[rs] {
			return rs
		}
	}
	return best
}

// markServed records, for each shard that one ReplicaSet serves alone and fully, that it does,
// when its served-order is not already above every other ReplicaSet's in the shard. It writes once
// per shard and revision, when the revision completes a shard (or when an older schemagate's
// ReplicaSets are first seen), so the steady state writes nothing.
func (p *planner) markServed() {
	for _, shard := range p.rsvc.Spec.Shards {
		if shard.Replicas == 0 {
			continue
		}
		set := p.set(shard.Name)
		for _, rs := range set.all {
			if p.untrusted[rs] || !set.completeRS(rs, shard.Replicas) {
				continue
			}
			mine, marked := ServedOrder(rs)
			highest := int64(0)
			for _, other := range set.all {
				if n, ok := ServedOrder(other); ok && other != rs && n > highest {
					highest = n
				}
			}
			if marked && mine > highest {
				break
			}
			note := fmt.Sprintf("revision %s serves shard %s alone, with all %d replicas available", rs.Labels[LabelRevision], shard.Name, shard.Replicas)
			if highest < maxServedOrder {
				p.act(Action{Kind: MarkServed, ReplicaSet: rs, Order: highest + 1, Note: note})
				break
			}
			// An order at the bound (a hand edit): the serving ReplicaSet takes the bound and the
			// others step below it, once.
			p.act(Action{Kind: MarkServed, ReplicaSet: rs, Order: maxServedOrder, Note: note})
			for _, other := range set.all {
				if n, ok := ServedOrder(other); ok && other != rs && n >= maxServedOrder {
					p.act(Action{Kind: MarkServed, ReplicaSet: other, Order: maxServedOrder - 1,
						Note: fmt.Sprintf("shard %s: revision %s served before %s", shard.Name, other.Labels[LabelRevision], rs.Labels[LabelRevision])})
				}
			}
			break
		}
	}
}

// hasServed reports whether rs carries a valid served-order.
func hasServed(rs *appsv1.ReplicaSet) bool {
	_, ok := ServedOrder(rs)
	return ok
}

// mayRun reports whether the database is confirmed at a schema inside the range rs's revision
// runs on (revisionRange), so that its pods may run (I1), and rs is not a ReplicaSet whose
// template does not match its revision. For a revision without a declared range, that is a
// confirmed schema at or above the one it requires, as before ranges existed. Every scale-up of a
// ReplicaSet other than through the schema gate checks it; a database ahead of a revision's newest
// schema scales nothing up on it (DatabaseAhead).
func (p *planner) mayRun(rs *appsv1.ReplicaSet) bool {
	if p.untrusted[rs] {
		return false
	}
	// A ReplicaSet without the annotation (removed by hand) says nothing: it is never scaled up.
	need := RequiredSchema(rs)
	if p.awaitingCheck != "" && schemaversion.AtLeast(need, p.awaitingCheck) {
		return false
	}
	return need != "" && p.mayRunOn(p.revisionRange(rs))
}
