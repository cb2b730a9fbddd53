package rollout

import (
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Compute decides what to do next for one RoutingService. It is pure: the same Observed gives the
// same Plan, and it reads nothing but its argument. Work is dispatched in priority order, each
// stage able to stop the ones after it:
//
//  1. the schema gate: the update revision's schema must be confirmed by the success of a migration
//     Job this RoutingService owns, and the migration Job is created when it is not (schema.go);
//  2. paused: nothing is scaled;
//  3. a failed update revision: roll back or halt, as strategy.failurePolicy says (failure.go);
//  4. shard steps: promote the update revision one shard at a time (promote.go);
//  5. once the update revision is promoted everywhere it becomes the stable revision;
//  6. cleanup of old ReplicaSets beyond revisionHistoryLimit (cleanup.go);
//
// and the status, conditions included, is computed last, in one place (status.go).
func Compute(o Observed) Plan {
	p := newPlanner(o)
	p.gateOpen = p.schemaGate()
	p.retryRollout()
	switch {
	case p.rsvc.Spec.Paused:
		p.setActivity(routingv1alpha1.ReasonPaused, "spec.paused is true: nothing is scaled until it is false")
		p.pauseSteps()
	case p.failed():
		p.handleFailure()
	case p.gateOpen:
		p.promote()
	case p.activityReason == "":
		p.setActivity(routingv1alpha1.ReasonWaitingForSchema, fmt.Sprintf("revision %s waits for schema %s; every shard keeps serving what it serves", p.update, p.rsvc.Spec.Schema.Version))
	}
	p.markStable()
	p.cleanup()
	p.summarize()
	if p.retry != "" && !p.retryWaiting {
		p.event(false, EventRetryIgnored, "retry %q: no failed migration or shard to retry; nothing changed", p.retry)
		p.useRetry()
	}
	if p.promoteToken != "" {
		p.event(false, EventPromoteIgnored, "promote %q: no shard is baking; nothing changed", p.promoteToken)
	}
	p.plan.Status = *p.status
	return p.plan
}

// planner holds one computation. Its fields are derived from Observed once, up front.
type planner struct {
	rsvc   *routingv1alpha1.RoutingService
	now    time.Time
	update string
	// shards groups the ReplicaSets this RoutingService controls by shard name, oldest first.
	shards map[string]*shardSet
	jobs   []ownedJob

	status *routingv1alpha1.RoutingServiceStatus
	plan   Plan

	gateOpen bool
	pods     []*corev1.Pod
	// retry and promote are new control annotation values to act on in this reconcile; they are
	// set to "" once used.
	retry, promoteToken string
	// retryWaiting: a retry waits for the previous attempt's pods to stop; it is not yet handled.
	retryWaiting                    bool
	activityReason, activityMessage string
	stallReason, stallMessage       string
}

type shardSet struct {
	all   []*appsv1.ReplicaSet
	byRev map[string]*appsv1.ReplicaSet
}

func newPlanner(o Observed) *planner {
	rsvc := o.RoutingService
	p := &planner{
		rsvc:   rsvc,
		now:    o.Now.Truncate(time.Second),
		update: Revision(&rsvc.Spec),
		shards: map[string]*shardSet{},
		status: rsvc.Status.DeepCopy(),
	}
	for _, rs := range o.ReplicaSets {
		if !metav1.IsControlledBy(rs, rsvc) || rs.DeletionTimestamp != nil || rs.Labels[LabelComponent] != ComponentRouting {
			continue
		}
		shard := rs.Labels[LabelShard]
		set := p.shards[shard]
		if set == nil {
			set = &shardSet{byRev: map[string]*appsv1.ReplicaSet{}}
			p.shards[shard] = set
		}
		set.all = append(set.all, rs)
		set.byRev[rs.Labels[LabelRevision]] = rs
	}
	for _, set := range p.shards {
		sort.SliceStable(set.all, func(i, j int) bool {
			a, b := set.all[i].CreationTimestamp, set.all[j].CreationTimestamp
			if a.Equal(&b) {
				return set.all[i].Name < set.all[j].Name
			}
			return a.Before(&b)
		})
	}
	p.jobs = ownedJobs(rsvc, o.Jobs)
	p.pods = o.Pods

	p.status.ObservedGeneration = rsvc.Generation
	p.status.UpdateRevision = p.update
	if p.status.Failure != nil && p.status.Failure.Revision != p.update {
		// A new spec supersedes the failed revision: nothing to clean up by hand (scenario S-07).
		p.status.Failure = nil
	}
	p.handleAbort()
	if token := p.rsvc.Annotations[routingv1alpha1.AnnotationRetry]; token != p.status.LastHandledRetry {
		// Recorded as handled only when acted on (useRetry), since a retry may have to wait.
		p.retry = token
	}
	p.promoteToken = p.newControl(routingv1alpha1.AnnotationPromote, &p.status.LastHandledPromote)
	for _, shard := range rsvc.Spec.Shards {
		// Steps describe the update revision; a new one starts every shard at Pending.
		if ss := p.shardStatus(shard.Name); ss.StepRevision != p.update {
			ss.StepRevision, ss.Step, ss.StepStartTime = p.update, routingv1alpha1.ShardStepPending, nil
		}
	}
	return p
}

// newControl returns the value of a control annotation if it is new, recording it as handled.
func (p *planner) newControl(annotation string, handled *string) string {
	token := p.rsvc.Annotations[annotation]
	if token == "" || token == *handled {
		return ""
	}
	*handled = token
	return token
}

// pauseSteps returns a shard that was progressing to Pending, so that when the rollout resumes
// its step starts again with a fresh progress deadline (time paused does not count against it,
// as for a paused Deployment).
func (p *planner) pauseSteps() {
	for i := range p.status.Shards {
		if ss := &p.status.Shards[i]; ss.StepRevision == p.update && ss.Step == routingv1alpha1.ShardStepProgressing {
			ss.Step, ss.StepStartTime = routingv1alpha1.ShardStepPending, nil
		}
	}
}

// useRetry records the retry annotation's value as handled.
func (p *planner) useRetry() {
	p.status.LastHandledRetry = p.retry
	p.retry = ""
}

// retryRollout acts on a retry of a failed revision: the failure is cleared and the failed
// shard's step starts again.
func (p *planner) retryRollout() {
	if p.retry == "" || !p.failed() || p.status.Failure.Reason == routingv1alpha1.ReasonAborted {
		return
	}
	f := p.status.Failure
	for i := range p.status.Shards {
		if ss := &p.status.Shards[i]; ss.Name == f.Shard {
			ss.Step, ss.StepStartTime = routingv1alpha1.ShardStepPending, nil
		}
	}
	p.event(false, EventRolloutRetried, "retry %q: revision %s is tried again from shard %s", p.retry, p.update, f.Shard)
	p.status.Failure = nil
	p.useRetry()
}

// failed reports whether the update revision's rollout failed or was aborted.
func (p *planner) failed() bool {
	return p.status.Failure != nil && p.status.Failure.Revision == p.update
}

// handleAbort acts once on each new value of the schemagate.io/abort annotation: a rollout in
// progress fails with reason Aborted and is rolled back; with nothing in progress only an Event
// says so (scenario S-09).
func (p *planner) handleAbort() {
	token := p.rsvc.Annotations[routingv1alpha1.AnnotationAbort]
	if token == "" || token == p.status.LastHandledAbort {
		return
	}
	p.status.LastHandledAbort = token
	// In progress: the update revision is not yet the stable one (a first rollout included: with no
	// stable revision to return to, an abort halts it).
	inProgress := p.status.StableRevision != p.update && !p.failed()
	if !inProgress {
		p.event(false, EventAbortIgnored, "abort %q: no rollout is in progress; nothing changed", token)
		return
	}
	p.status.Failure = &routingv1alpha1.RolloutFailure{
		Revision: p.update,
		Reason:   routingv1alpha1.ReasonAborted,
		Message:  fmt.Sprintf("the rollout of revision %s was aborted (%s=%q)", p.update, routingv1alpha1.AnnotationAbort, token),
		Time:     metav1.Time{Time: p.now},
	}
	p.event(true, EventAborted, "%s; rolling back to stable revision %s", p.status.Failure.Message, p.status.StableRevision)
}

func (p *planner) setActivity(reason, message string) {
	p.activityReason, p.activityMessage = reason, message
}

func (p *planner) stall(reason, message string) {
	p.stallReason, p.stallMessage = reason, message
}

func (p *planner) event(warning bool, reason, format string, args ...any) {
	p.plan.Events = append(p.plan.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// measure attaches a phase duration to the last Event.
func (p *planner) measure(phase, shard string, d time.Duration) {
	if n := len(p.plan.Events); n > 0 && d >= 0 {
		p.plan.Events[n-1].Measures = append(p.plan.Events[n-1].Measures, Measure{Phase: phase, Shard: shard, Duration: d})
	}
}

// since is how long ago t was (0 when t is unset).
func (p *planner) since(t *metav1.Time) time.Duration {
	if t == nil {
		return 0
	}
	return p.now.Sub(t.Time)
}

// requeueAt asks to be called again at t (if no watch event comes first).
func (p *planner) requeueAt(t time.Time) {
	d := t.Sub(p.now)
	if d < time.Second {
		d = time.Second
	}
	if p.plan.RequeueAfter == 0 || d < p.plan.RequeueAfter {
		p.plan.RequeueAfter = d
	}
}

func (p *planner) act(a Action) { p.plan.Actions = append(p.plan.Actions, a) }

// shardStatus returns the status entry of shard name, creating it (Pending) when missing.
func (p *planner) shardStatus(name string) *routingv1alpha1.ShardStatus {
	for i := range p.status.Shards {
		if p.status.Shards[i].Name == name {
			return &p.status.Shards[i]
		}
	}
	p.status.Shards = append(p.status.Shards, routingv1alpha1.ShardStatus{Name: name, Step: routingv1alpha1.ShardStepPending})
	return &p.status.Shards[len(p.status.Shards)-1]
}

func (p *planner) budget(shard routingv1alpha1.ShardSpec) Budget {
	return ResolveBudget(shard.Replicas, p.rsvc.Spec.Strategy.MaxSurge, p.rsvc.Spec.Strategy.MaxUnavailable)
}

func (p *planner) set(shard string) *shardSet {
	if s := p.shards[shard]; s != nil {
		return s
	}
	return &shardSet{byRev: map[string]*appsv1.ReplicaSet{}}
}

// counts reads a ReplicaSet's numbers for Step. Available pods above spec.replicas are being
// removed by the ReplicaSet controller (which removes unavailable pods first), so they are not
// counted: right after a scale-down from 3 to 2, status may still say 3 available, and counting 3
// would let the next step take away a pod that is already going (found by the I2 checker).
func counts(rs *appsv1.ReplicaSet) Counts {
	if rs == nil {
		return Counts{}
	}
	spec := replicasOf(rs)
	return Counts{Spec: spec, Available: min(rs.Status.AvailableReplicas, spec)}
}

// complete reports whether revision alone serves the shard: its ReplicaSet asks for replicas and
// has them all available (as of its current generation), and every other ReplicaSet of the shard
// is scaled to 0 with no pods left.
func (s *shardSet) complete(revision string, replicas int32) bool {
	for _, rs := range s.all {
		if rs.Labels[LabelRevision] == revision {
			continue
		}
		if replicasOf(rs) != 0 || rs.Status.Replicas != 0 {
			return false
		}
	}
	target := s.byRev[revision]
	if target == nil {
		return replicas == 0
	}
	return replicasOf(target) == replicas &&
		target.Status.ObservedGeneration >= target.Generation &&
		target.Status.AvailableReplicas >= replicas &&
		target.Status.Replicas == replicas
}

// rollTowards plans one rolling step of shard towards revision within budget: create revision's
// ReplicaSet if missing, scale it up, and scale the shard's other ReplicaSets down (Step).
func (p *planner) rollTowards(shard routingv1alpha1.ShardSpec, revision string, b Budget, why string) {
	set := p.set(shard.Name)
	target := set.byRev[revision]
	var others []*appsv1.ReplicaSet
	var otherCounts []Counts
	for _, rs := range set.all {
		if rs != target {
			others = append(others, rs)
			otherCounts = append(otherCounts, counts(rs))
		}
	}
	newTarget, newOthers := Step(b, counts(target), otherCounts)
	switch {
	case target == nil:
		p.act(Action{Kind: CreateReplicaSet, ReplicaSet: NewReplicaSet(p.rsvc, shard, revision, newTarget),
			Note: fmt.Sprintf("%s: shard %s gets revision %s", why, shard.Name, revision)})
	case newTarget != replicasOf(target):
		p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: target, Replicas: newTarget,
			Note: fmt.Sprintf("%s: revision %s in shard %s (replicas %d, surge %d)", why, revision, shard.Name, b.Replicas, b.Surge)})
	}
	for i, rs := range others {
		if newOthers[i] != replicasOf(rs) {
			p.act(Action{Kind: ScaleReplicaSet, ReplicaSet: rs, Replicas: newOthers[i],
				Note: fmt.Sprintf("%s: scale down revision %s in shard %s, keeping %d available", why, rs.Labels[LabelRevision], shard.Name, b.MinAvailable())})
		}
	}
}
