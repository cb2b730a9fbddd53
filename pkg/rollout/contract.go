package rollout

import (
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The contract phase (spec.schema.contract): a migration that removes what only older revisions
// needed, run exactly once, after the expand and the rollout, when no older revision can come
// back. It reads like the shard steps: contractDecide names the state the contract is in from the
// observed evidence alone (Jobs, their reports, ReplicaSets, pods, the clock), contract applies
// it (one Job created at most, one condition set), and the table tests in contract_test.go take
// one transition each.
//
//	no Job, a rule does not hold → ContractReady=False with the rule's reason (waiting)
//	no Job, every rule holds     → the contract Job (attempt 1) is created: Contracting
//	the Job runs                 → Contracting
//	the Job ended, the database  → ContractComplete (phase Complete)
//	  reports contract.version
//	the Job ended otherwise      → ContractFailed, Stalled; a new retry runs attempt n+1
//
// The rules, each its reason while it does not hold, in this order:
//
//	WaitingForShards  every shard is promoted to the update revision, which is the stable one,
//	                  its schema confirmed, nothing failed, and its range contains contract.version;
//	OlderPodsRemain   no pod of any other revision exists in any shard, terminating ones included;
//	RollbackWindow    rollbackWindowSeconds have passed since the last shard was promoted;
//	MigrationRunning  no migration, check or shard-check Job of this RoutingService runs (Paused
//	                  when spec.paused is true);
//	AwaitingApproval  with requireApproval, a new schemagate.io/approve-contract value.
//
// Worked numbers: shards promoted at 12:00:10, 12:00:40 and 12:01:10, rollbackWindowSeconds 600
// → eligibleTime 12:11:10; the last v1 pod stops terminating at 12:01:30; the contract Job is
// created at the first reconcile at or after 12:11:10.

// ComponentContract labels contract Jobs and their pods.
const ComponentContract = "contract"

// annotationHandledApproveContract records, on the ReplicaSets, the approve-contract values that
// started a contract (controls.go).
const annotationHandledApproveContract = "schemagate.io/handled-approve-contract"

// annotationPromotedAt records, on the update revision's ReplicaSet of a shard, when the shard
// was promoted to it (RFC 3339, the manager's clock): the rollback window counts from the latest
// of these, so a lost status write does not restart or shorten it.
const annotationPromotedAt = "schemagate.io/promoted-at"

// olderPodsRecheck is how often the contract looks again while pods of older revisions remain:
// routing pods are not watched, and a pod that finishes terminating may change no ReplicaSet.
const olderPodsRecheck = 5 * time.Second

// Event reasons of the contract phase.
const (
	EventContractWindow   = "ContractWindow"                       // every shard promoted; the rollback window runs
	EventContractStarted  = "ContractStarted"                      // the contract Job was created
	EventContractRetried  = "ContractRetried"                      // a failed contract runs again
	EventContractFailed   = routingv1alpha1.ReasonContractFailed   // the contract Job failed or did not confirm
	EventContractComplete = routingv1alpha1.ReasonContractComplete // the database reports contract.version
	EventApprovalIgnored  = "ContractApprovalIgnored"              // an approval with no contract that needs one
)

// ContractJobName is <routingservice>-contract-<hash of version>-<attempt>, at most 63 characters
// for attempts below 10000, deterministic like MigrationJobName: a second create of the same
// attempt gets AlreadyExists instead of a second contract.
func ContractJobName(rsvcName, version string, attempt int32) string {
	return fmt.Sprintf("%s-contract-%s-%d", rsvcName, shortHash(version)[:8], attempt)
}

// NewContractJob builds the contract Job for (version, attempt) from spec.schema.contract, which
// the caller ensures is set: built like a migration Job (labels, SCHEMAGATE_SCHEMA_VERSION, no
// TTL, the contract's backoffLimit, activeDeadlineSeconds and jobMetadata), component "contract".
func NewContractJob(rsvc *routingv1alpha1.RoutingService, version string, attempt int32) *batchv1.Job {
	m := rsvc.Spec.Schema.Contract.Migration
	j := newSchemaJob(rsvc, ComponentContract, ContractJobName(rsvc.Name, version, attempt), version, attempt,
		m.Template, m.BackoffLimitOrDefault(), m.ActiveDeadlineSecondsOrDefault())
	meta := routingv1alpha1.JobMetadata{}
	if m.JobMetadata != nil {
		meta = *m.JobMetadata
	}
	j.Labels = mergeMetadata(meta.Labels, j.Labels)
	j.Annotations = mergeMetadata(meta.Annotations, map[string]string{annotationMigrationTemplate: shortHash(m.Template)})
	return j
}

// contractState is where the contract stands, as contractDecide reads it.
type contractState int

const (
	contractNone     contractState = iota // spec.schema.contract is unset
	contractWaiting                       // no Job yet; a rule does not hold (reason says which)
	contractReady                         // no Job yet; every rule holds: start it
	contractRunning                       // the latest attempt runs
	contractFailed                        // the latest attempt ended without confirming the version
	contractComplete                      // the database reports the version
)

// contractDecision is contractDecide's answer.
type contractDecision struct {
	state   contractState
	version string
	// latest is the latest attempt for version, if any.
	latest *ownedJob
	// reason and message: ContractReady's (waiting), or the failure's.
	reason, message string
	// eligible is the end of the rollback window, once every shard is promoted.
	eligible *time.Time
	// wake: look again then (a window that ends, pods that stop terminating).
	wake time.Time
}

// contract runs the contract phase: it decides, acts on the decision (at most one Job created or
// suspended), and sets ContractReady, status.schema.contract and the phase it puts the lifecycle
// in (p.contractPhase, "" while the shards are not all promoted), which lifecycle() sets. Called
// after the shard steps and markStable, before the status summary.
func (p *planner) contract() {
	d := p.contractDecide()
	defer p.settleApproval(d)
	st := &p.status.Schema
	if d.state == contractNone {
		p.verdicts.contractReady, p.verdicts.noContract = nil, true
		st.Contract = nil
		p.contractPhase = ""
		return
	}
	cs := p.contractStatus(d.version)
	if d.eligible != nil {
		cs.EligibleTime = &metav1.Time{Time: *d.eligible}
	}
	if d.latest != nil {
		cs.Job, cs.Attempt = d.latest.job.Name, d.latest.attempt
		created := d.latest.job.CreationTimestamp
		cs.StartTime = &created
	}
	if !d.wake.IsZero() {
		p.requeueAt(d.wake)
	}
	old := p.oldCondition(routingv1alpha1.ConditionContractReady)
	switch d.state {
	case contractComplete:
		if cs.CompletionTime == nil {
			cs.CompletionTime = p.contractEnd(d.latest)
		}
		if old == nil || old.Reason != routingv1alpha1.ReasonContractComplete {
			p.event(false, EventContractComplete, "%s; the contract to schema %s is complete", d.message, d.version)
		}
		p.decideContract(metav1.ConditionTrue, routingv1alpha1.ReasonContractComplete, d.message)
		p.contractPhase = routingv1alpha1.SchemaPhaseComplete
	case contractRunning:
		cs.CompletionTime = nil
		p.decideContract(metav1.ConditionTrue, routingv1alpha1.ReasonContracting, d.message)
		p.contractPhase = routingv1alpha1.SchemaPhaseContracting
	case contractFailed:
		p.afterFailedContract(d, cs)
	case contractReady:
		p.startContract(d, cs, 1, "every rule of the contract holds", func(name string) {
			p.event(false, EventContractStarted, "started contract Job %s to bring the schema to %s: every shard runs revision %s, no older pod is left and the rollback window ended at %s",
				name, d.version, p.update, formatTime(d.eligible))
		})
	default:
		cs.Job, cs.Attempt, cs.StartTime, cs.CompletionTime = "", 0, nil, nil
		if d.reason == routingv1alpha1.ReasonRollbackWindow && (old == nil || old.Reason != routingv1alpha1.ReasonRollbackWindow) {
			p.event(false, EventContractWindow, "%s", d.message)
		}
		p.decideContract(metav1.ConditionFalse, d.reason, d.message)
		if d.reason == routingv1alpha1.ReasonWaitingForShards {
			p.contractPhase = ""
		} else {
			p.contractPhase = routingv1alpha1.SchemaPhaseRollbackWindow
		}
	}
}

// settleApproval reports a new approve-contract value that no contract needs (none declared, no
// approval required, or the contract already started or done) as ignored, and records it as
// handled. A value read while the contract still waits for another rule stays unhandled: it acts
// once every rule holds.
func (p *planner) settleApproval(d contractDecision) {
	if p.approval == "" {
		return
	}
	waiting := d.state == contractWaiting || d.state == contractReady
	if !waiting || !p.rsvc.Spec.Schema.Contract.RequireApproval {
		p.event(false, EventApprovalIgnored, "%s=%q: no contract waits for an approval; nothing changed", routingv1alpha1.AnnotationApproveContract, p.approval)
		p.approveHandled = p.approval
	}
	p.approval = ""
}

// contractDecide reads the contract's state from the observed evidence. It changes nothing.
func (p *planner) contractDecide() contractDecision {
	c := p.rsvc.Spec.Schema.Contract
	if c == nil {
		return contractDecision{state: contractNone}
	}
	d := contractDecision{version: schemaversion.Canonical(c.Version)}
	if len(c.Version) > 63 || !schemaversion.Valid(d.version) {
		// The CRD refuses it (a version, at most 63 characters: it becomes a label value); a
		// stored object from elsewhere still never runs a Job.
		d.version = podText(c.Version, 63)
		d.state, d.reason = contractWaiting, routingv1alpha1.ReasonWaitingForShards
		d.message = fmt.Sprintf("spec.schema.contract.version %q is not a version; no contract runs", c.Version)
		return d
	}
	d.latest = p.latestContract(d.version)
	ev := evidence(p.readings)
	if ev.confirms(d.version) {
		d.state = contractComplete
		if d.latest != nil && ev.oj == d.latest {
			d.message = ev.describe()
		} else {
			d.message = ev.describe() + " (no contract Job of this RoutingService was needed)"
		}
		return d
	}
	if d.latest != nil {
		own := readingOf(p.readings, d.latest)
		switch {
		case own != nil && own.pending:
			d.state, d.message = contractRunning, fmt.Sprintf("contract Job %s (attempt %d) has finished: %s", d.latest.job.Name, d.latest.attempt, own.invalid)
			d.wake = p.now.Add(2 * time.Second)
		case !p.ended(d.latest):
			d.state = contractRunning
			d.message = fmt.Sprintf("contract Job %s (attempt %d) is bringing the schema to %s%s", d.latest.job.Name, d.latest.attempt, d.version, p.causeOf(d.latest))
			d.wake = deadlineAt(d.latest.job, p.now)
		case p.keptCompletion(d.latest, own):
			d.state = contractComplete
			d.message = fmt.Sprintf("contract Job %s succeeded and status recorded the database at %s; its pods, and their report, are gone since", d.latest.job.Name, d.version)
		default:
			d.state = contractFailed
			d.reason, d.message = routingv1alpha1.ReasonContractFailed, p.contractFailure(d.latest, d.version)
		}
		return d
	}
	if rec := p.recordedContract(); rec != "" && schemaversion.AtLeast(rec, d.version) {
		// Its Job is gone, the record of it is not: it never runs twice.
		d.state, d.message = contractComplete, contractRecordMessage(rec)
		return d
	}
	d.state = contractWaiting
	if reason, msg := p.contractShardsWait(d.version); reason != "" {
		d.reason, d.message = reason, msg
		return d
	}
	if unseen := p.unseenPlaces(); len(unseen) > 0 {
		// The pods of an unreachable cluster cannot be counted: an older revision may still
		// run there, and the contract would break it.
		u := unseen[0]
		d.reason = routingv1alpha1.ReasonOlderPodsRemain
		d.message = fmt.Sprintf("shard %s's cluster %s is %s, so its pods cannot be counted; the contract to schema %s waits until it answers", u.shard, u.view.Name, u.view.State, d.version)
		d.wake = p.now.Add(olderPodsRecheck)
		return d
	}
	if msg := p.earlierPlaceWait(); msg != "" {
		d.reason = routingv1alpha1.ReasonOlderPodsRemain
		d.message = fmt.Sprintf("every shard is promoted to revision %s, but %s; the contract to schema %s waits until no pod of an older revision can serve there", p.update, msg, d.version)
		d.wake = p.now.Add(olderPodsRecheck)
		return d
	}
	if msg := p.olderPods(); msg != "" {
		d.reason, d.message = routingv1alpha1.ReasonOlderPodsRemain, fmt.Sprintf("every shard is promoted to revision %s, but %s; the contract to schema %s waits until no pod of an older revision exists", p.update, msg, d.version)
		d.wake = p.now.Add(olderPodsRecheck)
		return d
	}
	eligible := p.contractEligible(c)
	d.eligible = &eligible
	if p.now.Before(eligible) {
		d.reason = routingv1alpha1.ReasonRollbackWindow
		d.message = fmt.Sprintf("every shard runs revision %s; the rollback window (%ds) ends at %s, and until then a rollback to the revision each shard ran before stays possible: the contract to schema %s starts after it",
			p.update, rollbackWindowSeconds(c), formatTime(&eligible), d.version)
		d.wake = eligible
		return d
	}
	if p.rsvc.Spec.Paused {
		d.reason, d.message = routingv1alpha1.ReasonPaused, fmt.Sprintf("spec.paused is true: the contract to schema %s starts when it is false", d.version)
		return d
	}
	if msg := p.schemaJobRunning(); msg != "" {
		d.reason, d.message = routingv1alpha1.ReasonMigrationRunning, fmt.Sprintf("%s, and the contract never runs beside another migration or check: it starts when that has ended", msg)
		d.wake = p.now.Add(olderPodsRecheck)
		return d
	}
	if c.RequireApproval && p.approval == "" {
		d.reason = routingv1alpha1.ReasonAwaitingApproval
		d.message = fmt.Sprintf("every rule holds and spec.schema.contract.requireApproval is true: set a new value of annotation %s (kubectl schemagate approve-contract %s) to run the contract to schema %s",
			routingv1alpha1.AnnotationApproveContract, p.rsvc.Name, d.version)
		return d
	}
	d.state, d.reason = contractReady, routingv1alpha1.ReasonContractReadyToRun
	return d
}

// latestContract is the highest attempt of the contract Job for version, or nil.
func (p *planner) latestContract(version string) *ownedJob {
	var out *ownedJob
	for i := range p.contracts {
		if oj := &p.contracts[i]; schemaversion.Equal(oj.version, version) && (out == nil || oj.attempt > out.attempt) {
			out = oj
		}
	}
	return out
}

// keptCompletion: the latest attempt succeeded, its report is gone (its pods deleted), and the
// stored status recorded the contract complete after that very Job. Status only keeps the
// contract from running twice here; it never opens anything.
func (p *planner) keptCompletion(latest *ownedJob, own *reading) bool {
	prev := p.rsvc.Status.Schema.Contract
	return prev != nil && prev.CompletionTime != nil && prev.Job == latest.job.Name &&
		jobCondition(latest.job, batchv1.JobComplete) != nil && own != nil && own.gone
}

// contractFailure says why the latest contract attempt ended without confirming version.
func (p *planner) contractFailure(oj *ownedJob, version string) string {
	retry := fmt.Sprintf("annotate %s to run attempt %d", routingv1alpha1.AnnotationRetry, oj.attempt+1)
	own := readingOf(p.readings, oj)
	if jobCondition(oj.job, batchv1.JobComplete) != nil {
		switch {
		case own != nil && own.late && !own.dirty:
			return fmt.Sprintf("contract Job %s to schema %s succeeded after its deadline had passed; a late success confirms nothing (%s)", oj.job.Name, version, retry)
		case own != nil && own.dirty:
			return fmt.Sprintf("contract Job %s succeeded, but %s: only a person may clear it (fix the database, then %s)", oj.job.Name, own.describe(), retry)
		case own != nil && own.usable():
			return fmt.Sprintf("contract Job %s succeeded, but %s, below %s: it did not contract (%s)", oj.job.Name, own.describe(), version, retry)
		case own != nil:
			return fmt.Sprintf("contract Job %s succeeded, but its schema report cannot be used: %s; nothing confirms schema %s (%s)", oj.job.Name, own.invalid, version, retry)
		}
	}
	if c := jobCondition(oj.job, batchv1.JobFailed); c != nil {
		return fmt.Sprintf("contract Job %s to schema %s failed (%s: %s)%s; it is kept for its logs and not retried automatically (%s)",
			oj.job.Name, version, c.Reason, podText(c.Message, maxQuoted), p.causeOf(oj), retry)
	}
	return fmt.Sprintf("contract Job %s to schema %s did not finish within activeDeadlineSeconds (%ds)%s (%s)",
		oj.job.Name, version, int64(jobDeadline(oj.job)/time.Second), p.causeOf(oj), retry)
}

// afterFailedContract reports a failed contract (Stalled), or runs attempt n+1 on a new retry,
// once the failed attempt's pods are gone and nothing else of this RoutingService migrates.
func (p *planner) afterFailedContract(d contractDecision, cs *routingv1alpha1.ContractStatus) {
	fail := func(msg string) {
		if old := p.oldCondition(routingv1alpha1.ConditionContractReady); old == nil || old.Reason != routingv1alpha1.ReasonContractFailed {
			p.event(true, EventContractFailed, "%s", msg)
		}
		p.decideContract(metav1.ConditionFalse, routingv1alpha1.ReasonContractFailed, msg)
		p.stall(routingv1alpha1.ReasonContractFailed, msg)
		p.contractPhase = routingv1alpha1.SchemaPhaseContracting
	}
	latest := d.latest
	cs.CompletionTime = p.contractEnd(latest)
	if p.retry == "" {
		fail(d.message)
		return
	}
	next := latest.attempt + 1
	why := fmt.Sprintf("retry %q", p.retry)
	switch {
	case p.rsvc.Spec.Paused:
		p.retryWaiting = true
		fail(fmt.Sprintf("%s; %s runs attempt %d when spec.paused is false", d.message, why, next))
	case !stopped(latest.job):
		if jobCondition(latest.job, batchv1.JobFailed) == nil && !ptr.Deref(latest.job.Spec.Suspend, false) {
			p.act(Action{Kind: SuspendJob, Job: latest.job, Note: fmt.Sprintf("%s: stop %s's pods before attempt %d", why, latest.job.Name, next)})
		}
		p.retryWaiting = true
		fail(fmt.Sprintf("%s; %s waits for the pods of contract Job %s to stop", d.message, why, latest.job.Name))
		p.requeueAt(p.now.Add(5 * time.Second))
	default:
		if msg := p.schemaJobRunning(); msg != "" {
			p.retryWaiting = true
			fail(fmt.Sprintf("%s; %s waits: %s", d.message, why, msg))
			p.requeueAt(p.now.Add(5 * time.Second))
			return
		}
		p.startContract(d, cs, next, why, func(name string) {
			p.event(false, EventContractRetried, "%s: contract Job %s replaces %s (kept for its logs)", why, name, latest.job.Name)
			p.useRetry()
		})
	}
}

// startContract creates attempt of the contract Job, unless its name is held by an object this
// RoutingService does not control.
func (p *planner) startContract(d contractDecision, cs *routingv1alpha1.ContractStatus, attempt int32, note string, started func(name string)) {
	job := NewContractJob(p.rsvc, d.version, attempt)
	if problems := p.specProblems(); problems != "" {
		// A spec that cannot roll out never touches the database (checksInvalid stalls it).
		p.decideContract(metav1.ConditionFalse, routingv1alpha1.ReasonInvalidCheck, fmt.Sprintf(
			"the contract to schema %s does not start: the spec cannot roll out (%s)", d.version, problems))
		p.contractPhase = routingv1alpha1.SchemaPhaseRollbackWindow
		return
	}
	if holder := p.taken("Job", job.Name); holder != "" {
		msg := fmt.Sprintf("contract Job %s/%s cannot be created: %s; schemagate never takes it as evidence; delete or rename it and the contract to schema %s starts",
			p.rsvc.Namespace, job.Name, holder, d.version)
		p.decideContract(metav1.ConditionTrue, routingv1alpha1.ReasonContractReadyToRun, msg)
		p.stall(routingv1alpha1.ReasonNameConflict, msg)
		p.contractPhase = routingv1alpha1.SchemaPhaseRollbackWindow
		p.requeueAt(p.now.Add(conflictRecheck))
		return
	}
	if p.refused("create", "Job", job.Name) {
		// S-31, as in startMigration: the API server refused it in this reconcile, so nothing
		// started, no approval is used up, and the status does not name the Job.
		p.decideContract(metav1.ConditionTrue, routingv1alpha1.ReasonContractReadyToRun, fmt.Sprintf(
			"the API server refused contract Job %s/%s (attempt %d) to schema %s; it is created again on the next reconcile", p.rsvc.Namespace, job.Name, attempt, d.version))
		p.contractPhase = routingv1alpha1.SchemaPhaseRollbackWindow
		p.requeueAt(p.now.Add(refusalRecheck))
		return
	}
	p.act(Action{Kind: CreateJob, Job: job, Note: note})
	if p.approval != "" {
		p.approveHandled, p.approval = p.approval, ""
	}
	started(job.Name)
	cs.Job, cs.Attempt, cs.StartTime, cs.CompletionTime = job.Name, attempt, &metav1.Time{Time: p.now}, nil
	p.decideContract(metav1.ConditionTrue, routingv1alpha1.ReasonContracting,
		fmt.Sprintf("contract Job %s (attempt %d) is bringing the schema to %s", job.Name, attempt, d.version))
	p.contractPhase = routingv1alpha1.SchemaPhaseContracting
	p.requeueAt(p.now.Add(time.Duration(ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0))*time.Second + migrationGrace))
}

