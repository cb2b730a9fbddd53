package rollout

import (
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/controls"
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
	p.plan.Places = places(p.rsvc, p.status.StableRevision, p.update)
	p.gateOpen = p.schemaGate()
	paused := p.rsvc.Spec.Paused
	if !paused {
		p.retryRollout()
	} else if p.retry != "" {
		// S-16: a retry while paused is kept, unhandled, and acts once unpaused.
		p.retryWaiting = true
	}
	// Pods waiting for the check at PodReady are measured whatever else holds: a pod's gate
	// scales nothing, and a paused or failed rollout still needs its pods Ready.
	p.podChecks()
	switch {
	case paused:
		p.setActivity(routingv1alpha1.ReasonPaused, "spec.paused is true: nothing is scaled and no migration starts until it is false")
		p.pauseSteps()
	case p.failed():
		p.handleFailure()
	case p.checksInvalid():
	case p.gateOpen || p.binaryFirst:
		p.promote()
	case p.activityReason == "":
		p.setActivity(routingv1alpha1.ReasonWaitingForSchema, fmt.Sprintf("revision %s waits for schema %s; every shard keeps serving what it serves", p.update, p.rsvc.Spec.Schema.Version))
	}
	if !paused {
		p.resize()
		p.markServed()
		p.markStable()
		p.recordPromotions()
		p.cleanup()
		p.keepHistory()
	}
	// The contract phase (contract.go), once the shard steps are known; held with the schema
	// gate while the schema Jobs' cluster does not answer (holdSchemaPlace).
	if _, _, held := p.schemaPlaceFrozen(); !held {
		p.contract()
	} else if p.rsvc.Spec.Schema.Contract != nil {
		p.contractPhase = p.rsvc.Status.Schema.Phase // the phase stays as it was
	}
	p.reportRefusals()
	p.dropFrozenActions()
	p.writeSchemaConditions()
	p.summarize()
	p.clustersCondition()
	if p.retry != "" && !p.retryWaiting {
		p.event(false, EventRetryIgnored, "retry %q: no failed migration or shard to retry; nothing changed", p.retry)
		p.useRetry()
	}
	if p.promoteToken != "" && !paused {
		p.event(false, EventPromoteIgnored, "promote %q: no shard is baking; nothing changed", p.promoteToken)
	}
	p.recordControls()
	// The records are written where they can be: none to a shard whose cluster is frozen (it
	// gets them once it answers).
	p.dropFrozenActions()
	p.plan.Actions = append(p.plan.Actions, p.podActions...)
	// Budgets are resolved against spec.shards[].replicas as written, so an autoscaler's
	// changes never rewrite them.
	p.plan.DisruptionBudgets = DesiredDisruptionBudgets(p.observed.RoutingService)
	p.plan.RoutingShards = DesiredRoutingShards(p.observed.RoutingService, p.status, p.observed.ReplicaSets)
	p.plan.Autoscalers = DesiredAutoscalers(p.observed.RoutingService)
	p.plan.Status = *p.status
	return p.plan
}

// planner holds one computation. It is made of the view (built once, read-only after newPlanner)
// and the state each concern decides in this reconcile; each part is a struct of its own, so a
// reader sees which fields a stage may write.
type planner struct {
	observedView
	controlState
	schemaState
	stepState
	result
}

// observedView is what this reconcile observed, with trust decided: built by newPlanner and the
// builders it calls (view.go, history.go, clusters.go, controls.go), and read-only after it
// returns (TestViewIsReadOnly).
type observedView struct {
	// rsvc is the observed RoutingService, with each autoscaled shard's replicas replaced by the
	// size shardSizes decided (scaling.go); observed.RoutingService is the object as read.
	rsvc     *routingv1alpha1.RoutingService
	observed Observed
	// scaling is what status.shards[].scaling says of each autoscaled shard (scaling.go).
	scaling map[string]*routingv1alpha1.ShardScalingStatus
	now     time.Time
	update  string
	// shards groups the ReplicaSets this RoutingService controls (or adopts now) by shard name,
	// oldest first.
	shards map[string]*shardSet
	jobs   []ownedJob
	// checks are the check Jobs (spec.schema.check) that count as evidence, like jobs.
	checks []ownedJob
	// contracts are the contract Jobs (spec.schema.contract) that count as evidence (contract.go).
	contracts []ownedJob
	// probes are the migration probe Jobs that count, with what each found; breakingFrom, the
	// versions the breaking ones that still speak for the database start from (probe.go).
	probes       []probeRun
	breakingFrom []string
	// frozen are the shards whose cluster is not Reachable, with what is known of it
	// (clusters.go): no action touches them and they are never counted as promoted.
	frozen map[string]ClusterView
	// shifted is, by shard, how far this reconcile moved its stepStartTime and progressStartTime
	// forward for a cluster that was away (clusters.go): the pod-health gate still counts the
	// restarts of that time (podhealth.go).
	shifted map[string]time.Duration
	// handledRecords are, per record annotation, the control values the ReplicaSets record as
	// handled, oldest first (controls.go).
	handledRecords map[string][]string
	trust
}

