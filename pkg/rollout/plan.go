package rollout

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Observed is everything the planner reads: the RoutingService as stored (spec and last status),
// the ReplicaSets and Jobs labelled with its name, and the clock. The planner itself keeps only
// the objects whose controller reference is this RoutingService.
type Observed struct {
	RoutingService *routingv1alpha1.RoutingService
	ReplicaSets    []*appsv1.ReplicaSet
	Jobs           []*batchv1.Job
	// ControllerRevisions are the revision records labelled with its name (history.go).
	ControllerRevisions []*appsv1.ControllerRevision
	// Pods are the RoutingService's pods (labelled with its name): its Jobs' pods, read for
	// schema reports and to say why a Job is stuck or failed, and its routing pods, read by the
	// pod-health gate (podhealth.go) for the update revision's restarts. The planner reads a pod
	// only through its controller reference (a Job's or a ReplicaSet's UID).
	Pods []*corev1.Pod
	// Conflicts are objects holding names the planner asked for that the RoutingService does not
	// control, found by the reconciler after a create failed with AlreadyExists (S-21).
	Conflicts []Conflict
	// Refusals are writes the API server refused in this reconcile (refusals.go): the reconciler
	// computes the plan again with them, and that plan's status says so.
	Refusals []Refusal
	// Measurements are the http and prometheus check measurements the reconciler took for the
	// requests of an earlier plan (Plan.Measurements) and has not seen recorded yet: the plan
	// records each one that is due in status, and asks for none it was given.
	Measurements []TakenMeasurement
	Now          time.Time
	// TerminatingPods counts, by the UID of the ReplicaSet that controls them, the routing pods
	// that have a deletionTimestamp. A rolling step compares it with status.terminatingReplicas
	// to tell whether the ReplicaSet controller still has a status write to make (settled.go).
	// Nil is read as no terminating pods.
	TerminatingPods map[types.UID]int32
	// RoutingPods counts every routing pod, terminating or not, by the UID of the ReplicaSet that
	// controls it ("" for a pod with no controller): the contract starts only when none is left
	// outside the update revision's ReplicaSets (contract.go). Nil: not counted (the ReplicaSets'
	// own counts and TerminatingPods still apply).
	RoutingPods map[types.UID]int32
	// Clusters describes, by shard name, the cluster of each shard with spec.shards[].cluster
	// (clusters.go). A shard with a cluster and no entry is read as Connecting: frozen.
	Clusters map[string]ClusterView
	// EarlierPlaces are the places a shard ran in before and that are not cleaned up yet (a
	// cluster schemagate.io/clusters-used records and the spec no longer names for the shard, or
	// the RoutingService's own cluster for a shard since moved to another): what still runs there
	// may serve, on the revision it ran, until the reconciler retires it (earlier.go).
	EarlierPlaces []EarlierPlace
	// Probe are the images the manager runs migration probes with (probe.go); nil: none runs.
	Probe *ProbeImages
	// ShardScales are, by shard name, the RoutingShards of the autoscaled shards that this
	// RoutingService controls (scaling.go). An autoscaled shard with no entry has the size
	// spec.shards[].replicas says.
	ShardScales map[string]ShardScale
}

// EarlierPlace is one place a shard ran in before, as this reconcile found it.
type EarlierPlace struct {
	Shard string
	// Cluster is the cluster it is in (Name "" for the RoutingService's own) and its state: only
	// a Reachable one was read, and ReplicaSets and RoutingPods say what runs there.
	Cluster ClusterView
	// ReplicaSets are the shard's ReplicaSets there that this RoutingService (or its anchor there)
	// controls.
	ReplicaSets []*appsv1.ReplicaSet
	// RoutingPods counts the shard's routing pods there, terminating ones included, by the
	// revision their label names.
	RoutingPods map[string]int32
}

// MeasurementKey names one measured check of one shard, moment and revision.
type MeasurementKey struct {
	Shard, Check, Revision string
	When                   routingv1alpha1.CheckWhen
	// Pod is the pod a check at PodReady is sent to ("" for the other moments).
	Pod string
}

// MeasurementRequest asks the reconciler to measure an http or prometheus check now: the planner
// is pure and never does I/O itself.
type MeasurementRequest struct {
	MeasurementKey
	// Check is the check as specified (its http or prometheus provider and its timeout).
	Check routingv1alpha1.ShardCheck
	// Vars are the values of the placeholders in its URL, headers or query.
	Vars map[string]string
}