// contractStatus is status.schema.contract for version, created (or reset when it reported
// another version) as needed.
func (p *planner) contractStatus(version string) *routingv1alpha1.ContractStatus {
	st := &p.status.Schema
	if st.Contract == nil || !schemaversion.Equal(st.Contract.Version, version) {
		st.Contract = &routingv1alpha1.ContractStatus{Version: version}
	}
	cs := st.Contract
	cs.Version = version
	cs.StartTime, cs.CompletionTime = notAfter(cs.StartTime, p.now), notAfter(cs.CompletionTime, p.now)
	return cs
}

// contractEnd is when the contract's Job finished, for completionTime (now when unknown).
func (p *planner) contractEnd(oj *ownedJob) *metav1.Time {
	if oj != nil {
		if c := jobCondition(oj.job, batchv1.JobComplete); c != nil {
			return finishedAt(oj.job, c)
		}
		if c := jobCondition(oj.job, batchv1.JobFailed); c != nil {
			return finishedAt(oj.job, c)
		}
	}
	return &metav1.Time{Time: p.now}
}

func rollbackWindowSeconds(c *routingv1alpha1.ContractSpec) int32 {
	if c.RollbackWindowSeconds == nil || *c.RollbackWindowSeconds < 0 {
		return routingv1alpha1.DefaultContractRollbackWindowSeconds
	}
	return *c.RollbackWindowSeconds
}

func orUnbounded(v string) string {
	if v == "" {
		return "∞"
	}
	return v
}

func formatTime(t *time.Time) string {
	if t == nil {
		return "now"
	}
	return t.UTC().Format(time.RFC3339)
}

func sortedShardNames(shards map[string]*shardSet) []string {
	names := make([]string, 0, len(shards))
	for name := range shards {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