// trust is which ReplicaSets and records the view believes (view.go, history.go).
type trust struct {
	// mismatch[shard] explains why the ReplicaSet named for the update revision in shard is not
	// that revision: it runs another template (S-22), or its name is held by another object (S-21).
	mismatch map[string]string
	// mismatchReason[shard] is NameConflict or TemplateMismatch.
	mismatchReason map[string]string
	// untrusted are ReplicaSets that carry the update revision's name but another template: never
	// scaled up, never the serving set, never a rollback target.
	untrusted map[*appsv1.ReplicaSet]bool
	// records are the verified revision records, by revision; verifiedRecords, the observed
	// records that verify (history.go).
	records         map[string]*routingv1alpha1.RoutingServiceSpec
	verifiedRecords map[*appsv1.ControllerRevision]bool
}

// controlState is the controls (annotations) read and handled in this reconcile (controls.go).
type controlState struct {
	// approval is a new schemagate.io/approve-contract value, not yet used; approveHandled is the
	// value handled last (recorded on the ReplicaSets only: controls.go).
	approval, approveHandled string
	// retry and promoteToken are new control annotation values to act on in this reconcile; they
	// are set to "" once used.
	retry, promoteToken string
	// retryWaiting: a retry waits (for the previous attempt's pods to stop, or for spec.paused to
	// be false); it is not yet handled.
	retryWaiting bool
	// abortedNow: an abort was handled in this reconcile; a retry read with it does not undo it.
	abortedNow bool
}

// schemaState is what the schema gate and the contract decided in this reconcile (schema.go,
// lifecycle.go, contract.go).
type schemaState struct {
	// readings are what the finished migration and check Jobs say about the database, oldest
	// first (evidence.go).
	readings []*reading
	gateOpen bool
	// binaryFirst: the migration to spec.schema.version waits for the shards to roll, since the
	// update revision runs on the database's current version and a revision that serves (or a
	// rollback target) does not run on the required one (lifecycle.go); promotion goes on.
	binaryFirst bool
	// breaking names the revisions a migration started with allowBreakingMigration breaks.
	breaking string
	// holding: the gate is closed while lost evidence is re-established (a check Job runs, or a
	// steady RoutingService has none configured), and the conditions stay as they were (S-23).
	holding bool
	// awaitingCheck: with check.afterMigration, the migration's report confirms this version but
	// the check has not yet; nothing needing it or more may run meanwhile.
	awaitingCheck string
	// contractPhase is the lifecycle phase the contract decided in this reconcile (contract.go);
	// lifecycle() sets status.schema.phase from it.
	contractPhase routingv1alpha1.SchemaPhase
}

// stepState is what the shard steps and their checks did in this reconcile (promote.go,
// rollstep.go, shardchecks.go, podcheck.go).
type stepState struct {
	// stepped records the shards whose ReplicaSets a rolling step or a rollback already acted on in
	// this reconcile; resize leaves them alone.
	stepped map[string]bool
	// promotedNow: a shard became Promoted in this reconcile.
	promotedNow bool
	// inconclusive says which check holds a shard as inconclusive, if one does (issue 11), and
	// since when; checkConflict, which check's Job name is held by another object.
	inconclusive      string
	inconclusiveSince time.Time
	checkConflict     string
	// podActions are the SetPodCheck actions of the check at PodReady, applied after every other
	// action of the plan (a pod gone since it was read must not hold a rolling step).
	podActions []Action
}

// result is the plan being built: its actions and Events, the status, and what the conditions
// are to say (conditions.go, status.go).
type result struct {
	status                          *routingv1alpha1.RoutingServiceStatus
	plan                            Plan
	activityReason, activityMessage string
	stallReason, stallMessage       string
	// verdicts are what SchemaReady and ContractReady are to say (conditions.go).
	verdicts verdicts
}

type shardSet struct {
	all   []*appsv1.ReplicaSet
	byRev map[string]*appsv1.ReplicaSet
}

