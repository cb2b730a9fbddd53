package preview

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// The gate decision of plan is not a second model of the manager: it is the manager's own planner
// (rollout.Compute) run once on what plan read, as the first reconcile after `kubectl apply` would
// run it. Two models of one gate disagree one day, and a CI gate must never say "fine" where the
// manager refuses.

// Read is what plan read from the cluster beside the live RoutingService: the objects labelled
// with its name (schemagate.io/name), the lists the manager's reconcile observes.
type Read struct {
	// ReplicaSets are its ReplicaSets: the revisions that serve, and the schema range each
	// records.
	ReplicaSets []appsv1.ReplicaSet
	// Jobs are its migration, check, contract and shard-check Jobs: the schema evidence and the
	// attempts.
	Jobs []batchv1.Job
	// Pods are its pods: the Jobs' pods (their schema reports) and the routing pods.
	Pods []corev1.Pod
	// ControllerRevisions are its revision records.
	ControllerRevisions []appsv1.ControllerRevision
	// Unread names the lists plan could not read (a list the API server refused, such as for
	// lack of permission), "" when it read every one. A Decision on partial input could say
	// "fine" where the manager refuses, so none is computed then.
	Unread string
}

// Decision is what the manager's first reconcile of the manifest decides: its planner
// (rollout.Compute) run on the live RoutingService with the manifest's spec, its ReplicaSets,
// Jobs, Pods and ControllerRevisions, at the time plan runs. With no live object (a new
// RoutingService, or --offline) it is the planner run on the manifest alone.
type Decision struct {
	// Now is the time the planner decided at: plan's clock when it ran.
	Now time.Time `json:"now"`
	// Generation is the metadata.generation the planner saw: the live object's, one more when the
	// manifest's spec differs from the live spec (as the API server counts an apply), 1 for a new
	// RoutingService.
	Generation int64 `json:"generation"`
	// SchemaReady is the SchemaReady condition of the status the planner would write: whether
	// the schema spec.schema.version needs is confirmed, and if not, why (Migrating,
	// MigrationPending for binary first, IncompatibleRevision, WaitingForContract, ...).
	SchemaReady DecidedCondition `json:"schemaReady"`
	// Stalled is the Stalled condition of that status when it is True: the manager stops and a
	// person is needed. Nil when Stalled is False or Unknown.
	Stalled *DecidedCondition `json:"stalled,omitempty"`
	// StartsMigration: the planner's actions create the migration Job of spec.schema.version.
	StartsMigration bool `json:"startsMigration"`
	// MigrationJob is the name of that Job, "" when the actions create none.
	MigrationJob string `json:"migrationJob,omitempty"`
	// BinaryFirst: the migration waits and the shards roll first, since the manifest's revision
	// also runs on the database's current schema (SchemaReady MigrationPending while the phase is
	// RollingOut).
	BinaryFirst bool `json:"binaryFirst,omitempty"`
	// Shards are the shards the planner's actions touch first, in the order of the actions: those
	// whose ReplicaSets it creates, scales or deletes, or whose shard-check Jobs it creates. Empty
	// when the first reconcile changes no shard (the migration runs first, or the gate refuses).
	Shards []string `json:"shards,omitempty"`
	// Actions are all the planner's actions, in the order the manager applies them, each with
	// its note (rollout.Action's String).
	Actions []string `json:"actions,omitempty"`

	// breaking is the message of the planner's BreakingMigration Event: the revisions a
	// migration started with allowBreakingMigration breaks ("" when it starts no such migration).
	breaking string
}

// DecidedCondition is a condition of the status the planner would write.
type DecidedCondition struct {
	// Status is True, False or Unknown.
	Status metav1.ConditionStatus `json:"status"`
	// Reason is the condition's reason, one of the documented constants
	// (api/v1alpha1/reasons.go); "" when the planner set no such condition.
	Reason string `json:"reason"`
	// Message is the condition's message, as the manager would write it.
	Message string `json:"message"`
}

// Refusal says why the manager would refuse the manifest or stop on it: Stalled=True (a person
// is needed) or SchemaReady IncompatibleRevision; "" when it would not.
func (d *Decision) Refusal() string {
	switch {
	case d == nil:
		return ""
	case d.Stalled != nil:
		return fmt.Sprintf("Stalled=True %s: %s", d.Stalled.Reason, d.Stalled.Message)
	case d.SchemaReady.Reason == routingv1alpha1.ReasonIncompatibleRevision:
		return fmt.Sprintf("SchemaReady=%s %s: %s", d.SchemaReady.Status, d.SchemaReady.Reason, d.SchemaReady.Message)
	}
	return ""
}

// ComputeDecided is ComputeWith with the manager's Decision (Decide) at now: the expand gate's
// verdict in the risks is the planner's, and Refused says when the manager would refuse.
func ComputeDecided(live, next *routingv1alpha1.RoutingService, read Read, now time.Time) Preview {
	d, why := Decide(live, next, read, now)
	return compute(live, next, read.ReplicaSets, d, why)
}

// Decide runs the manager's planner on what plan read, as the first reconcile of the manifest
// would (see Decision). It returns no Decision, and why, when plan cannot see what the manager
// sees: a shard in another cluster (plan reads only the RoutingService's own), a list that was
// not read, or a RoutingService being deleted (the manager then finalizes, it does not plan).
func Decide(live, next *routingv1alpha1.RoutingService, read Read, now time.Time) (*Decision, string) {
	if why := undecidable(live, next, read); why != "" {
		return nil, why
	}
	o := observed(live, next, read, now)
	plan := rollout.Compute(o)
	return decisionOf(plan, o.RoutingService.Generation, now), ""
}