// TakenMeasurement is the result of a MeasurementRequest.
type TakenMeasurement struct {
	MeasurementKey
	Result routingv1alpha1.MeasurementResult
	// Fatal marks a result no retry can change (a condition that does not compile, a URL that
	// does not parse): the check fails at once.
	Fatal bool
}

// ActionKind names a change to the cluster.
type ActionKind string

const (
	CreateReplicaSet ActionKind = "CreateReplicaSet"
	ScaleReplicaSet  ActionKind = "ScaleReplicaSet"
	DeleteReplicaSet ActionKind = "DeleteReplicaSet"
	CreateJob        ActionKind = "CreateJob"
	// SuspendJob sets a migration Job's spec.suspend, so the Job controller stops its pods.
	SuspendJob ActionKind = "SuspendJob"
	// StopJob sets a migration Job's spec.parallelism to 0 once its migration container's report
	// is recorded on it: the Job controller deletes its pods and starts no other, so a pod kept
	// running by a sidecar and then deleted is not replaced by one that runs the migration again
	// (sidecar.go). The Job stays active until its activeDeadlineSeconds, as before.
	StopJob ActionKind = "StopJob"
	// DeleteJob deletes a finished Job beyond spec.strategy.jobHistoryLimit, with its pods
	// (propagation Background; jobs_history.go).
	DeleteJob ActionKind = "DeleteJob"
	// AdoptReplicaSet adds a controller reference to an orphaned ReplicaSet (S-20).
	AdoptReplicaSet ActionKind = "AdoptReplicaSet"
	// AdoptJob adds HistoryRef, an owner reference that is not a controller reference, to an
	// orphaned Job of this RoutingService (ownership.go): it goes with the RoutingService and is
	// never evidence.
	AdoptJob ActionKind = "AdoptJob"
	// AnnotateJob sets Annotations on a Job schemagate controls (merge patch): the schema report
	// of a migration container that terminated while its Job still runs (sidecar.go).
	AnnotateJob ActionKind = "AnnotateJob"
	// MarkServed sets a ReplicaSet's schemagate.io/served-order annotation to Order: its revision
	// serves the shard alone and fully, later than any other ReplicaSet of the shard did. Rollbacks return a shard to the ReplicaSet that served
	// it last, and the annotation keeps that fact in the cluster, so a lost status write cannot
	// change the outcome (S-17).
	MarkServed ActionKind = "MarkServed"
	// RecordControls sets the annotations in Annotations on a ReplicaSet: the control values
	// (abort, retry, promote) handled last, kept in the cluster so that a lost or restored status
	// never makes an old value act again (controls.go). Applied as a merge patch of those
	// annotations alone, without a resourceVersion: it changes nothing another writer owns.
	RecordControls ActionKind = "RecordControls"
	// CreateRecord creates Record, the revision record of the update revision (history.go).
	CreateRecord ActionKind = "CreateRecord"
	// AdoptRecord adds a controller reference to Record, an orphaned verified revision record.
	AdoptRecord ActionKind = "AdoptRecord"
	// DeleteRecord deletes Record, a revision record no ReplicaSet needs any more, or one that does
	// not verify.
	DeleteRecord ActionKind = "DeleteRecord"
	// SetPodCheck sets PodCondition, the readiness gate routingv1alpha1.PodCheckGate, in Pod's
	// status (a strategic merge patch of that one condition, with Pod's UID as a precondition):
	// the result of the check at PodReady on that pod (podcheck.go).
	SetPodCheck ActionKind = "SetPodCheck"
)

