package rollout

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Places the planner cannot see (S-43). A shard whose cluster does not answer (Connecting on the
// first reconcile after a manager restart or a leader change, Unreachable, CredentialsRefused,
// ManagedElsewhere) shows no ReplicaSets: its reconciler has no fresh list to give
// (controllers/spoke_observe.go). No ReplicaSets seen there is not nothing serving there: every
// rule that needs to know what serves or what a rollback would return to there (the expand gate
// and binary-first, the contract, the revision records kept) reads this one answer and holds while
// it is not empty, saying which place it waits for.

// unseenPlace is a shard whose pods may run where this reconcile cannot read them.
type unseenPlace struct {
	shard string
	view  ClusterView
	// since is when it was last seen answering, as status.shards[].cluster.unreachableSince
	// records it (this reconcile's time when it has just gone).
	since time.Time
	// earlier: the place is one the shard ran in before (earlier.go), not yet cleaned up.
	earlier bool
}

func (u unseenPlace) String() string {
	msg := fmt.Sprintf("shard %s's cluster %s is %s", u.shard, u.view.Name, u.view.State)
	if u.earlier {
		msg = fmt.Sprintf("shard %s's earlier place in %s is not cleaned up and its cluster is %s", u.shard, placeName(u.view.Name), u.view.State)
	}
	if u.view.Message != "" {
		msg += " (" + u.view.Message + ")"
	}
	return msg
}

// unseenPlaces are the shards of the spec whose cluster is not Reachable in this reconcile, in
// spec order. It is the planner's one answer to "where may something serve that I cannot see";
// readClusters decides which shards are frozen.
func (p *planner) unseenPlaces() []unseenPlace {
	var out []unseenPlace
	for _, shard := range p.rsvc.Spec.Shards {
		view, frozen := p.frozen[shard.Name]
		if !frozen {
			continue
		}
		out = append(out, unseenPlace{shard: shard.Name, view: view, since: p.awaySince(shard.Name)})
	}
	return out
}

func describeUnseen(list []unseenPlace) string {
	parts := make([]string, 0, len(list))
	for _, u := range list {
		parts = append(parts, u.String())
	}
	return strings.Join(parts, "; ")
}

// holdForUnseen is the expand gate's answer while a place cannot be seen and nothing seen stands
// in the migration's way: the migration to required waits, SchemaReady False with the cluster's
// reason says which place it waits for, and past unreachableDeadlineSeconds (counted from the
// longest away) Stalled says a person is needed. Nothing serving changes because of it.
func (p *planner) holdForUnseen(required string, unseen []unseenPlace) {
	first := unseen[0]
	for _, u := range unseen[1:] {
		if u.since.Before(first.since) {
			first = u
		}
	}
	reason := reasonOf(first.view.State)
	msg := fmt.Sprintf("the migration to schema %s waits: %s, so what serves there cannot be seen, and a revision serving there might not run on %s; it starts once every shard's cluster answers",
		required, describeUnseen(unseen), required)
	p.decideSchema(metav1.ConditionFalse, reason, msg)
	deadline := p.rsvc.Spec.Strategy.UnreachableDeadline()
	if !p.now.Before(first.since.Add(deadline)) {
		p.stall(reason, msg+fmt.Sprintf("; unreachable since %s, longer than unreachableDeadlineSeconds (%.0fs)", first.since.UTC().Format(time.RFC3339), deadline.Seconds()))
		return
	}
	p.requeueAt(first.since.Add(deadline))
}

// isClusterReason reports whether reason is one of the reasons reasonOf gives a cluster's state.
func isClusterReason(reason string) bool {
	switch reason {
	case routingv1alpha1.ReasonClusterUnreachable, routingv1alpha1.ReasonClusterConnecting,
		routingv1alpha1.ReasonCredentialsRefused, routingv1alpha1.ReasonManagedByAnotherHub:
		return true
	}
	return false
}