// undecidable says why no Decision can be computed, "" when one can.
func undecidable(live, next *routingv1alpha1.RoutingService, read Read) string {
	for _, r := range []*routingv1alpha1.RoutingService{next, live} {
		if r == nil {
			continue
		}
		for _, s := range r.Spec.Shards {
			if s.Cluster != nil {
				return fmt.Sprintf("shard %s runs in cluster %s, and plan reads only the RoutingService's own cluster", s.Name, s.Cluster.Name)
			}
		}
	}
	if live == nil {
		return ""
	}
	switch {
	case live.Annotations[routingv1alpha1.AnnotationClustersUsed] != "":
		return "its shards ran in other clusters (" + routingv1alpha1.AnnotationClustersUsed + "), and plan reads only the RoutingService's own cluster"
	case live.DeletionTimestamp != nil:
		return "the RoutingService is being deleted"
	case read.Unread != "":
		return "plan could not list its " + read.Unread
	}
	return ""
}

// observed builds the planner's input as the manager's reconcile would after the apply: the live
// object (its status as stored) with the manifest's spec, or the manifest alone, and the objects
// labelled with its name, the pods sorted as the manager sorts them (rollout.Observed.AddPod).
func observed(live, next *routingv1alpha1.RoutingService, read Read, now time.Time) rollout.Observed {
	var rsvc *routingv1alpha1.RoutingService
	if live == nil {
		rsvc = next.DeepCopy()
		rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
		rsvc.Generation = 1
	} else {
		rsvc = live.DeepCopy()
		if !equality.Semantic.DeepEqual(live.Spec, next.Spec) {
			rsvc.Spec = *next.Spec.DeepCopy()
			rsvc.Generation = live.Generation + 1
		}
	}
	o := rollout.Observed{RoutingService: rsvc, Now: now, TerminatingPods: map[types.UID]int32{}, RoutingPods: map[types.UID]int32{}}
	if live == nil {
		return o
	}
	ours := func(m metav1.ObjectMeta) bool { return m.Labels[rollout.LabelName] == rsvc.Name }
	for i := range read.ReplicaSets {
		if ours(read.ReplicaSets[i].ObjectMeta) {
			o.ReplicaSets = append(o.ReplicaSets, read.ReplicaSets[i].DeepCopy())
		}
	}
	for i := range read.Jobs {
		if ours(read.Jobs[i].ObjectMeta) {
			o.Jobs = append(o.Jobs, read.Jobs[i].DeepCopy())
		}
	}
	for i := range read.ControllerRevisions {
		if ours(read.ControllerRevisions[i].ObjectMeta) {
			o.ControllerRevisions = append(o.ControllerRevisions, read.ControllerRevisions[i].DeepCopy())
		}
	}
	for i := range read.Pods {
		if pod := &read.Pods[i]; ours(pod.ObjectMeta) {
			o.AddPod(pod.DeepCopy())
		}
	}
	return o
}

// decisionOf reads the Decision from the planner's plan.
func decisionOf(plan rollout.Plan, generation int64, now time.Time) *Decision {
	d := &Decision{Now: now, Generation: generation, SchemaReady: DecidedCondition{Status: metav1.ConditionUnknown}}
	if c := meta.FindStatusCondition(plan.Status.Conditions, routingv1alpha1.ConditionSchemaReady); c != nil {
		d.SchemaReady = DecidedCondition{Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	if c := meta.FindStatusCondition(plan.Status.Conditions, routingv1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		d.Stalled = &DecidedCondition{Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	d.BinaryFirst = d.SchemaReady.Reason == routingv1alpha1.ReasonMigrationPending && plan.Status.Schema.Phase == routingv1alpha1.SchemaPhaseRollingOut
	touch := func(shard string) {
		if shard != "" && !slices.Contains(d.Shards, shard) {
			d.Shards = append(d.Shards, shard)
		}
	}
	for _, a := range plan.Actions {
		d.Actions = append(d.Actions, a.String())
		switch a.Kind {
		case rollout.CreateJob:
			switch a.Job.Labels[rollout.LabelComponent] {
			case rollout.ComponentMigration:
				d.StartsMigration, d.MigrationJob = true, a.Job.Name
			case rollout.ComponentShardCheck:
				touch(a.Job.Labels[rollout.LabelShard])
			}
		case rollout.CreateReplicaSet, rollout.ScaleReplicaSet, rollout.DeleteReplicaSet:
			touch(a.ReplicaSet.Labels[rollout.LabelShard])
		}
	}
	for _, e := range plan.Events {
		if e.Reason == rollout.EventBreakingMigration {
			d.breaking = e.Message
		}
	}
	return d
}

// writeDecision prints the Decision, or why there is none, for people.
func (p Preview) writeDecision(b *strings.Builder) {
	d := p.Decision
	if d == nil {
		fmt.Fprintf(b, "Manager's first decision: not computed: %s\n", p.Undecided)
		return
	}
	b.WriteString("Manager's first decision (its planner, on what plan read):\n")
	fmt.Fprintf(b, "  SchemaReady:  %s %s: %s\n", d.SchemaReady.Status, orUnknown(d.SchemaReady.Reason), d.SchemaReady.Message)
	if d.Stalled != nil {
		fmt.Fprintf(b, "  Stalled:      True %s: %s\n", d.Stalled.Reason, d.Stalled.Message)
	}
	if d.StartsMigration {
		fmt.Fprintf(b, "  Migration:    starts migration Job %s\n", d.MigrationJob)
	} else {
		b.WriteString("  Migration:    starts no migration Job\n")
	}
	if len(d.Shards) > 0 {
		fmt.Fprintf(b, "  Shards:       touches %s first\n", strings.Join(d.Shards, ", "))
	} else {
		b.WriteString("  Shards:       touches no shard yet\n")
	}
}