// Action is one intended change. The reconciler applies actions in order and stops at the first
// error; each action is safe on its own, so a partial apply never breaks an invariant.
type Action struct {
	Kind ActionKind
	// ReplicaSet is the object to create, or the observed object to scale or delete.
	ReplicaSet *appsv1.ReplicaSet
	// Replicas is the new spec.replicas for ScaleReplicaSet.
	Replicas int32
	// RemovePods, on a ScaleReplicaSet to 0 in a promotion step, asks the reconciler to delete the
	// ReplicaSet's pods itself once the scale is written, rather than leave each deletion to the
	// ReplicaSet controller (controllers/drain.go says why). Set only for a ReplicaSet whose
	// revision may run (so a pod the ReplicaSet controller might briefly recreate breaks no
	// invariant), never in a rollback.
	RemovePods bool
	// Pod and PodCondition are SetPodCheck's pod and the condition it sets.
	Pod          *corev1.Pod
	PodCondition corev1.PodCondition
	// Job is the Job to create, or the observed Job to suspend.
	Job *batchv1.Job
	// Record is the revision record to create, or the observed one to adopt or delete.
	Record *appsv1.ControllerRevision
	// Order is the served-order for MarkServed.
	Order int64
	// Annotations are the annotations RecordControls sets on a ReplicaSet, or AnnotateJob on a
	// Job.
	Annotations map[string]string
	// Note says why, for logs and golden tests.
	Note string
}

func (a Action) String() string {
	switch a.Kind {
	case CreateJob, SuspendJob, StopJob, DeleteJob, AdoptJob, AnnotateJob:
		return fmt.Sprintf("%s %s: %s", a.Kind, a.Job.Name, a.Note)
	case CreateRecord, AdoptRecord, DeleteRecord:
		return fmt.Sprintf("%s %s: %s", a.Kind, a.Record.Name, a.Note)
	case ScaleReplicaSet:
		return fmt.Sprintf("%s %s %d→%d: %s", a.Kind, a.ReplicaSet.Name, replicasOf(a.ReplicaSet), a.Replicas, a.Note)
	case CreateReplicaSet:
		return fmt.Sprintf("%s %s replicas=%d: %s", a.Kind, a.ReplicaSet.Name, replicasOf(a.ReplicaSet), a.Note)
	case SetPodCheck:
		return fmt.Sprintf("%s %s %s=%s: %s", a.Kind, a.Pod.Name, a.PodCondition.Type, a.PodCondition.Status, a.Note)
	default:
		return fmt.Sprintf("%s %s: %s", a.Kind, a.ReplicaSet.Name, a.Note)
	}
}

// Event is a Kubernetes Event to record on the RoutingService for a transition.
type Event struct {
	Warning bool
	Reason  string
	Message string
	// Measures are the durations of the phases this transition ends.
	Measures []Measure
	// Check names the check of spec.strategy.checks whose outcome this Event records (its
	// Reason: ShardCheckPassed, ShardCheckFailed or ShardCheckInconclusive); empty otherwise.
	Check string
	// Shard names the shard a ShardRolledBack Event is about (the manager counts rollbacks per
	// shard: schemagate_shard_rollbacks_total); empty otherwise.
	Shard string
}

// Plan is the planner's answer: the actions to apply, the status to write (written only when it
// differs from the stored one), the Events of the transitions, and when to look again if no watch
// event comes first (0: only on watch events).
type Plan struct {
	Actions      []Action
	Status       routingv1alpha1.RoutingServiceStatus
	Events       []Event
	RequeueAfter time.Duration
	// Measurements are the checks to measure now. The reconciler starts them in the background;
	// the reconcile after they finish observes their results (Observed.Measurements).
	Measurements []MeasurementRequest
	// DisruptionBudgets are the PodDisruptionBudgets the shards should have
	// (DesiredDisruptionBudgets; none when spec.disruptionBudget.enabled is false). The
	// reconciler makes each cluster match, the hub's shards' in the hub and a cluster shard's in
	// its cluster, before it applies the actions; a budget the API server refuses comes back as
	// an Observed.Refusal, which holds that shard's rolling steps.
	DisruptionBudgets []*policyv1.PodDisruptionBudget
	// Places are the clusters the spec's shards run in (places.go): recorded, and their anchors
	// made to exist, before anything else is written.
	Places []Place
	// RoutingShards are the scale targets of the autoscaled shards (DesiredRoutingShards): the
	// reconciler creates the missing ones and writes their status when it differs; it never
	// writes the spec.replicas of one that exists.
	RoutingShards []*routingv1alpha1.RoutingShard
	// Autoscalers are the HorizontalPodAutoscalers schemagate owns, one per shard with
	// autoscaling.scaler HorizontalPodAutoscaler (DesiredAutoscalers).
	Autoscalers []*autoscalingv2.HorizontalPodAutoscaler
}

func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}