func newPlanner(o Observed) *planner {
	update := Revision(&o.RoutingService.Spec)
	// From here on, an autoscaled shard's replicas are the size its scaler asks for (scaling.go).
	rsvc, scaling := shardSizes(o, update)
	p := &planner{
		observedView: observedView{
			rsvc:     rsvc,
			observed: o,
			now:      plannerClock(&rsvc.Status, o.Now),
			update:   update,
			shards:   map[string]*shardSet{},
			scaling:  scaling,
			trust: trust{
				mismatch:        map[string]string{},
				mismatchReason:  map[string]string{},
				untrusted:       map[*appsv1.ReplicaSet]bool{},
				verifiedRecords: map[*appsv1.ControllerRevision]bool{},
			},
		},
		stepState: stepState{stepped: map[string]bool{}},
		result:    result{status: rsvc.Status.DeepCopy()},
	}
	p.readRecords()
	for _, rs := range o.ReplicaSets {
		if rs == nil || rs.DeletionTimestamp != nil || rs.Labels[LabelComponent] != ComponentRouting {
			continue
		}
		if !metav1.IsControlledBy(rs, rsvc) {
			if !p.adoptable(rs) {
				continue
			}
			// S-20: taken over now, and counted as ours from this reconcile on (the adoption is the
			// first action applied; if it fails, nothing after it is).
			p.adopt(rs)
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
	p.matchTemplates()
	p.trustAdopted()
	p.adoptJobs()
	p.holdRefusedBudgets()
	p.jobs = ownedJobs(rsvc, o.Jobs, ComponentMigration)
	p.checks = ownedJobs(rsvc, o.Jobs, ComponentCheck)
	p.contracts = ownedJobs(rsvc, o.Jobs, ComponentContract)
	p.probes = ownedProbes(rsvc, o, p.now)
	p.breakingFrom = breakingFroms(rsvc, p.probes, p.jobs)

	p.sanitizeStatus()
	p.readClusters()
	p.renameRevision()
	p.status.ObservedGeneration = rsvc.Generation
	p.status.UpdateRevision = p.update
	if p.status.Failure != nil && p.status.Failure.Revision != p.update {
		// A new spec supersedes the failed revision: nothing to clean up by hand (scenario S-07).
		p.status.Failure = nil
	}
	p.recoverControls()
	p.recoverFailure()
	p.handleAbort()
	if token := rsvc.Annotations[routingv1alpha1.AnnotationApproveContract]; controls.Read(token, p.approveHandled, nil) == controls.New {
		// Used (and recorded) only when it starts a contract, or when nothing needs it (contract.go).
		p.approval = token
	}
	if token := p.rsvc.Annotations[routingv1alpha1.AnnotationRetry]; controls.Read(token, p.status.LastHandledRetry, nil) == controls.New {
		// Recorded as handled only when acted on (useRetry), since a retry may have to wait.
		p.retry = token
	}
	if !rsvc.Spec.Paused {
		// While paused a promote waits, unhandled, like a retry.
		p.promoteToken = p.newControl(routingv1alpha1.AnnotationPromote, &p.status.LastHandledPromote)
	}
	for _, shard := range rsvc.Spec.Shards {
		// Steps describe the update revision; a new one starts every shard at Pending.
		ss := p.shardStatus(shard.Name)
		if ss.StepRevision != p.update {
			ss.StepRevision, ss.Step, ss.StepStartTime, ss.ProgressStartTime = p.update, routingv1alpha1.ShardStepPending, nil, nil
			ss.Checks = nil
		}
		// A Promoted step is believed only with evidence in the cluster: the shard is complete on
		// the update revision now, or its ReplicaSet has served it. Otherwise one edit of status
		// would roll every shard at once, unbaked (S-19).
		// A shard whose cluster does not answer has no fresh ReplicaSets to show: its step is
		// what it was when last seen (readClusters), never demoted for evidence it cannot give.
		if _, frozen := p.frozen[shard.Name]; ss.Step == routingv1alpha1.ShardStepPromoted && !frozen {
			set := p.set(shard.Name)
			rs := set.byRev[p.update]
			if !set.complete(p.update, shard.Replicas) && (rs == nil || !hasServed(rs)) {
				ss.Step, ss.StepStartTime, ss.ProgressStartTime = routingv1alpha1.ShardStepPending, nil, nil
			}
		}
	}
	return p
}

// newControl returns the value of a control annotation if it is new, recording it as handled.
// The ReplicaSets' records were read before (recoverControls): a value they hold is handled.
func (p *planner) newControl(annotation string, handled *string) string {
	token := p.rsvc.Annotations[annotation]
	if controls.Read(token, *handled, nil) != controls.New {
		return ""
	}
	*handled = token
	return token
}

// pauseSteps returns a shard that was progressing or baking to Pending, so that when the rollout
// resumes its step starts again with a fresh progress deadline, and its bake with a full
// bakeSeconds: time paused counts against neither (as for a paused Deployment's deadline).
func (p *planner) pauseSteps() {
	for i := range p.status.Shards {
		if ss := &p.status.Shards[i]; ss.StepRevision == p.update && (ss.Step == routingv1alpha1.ShardStepProgressing || ss.Step == routingv1alpha1.ShardStepBaking) {
			ss.Step, ss.StepStartTime, ss.ProgressStartTime = routingv1alpha1.ShardStepPending, nil, nil
		}
	}
}

// useRetry records the retry annotation's value as handled.
func (p *planner) useRetry() {
	p.status.LastHandledRetry = p.retry
	p.retry = ""
}

// retryRollout acts on a retry of a failed or aborted revision: the failure is cleared and the
// failed shard's step starts again. After an abort the rollout resumes: the shards it rolled back
// start their steps again in spec order, each with a fresh progress deadline and a full bake, as
// a person who stopped the rollout expects a retry to undo the stop. An abort read in the same
// reconcile as the retry wins: the retry is reported ignored.
func (p *planner) retryRollout() {
	if p.retry == "" || !p.failed() || p.abortedNow {
		return
	}
	f := p.status.Failure
	from := f.Shard
	p.restartChecks()
	for i := range p.status.Shards {
		ss := &p.status.Shards[i]
		if ss.Name == f.Shard || (f.Reason == routingv1alpha1.ReasonAborted && ss.Step == routingv1alpha1.ShardStepRolledBack) {
			ss.Step, ss.StepStartTime, ss.ProgressStartTime = routingv1alpha1.ShardStepPending, nil, nil
		}
	}
	if f.Reason == routingv1alpha1.ReasonAborted {
		from = p.firstUnpromoted()
		p.event(false, EventRolloutRetried, "retry %q: the aborted rollout of revision %s resumes from shard %s", p.retry, p.update, from)
	} else {
		p.event(false, EventRolloutRetried, "retry %q: revision %s is tried again from shard %s", p.retry, p.update, from)
	}
	p.status.Failure = nil
	p.useRetry()
}

// firstUnpromoted is the first shard, in spec order, whose step is not Promoted for the update
// revision ("none" when every shard is).
func (p *planner) firstUnpromoted() string {
	for _, shard := range p.rsvc.Spec.Shards {
		if ss := p.shardStatus(shard.Name); ss.StepRevision != p.update || ss.Step != routingv1alpha1.ShardStepPromoted {
			return shard.Name
		}
	}
	return "none"
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
	if controls.Read(token, p.status.LastHandledAbort, nil) != controls.New {
		return // unset, or handled (recoverControls read the ReplicaSets' records)
	}
	p.status.LastHandledAbort = token
	// In progress: the update revision is not yet the stable one (a first rollout included: with
	// nothing served before, an abort halts it), and not already aborted. A revision halted by
	// failurePolicy Halt is still in progress: an abort rolls it back.
	aborted := p.failed() && p.status.Failure.Reason == routingv1alpha1.ReasonAborted
	if p.status.StableRevision == p.update || aborted {
		p.event(false, EventAbortIgnored, "abort %q: no rollout is in progress; nothing changed", token)
		return
	}
	shard := ""
	if p.failed() {
		shard = p.status.Failure.Shard
	}
	p.abortedNow = true
	p.status.Failure = &routingv1alpha1.RolloutFailure{
		Revision: p.update,
		Reason:   routingv1alpha1.ReasonAborted,
		Shard:    shard,
		Message:  fmt.Sprintf("the rollout of revision %s was aborted (%s=%q)", p.update, routingv1alpha1.AnnotationAbort, token),
		Time:     metav1.Time{Time: p.now},
	}
	p.event(true, EventAborted, "%s; each shard it touched goes back to the revision that served it last", p.status.Failure.Message)
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

func (p *planner) act(a Action) {
	if a.Kind == ScaleReplicaSet && a.ReplicaSet != nil && a.Replicas != replicasOf(a.ReplicaSet) {
		// Whatever part of the planner sets a ReplicaSet back, a writer it overrules is named.
		p.reportForeignScale(a.ReplicaSet.Labels[LabelShard], a.ReplicaSet, a.Replicas)
	}
	p.plan.Actions = append(p.plan.Actions, a)
}

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
