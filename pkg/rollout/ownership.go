package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Conflict is an object that holds a name schemagate needs and that this RoutingService does not
// control. The reconciler reports one when a create fails with AlreadyExists and a live read shows
// another controller (or none); the planner finds the labelled ones itself in Observed.
type Conflict struct {
	// Kind is "Job" or "ReplicaSet".
	Kind string
	// Name is the object's name, in the RoutingService's namespace.
	Name string
	// Holder says who holds it, as Holder returns.
	Holder string
}

// Holder describes who controls obj, for a NameConflict message: "it is controlled by Kind name",
// "it has no controller" or "it is being deleted".
func Holder(obj metav1.Object) string {
	if obj.GetDeletionTimestamp() != nil {
		return fmt.Sprintf("%s is being deleted (waiting for it to go)", obj.GetName())
	}
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return fmt.Sprintf("%s is controlled by %s %s (uid %s), not by this RoutingService", obj.GetName(), ref.Kind, ref.Name, ref.UID)
	}
	return fmt.Sprintf("%s exists with no controller", obj.GetName())
}

// taken returns who holds name when an object of kind with that name exists that this
// RoutingService does not control (or controls but cannot use as evidence), else "".
func (p *planner) taken(kind, name string) string {
	for _, c := range p.conflicts {
		if c.Kind == kind && c.Name == name {
			return c.Holder
		}
	}
	switch kind {
	case "Job":
		for _, j := range p.observed.Jobs {
			if j.Name != name {
				continue
			}
			for _, oj := range append(append([]ownedJob{}, p.jobs...), p.checks...) {
				if oj.job.UID == j.UID {
					return ""
				}
			}
			if metav1.IsControlledBy(j, p.rsvc) {
				return fmt.Sprintf("%s is controlled by this RoutingService but its labels do not match its name", name)
			}
			return Holder(j)
		}
	case "ReplicaSet":
		for _, rs := range p.observed.ReplicaSets {
			if rs.Name == name && !metav1.IsControlledBy(rs, p.rsvc) && !p.adoptable(rs) {
				return Holder(rs)
			}
		}
	}
	return ""
}

// adoptable reports whether rs is an orphan that this RoutingService takes over, as the
// Deployment controller adopts ReplicaSets its selector matches: no controller, not being deleted,
// and labelled by schemagate for this RoutingService's name, a shard of its spec and a revision.
// This is how a RoutingService deleted with --cascade=orphan and applied again finds its
// ReplicaSets (S-20). Migration Jobs are never adopted: an orphaned Job is never evidence.
func (p *planner) adoptable(rs *appsv1.ReplicaSet) bool {
	if metav1.GetControllerOf(rs) != nil || rs.DeletionTimestamp != nil || rs.Namespace != p.rsvc.Namespace {
		return false
	}
	l := rs.Labels
	if l[LabelManagedBy] != ManagedByValue || l[LabelComponent] != ComponentRouting || l[LabelName] != p.rsvc.Name || l[LabelRevision] == "" {
		return false
	}
	for _, s := range p.rsvc.Spec.Shards {
		if s.Name == l[LabelShard] {
			return rs.Name == ReplicaSetName(p.rsvc.Name, s.Name, l[LabelRevision])
		}
	}
	return false
}

// adopt plans the adoption of rs: a controller reference to this RoutingService is added (with
// the observed resourceVersion, so a concurrent change wins).
func (p *planner) adopt(rs *appsv1.ReplicaSet) {
	p.act(Action{Kind: AdoptReplicaSet, ReplicaSet: rs, Note: fmt.Sprintf("orphaned ReplicaSet of shard %s, revision %s", rs.Labels[LabelShard], rs.Labels[LabelRevision])})
	p.event(false, EventReplicaSetAdopted, "adopted orphaned ReplicaSet %s (shard %s, revision %s)", rs.Name, rs.Labels[LabelShard], rs.Labels[LabelRevision])
}

// ControllerRef is the controller reference schemagate puts on what it creates or adopts.
func ControllerRef(rsvc *routingv1alpha1.RoutingService) metav1.OwnerReference {
	return controllerRef(rsvc)
}
