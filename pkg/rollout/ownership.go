package rollout

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
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
	for _, c := range p.observed.Conflicts {
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
			if ownedBy(j, p.rsvc) || p.adoptableJob(j) {
				return fmt.Sprintf("%s is a Job of an earlier RoutingService of this name, kept as this one's history and never as evidence (delete it to run it again)", name)
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
// ReplicaSets (S-20). Jobs are adopted only as history (adoptJobs): an orphaned Job is never
// evidence.
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

// EventJobAdopted is the Event of an orphaned Job adopted as history (adoptJobs).
const EventJobAdopted = "JobAdopted"

// adoptJobs plans the adoption, as history, of every orphaned Job that is provably this
// RoutingService's (adoptableJob): an owner reference to it that is not a controller reference, so
// that the garbage collector deletes the Job (and so its pods) with the RoutingService, while the
// gate, which reads only Jobs it controls, never takes it as evidence. This is what a RoutingService
// deleted with --cascade=orphan and applied again does with its earlier migration, check and
// shard-check Jobs, which would otherwise stay behind, labelled for it, for ever.
func (p *planner) adoptJobs() {
	for _, j := range p.observed.Jobs {
		if j == nil || !p.adoptableJob(j) {
			continue
		}
		p.act(Action{Kind: AdoptJob, Job: j, Note: fmt.Sprintf("orphaned %s Job, kept as history", j.Labels[LabelComponent])})
		p.event(false, EventJobAdopted, "adopted orphaned %s Job %s as history (never as evidence)", j.Labels[LabelComponent], j.Name)
	}
}

// adoptableJob reports whether j is an orphan that is provably this RoutingService's: no
// controller and no owner reference to it yet, not being deleted, in its namespace, labelled by
// schemagate with its name and a component, its pod template labelled the same, and named exactly
// as schemagate names a Job of those labels (migration: version and attempt; check: version and
// number; shard check: shard, check, revision, moment and attempt).
func (p *planner) adoptableJob(j *batchv1.Job) bool {
	if metav1.GetControllerOf(j) != nil || ownedBy(j, p.rsvc) || j.DeletionTimestamp != nil || j.Namespace != p.rsvc.Namespace {
		return false
	}
	l, name := j.Labels, p.rsvc.Name
	if l[LabelManagedBy] != ManagedByValue || l[LabelName] != name ||
		j.Spec.Template.Labels[LabelName] != name || j.Spec.Template.Labels[LabelComponent] != l[LabelComponent] {
		return false
	}
	n, err := strconv.ParseInt(l[LabelAttempt], 10, 32)
	switch l[LabelComponent] {
	case ComponentMigration:
		return err == nil && n >= 0 && l[LabelSchemaVersion] != "" && j.Name == MigrationJobName(name, l[LabelSchemaVersion], int32(n))
	case ComponentCheck:
		return err == nil && n >= 0 && l[LabelSchemaVersion] != "" && j.Name == CheckJobName(name, l[LabelSchemaVersion], int32(n))
	case ComponentContract:
		return err == nil && n >= 0 && l[LabelSchemaVersion] != "" && j.Name == ContractJobName(name, l[LabelSchemaVersion], int32(n))
	case ComponentShardCheck:
		// A shard check's attempt is in its own label; a Job of an earlier schemagate has none
		// (attempt 0, the name without a suffix).
		a, aerr := int64(0), error(nil)
		if v, ok := l[LabelCheckAttempt]; ok {
			a, aerr = strconv.ParseInt(v, 10, 32)
		}
		return aerr == nil && a >= 0 && a <= MaxShardCheckAttempt && l[LabelShard] != "" && l[LabelCheck] != "" && l[LabelRevision] != "" &&
			j.Name == ShardCheckJobName(name, l[LabelShard], l[LabelCheck], l[LabelRevision], routingv1alpha1.CheckWhen(l[LabelCheckWhen]), int32(a))
	}
	return false
}

// ownedBy reports whether obj has an owner reference, controller or not, to rsvc.
func ownedBy(obj metav1.Object, rsvc *routingv1alpha1.RoutingService) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == rsvc.UID {
			return true
		}
	}
	return false
}

// HistoryRef is the owner reference an adopted Job gets: rsvc as its owner, not its controller,
// blocking rsvc's foreground deletion like the references of what schemagate creates.
func HistoryRef(rsvc *routingv1alpha1.RoutingService) metav1.OwnerReference {
	ref := controllerRef(rsvc)
	ref.Controller = nil
	return ref
}
