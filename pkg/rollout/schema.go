package rollout

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemarange"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// migrationGrace is how long past activeDeadlineSeconds schemagate waits for the Job controller
// to fail a migration Job by itself before it declares the deadline exceeded on its own (S-04:
// a pod that never starts must still end in bounded time).
const migrationGrace = 10 * time.Second

// MigrationGrace is migrationGrace for tools outside the planner (pkg/preview): the grace past
// activeDeadlineSeconds after which a migration, schema check or check Job counts as failed.
const MigrationGrace = migrationGrace

// podStopGrace bounds the wait for a migration attempt's pods to stop before the next attempt:
// past it the RoutingService is Stalled, naming the Job whose pods do not stop (I3).
const podStopGrace = 2 * time.Minute

// conflictRecheck is how often a name held by another object is looked at again: such an object
// may carry none of schemagate's labels, so no watch event says when it is gone.
const conflictRecheck = 15 * time.Second

// schemaGate computes status.schema and the SchemaReady condition, starts the migration (or check)
// Job when the required version is not confirmed, and reports whether the gate is open: whether
// pods of the update revision may run. Versions are compared as versions everywhere ("2" and "2.0"
// are one version, one Job name). What the database is at comes from the latest reading of a
// finished migration or check Job this RoutingService controls (evidence.go): its schema report
// (evidence Report, the default) or its success (JobSuccess). The rules, in order:
//
//   - open: the latest reading says the database is at a version >= required and not dirty (with
//     check.afterMigration, a check Job must have said so after the migration);
//   - another migration Job of this RoutingService (another version's) is still running or
//     terminating: wait for it (WaitingForMigration); two migrations never run at once (S-15); one
//     past its own deadline is suspended, so the wait is bounded;
//   - a check Job ran after the latest migration attempt: it decides (check.go);
//   - the evidence that confirmed the required version is gone (its Job deleted, its pods
//     garbage-collected): the database is asked with a check Job, conditions held as they were,
//     and nothing runs again or is scaled up (S-23; check.go);
//   - no Job for the required version: start attempt 1;
//   - the latest attempt runs: Migrating;
//   - the latest attempt failed, ran past its deadline, or succeeded with a report that does not
//     confirm the version (SchemaMismatch, SchemaDirty, InvalidSchemaReport; S-24): Stalled, unless
//     a retry annotation is new or spec.schema.migration.template changed since that attempt (a fix
//     applied through Git; not for a dirty database), which start attempt n+1 once the previous
//     attempt's pods are gone.
//
// While spec.paused is true nothing is created or suspended; a new retry waits, unhandled, until
// the RoutingService is unpaused (S-16). A Job name held by an object this RoutingService does not
// control stalls with NameConflict, never a create loop (S-21).
func (p *planner) schemaGate() bool {
	if shard, view, held := p.schemaPlaceFrozen(); held {
		p.holdSchemaPlace(shard, view)
		return false
	}
	required := p.rsvc.Spec.Schema.Version
	st := &p.status.Schema
	st.RequiredVersion = required
	st.StartTime, st.CompletionTime = notAfter(st.StartTime, p.now), notAfter(st.CompletionTime, p.now)
	st.SuspendedSince = nil

	p.readings = p.readJobs()
	p.recordEarlyReports()
	p.stopReportedJobs()
	ev := evidence(p.readings)
	p.recordEvidence(ev)
	p.recordProbe()
	confirmed := st.ConfirmedVersion

	latest := p.latestAttempt(required)
	check := p.latestCheck(required)
	st.CheckJob = ""
	if check != nil {
		st.CheckJob = check.job.Name
	}
	if latest != nil {
		p.recordJob(latest)
	}

	if _, err := schemarange.FromSpec(&p.rsvc.Spec.Schema); err != nil {
		// The CRD refuses most such specs (CEL); the rest (versions CEL cannot compare) end here.
		p.failSchema(routingv1alpha1.ReasonInvalidSchemaRange, fmt.Sprintf("%s: no migration starts and revision %s does not start until the spec is fixed", err, p.update))
		return false
	}
	if ev.confirms(required) && p.needsCheckAfter(ev, latest) {
		// The migration says so, but only the check's report opens the gate: until then no
		// revision needing the required version (or above) is scaled up either (mayRun).
		p.awaitingCheck = required
	}
	if ev.confirms(required) && p.awaitingCheck == "" && !p.updateRange().Contains(confirmed) {
		p.databaseAheadOfUpdate(confirmed)
		return false
	}
	if floor := p.contractFloor(); ev.confirms(required) && p.awaitingCheck == "" && floor != "" &&
		schemaversion.AtLeast(floor, confirmed) && !p.updateRange().Contains(floor) {
		// A contract ran to floor and its Job (with its report) is gone: the database is there,
		// whatever the older evidence says (contracted.go).
		p.databaseAheadOfUpdate(floor)
		return false
	}
	if list := p.database().Outside(p.updateRange()); ev.confirms(required) && p.awaitingCheck == "" && len(list) > 0 {
		p.waitForPending(list)
		if p.stallReason == "" {
			p.setActivity(routingv1alpha1.ReasonMigrating, p.schemaMessage())
		}
		return false
	}
	if ev.confirms(required) && p.awaitingCheck == "" {
		switch {
		case latest == nil && ev.oj.check:
			// Confirmed by a check: status keeps naming the migration attempt that ran.
			p.keepMigrationRecord(ev)
		case latest == nil:
			// Confirmed by a Job of a higher version (expand-only migrations).
			p.recordJob(ev.oj)
		}
		if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old == nil || old.Status != metav1.ConditionTrue {
			p.event(false, EventSchemaConfirmed, "schema %s confirmed (%s): the gate is open for revision %s", confirmed, ev.describe(), p.update)
			if end := latest.jobEnd(ev); end != nil {
				start := latest.job.CreationTimestamp
				if st := latest.job.Status.StartTime; st != nil {
					start = *st
				}
				p.measure(PhaseMigration, "", end.Sub(start.Time))
				p.measure(PhaseGateWait, "", p.since(&latest.job.CreationTimestamp))
			}
		}
		p.decideSchema(metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed,
			fmt.Sprintf("schema %s (required %s) is confirmed: %s", confirmed, required, ev.describe()))
		return true
	}

	paused := p.rsvc.Spec.Paused
	ended := latest != nil && p.ended(latest)
	switch other := p.otherLiveMigration(required); {
	case other != nil && (latest == nil || ended || !live(latest.job)):
		p.waitForMigration(other, required, confirmed)
	case p.failedJobGone(required, latest):
		p.afterVanishedAttempt(paused)
	case check != nil && checkDecides(check, latest):
		p.afterCheck(check, latest, paused)
	case p.checkAfterMigrationDue(latest) || p.evidenceLost(latest):
		p.reconfirm(latest, paused)
	case latest == nil && p.cacheLagging():
		// The attempt the stored status names was created an instant ago: wait for the cache.
		st.MigrationJob, st.Attempt = p.rsvc.Status.Schema.MigrationJob, p.rsvc.Status.Schema.Attempt
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(st.MigrationJob, st.Attempt, ""))
		p.requeueAt(p.now.Add(2 * time.Second))
	case latest == nil && paused:
		st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime = "", 0, nil, nil
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrationPending,
			fmt.Sprintf("schema %s is required and %s is confirmed; the migration starts when spec.paused is false", required, orNone(confirmed)))
	case latest == nil:
		p.startMigration(1, fmt.Sprintf("schema %s required, %s confirmed", required, orNone(confirmed)),
			func(name string) {
				p.event(false, EventMigrationStarted, "started migration Job %s to bring the schema from %s to %s", name, orNone(confirmed), required)
			})
	case !ended && queued(latest.job):
		p.migrationQueued(latest)
	case !ended:
		p.markResumed(latest)
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(latest.job.Name, latest.attempt, p.causeOf(latest)+p.runningFor(latest.job, latest.attempt)))
		p.requeueAt(deadlineAt(latest.job, p.now))
		p.requeueAt(p.nextElapsedStep(latest.job))
	case readingOf(p.readings, latest) != nil && readingOf(p.readings, latest).pending:
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(latest.job.Name, latest.attempt, ": "+readingOf(p.readings, latest).invalid))
		p.requeueAt(p.now.Add(2 * time.Second))
	default:
		p.afterFailedAttempt(latest, paused)
	}
	if p.stallReason == "" && !p.holding && !p.binaryFirst {
		activity := routingv1alpha1.ReasonMigrating
		if st.SuspendedSince != nil {
			activity = routingv1alpha1.ReasonMigrationSuspended
		}
		if reason := p.schemaReason(); isClusterReason(reason) {
			// The expand gate waits for a place it cannot see (holdForUnseen).
			activity = reason
		}
		p.setActivity(activity, p.schemaMessage())
	}
	return false
}

// startMigration creates attempt of the required version's migration Job, unless the RoutingService
// is paused (nothing is created) or the name is held by an object it does not control (S-21).
// started records the transition's Event and is called only when the Job is created.
func (p *planner) startMigration(attempt int32, note string, started func(name string)) {
	st := &p.status.Schema
	required := p.rsvc.Spec.Schema.Version
	job := NewMigrationJob(p.rsvc, schemaversion.Canonical(required), attempt)
	if problems := p.specProblems(); problems != "" {
		// A spec that cannot roll out never touches the database (checksInvalid stalls it).
		p.retryWaiting = p.retry != ""
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonInvalidCheck, fmt.Sprintf(
			"the migration to schema %s does not start: the spec cannot roll out (%s)", required, problems))
		return
	}
	if msg := p.contractHoldsExpand(required); msg != "" {
		// One lifecycle at a time: never an expand beside a contract (contract.go).
		p.retryWaiting = p.retry != ""
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForContract, msg)
		p.requeueAt(p.now.Add(5 * time.Second))
		return
	}
	if !p.expandGate() {
		// Refused (IncompatibleRevision), or binary-first: the shards roll before it.
		p.retryWaiting = p.retry != ""
		return
	}
	if pod := p.strayMigrationPod(); pod != nil {
		// A pod of a migration Job that is gone (deleted with its pods orphaned, or still
		// terminating) may still be changing the database: two migrations never run at once.
		p.retryWaiting = p.retry != ""
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration, fmt.Sprintf(
			"%s; the migration to schema %s starts when it has ended, since two changes of the database never run at once",
			strayText(pod), required))
		p.requeueAt(p.now.Add(5 * time.Second))
		return
	}
	if holder := p.taken("Job", job.Name); holder != "" {
		p.retryWaiting = p.retry != ""
		p.failSchema(routingv1alpha1.ReasonNameConflict, fmt.Sprintf(
			"migration Job %s/%s cannot be created: %s; schemagate never takes it as evidence; delete or rename it and the migration to schema %s starts",
			p.rsvc.Namespace, job.Name, holder, required))
		p.requeueAt(p.now.Add(conflictRecheck))
		return
	}
	// S-15, S-19: any migration Job of this RoutingService with pods, even one that is not evidence
	// (labels edited by hand, an earlier attempt), may still be migrating (found by FuzzCompute).
	// A check Job that still runs is waited for too: what it read before the migration would be
	// its report, about a database the migration has changed since. Its deadline bounds the wait.
	for _, j := range p.observed.Jobs {
		if metav1.IsControlledBy(j, p.rsvc) && (j.Labels[LabelComponent] == ComponentMigration || j.Labels[LabelComponent] == ComponentCheck) && !stopped(j) {
			p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration, fmt.Sprintf(
				"schema %s is required; %s Job %s still has pods, and a migration never runs beside another migration or a check: attempt %d starts when they are gone", required, j.Labels[LabelComponent], j.Name, attempt))
			p.retryWaiting = true
			p.requeueAt(p.now.Add(5 * time.Second))
			return
		}
	}
	if !p.probeGate() {
		// The probe runs first, or its verdict holds the migration (probe.go).
		p.retryWaiting = p.retryWaiting || p.retry != ""
		return
	}
	if p.refused("create", "Job", job.Name) {
		// S-31: the API server refused this Job in this reconcile, so nothing started, and the
		// status does not name it: the next reconcile would take the missing Job for one whose
		// evidence was lost. reportRefusals says why, and the next reconcile creates it again.
		p.retryWaiting = p.retry != ""
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration, fmt.Sprintf(
			"schema %s is required; the API server refused migration Job %s (attempt %d), which is created again on the next reconcile", required, job.Name, attempt))
		return
	}
	p.act(Action{Kind: CreateJob, Job: job, Note: note})
	p.markProbeRan(job.Name)
	started(job.Name)
	if p.breaking != "" {
		p.event(true, EventBreakingMigration, "migration Job %s to schema %s starts with spec.schema.allowBreakingMigration although %s: planned downtime", job.Name, required, p.breaking)
	}
	st.MigrationJob, st.Attempt, st.Cause = job.Name, attempt, ""
	st.StartTime, st.CompletionTime = &metav1.Time{Time: p.now}, nil
	deadline := p.now.Add(time.Duration(migrationDeadlineSeconds(p.rsvc))*time.Second + migrationGrace)
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(job.Name, attempt, p.runningSince(p.now, deadline, attempt)))
	p.requeueAt(deadline)
	p.requeueAt(p.now.Add(10 * time.Second)) // the elapsed time's first step
}

// waitForMigration reports that the required version waits for other, a running migration Job of
// another version. Once other is past its own deadline it is suspended (superseded), so the wait
// ends in bounded time (I3); while paused nothing is suspended.
func (p *planner) waitForMigration(other *ownedJob, required, confirmed string) {
	st := &p.status.Schema
	if !schemaversion.Equal(st.RequiredVersion, other.version) && st.MigrationJob == other.job.Name {
		st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime, st.Cause = "", 0, nil, nil, ""
	}
	msg := fmt.Sprintf("schema %s is required and %s is confirmed; migration Job %s (schema %s) is still running, and two migrations never run at once: the migration to %s starts when it ends",
		required, orNone(confirmed), other.job.Name, other.version, required)
	switch {
	case p.pastDeadline(other) && !p.rsvc.Spec.Paused && jobCondition(other.job, batchv1.JobFailed) == nil && !ptr.Deref(other.job.Spec.Suspend, false):
		p.act(Action{Kind: SuspendJob, Job: other.job, Note: fmt.Sprintf("superseded by schema %s and past its deadline", required)})
		p.event(false, EventMigrationSuperseded, "migration Job %s (schema %s) ran past its deadline and is suspended so that schema %s's migration can start", other.job.Name, other.version, required)
		p.requeueAt(p.now.Add(5 * time.Second))
	case p.pastDeadline(other):
		p.requeueAt(p.now.Add(5 * time.Second))
	default:
		p.requeueAt(deadlineAt(other.job, p.now))
	}
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration, msg)
}

func (p *planner) failSchema(reason, msg string) {
	if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old == nil || old.Reason != reason {
		p.event(true, reason, "%s", msg)
	}
	p.decideSchema(metav1.ConditionFalse, reason, msg)
	p.stall(reason, msg)
}

// recordJob reports a migration Job in status.schema, with what its pods say (status.schema.cause:
// kept from the stored status for the same Job once its pods no longer say anything).
func (p *planner) recordJob(oj *ownedJob) {
	st := &p.status.Schema
	if cause := p.podCauseText(oj); cause != "" {
		st.Cause = cause
	} else if p.rsvc.Status.Schema.MigrationJob != oj.job.Name {
		st.Cause = ""
	} else {
		st.Cause = podText(st.Cause, maxCause)
	}
	st.MigrationJob, st.Attempt = oj.job.Name, oj.attempt
	created := oj.job.CreationTimestamp
	st.StartTime = &created
	st.CompletionTime = nil
	if c := jobCondition(oj.job, batchv1.JobComplete); c != nil {
		st.CompletionTime = finishedAt(oj.job, c)
	} else if c := jobCondition(oj.job, batchv1.JobFailed); c != nil {
		st.CompletionTime = finishedAt(oj.job, c)
	}
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// databaseAheadOfUpdate closes the gate when the database is confirmed at a version above the
// newest the update revision runs on: a spec reverted to an older revision after a later migration
// (RollbackRefused: the revision served before), or a database moved on by someone else
// (DatabaseAhead). Nothing of the update revision is created or scaled up; what serves keeps
// serving.
func (p *planner) databaseAheadOfUpdate(confirmed string) {
	reason := routingv1alpha1.ReasonDatabaseAhead
	what := "the database is ahead of it"
	served, serves := false, false
	for _, shard := range p.shardNames() {
		if rs := p.set(shard).byRev[p.update]; rs != nil {
			served, serves = served || hasServed(rs), serves || serving(rs)
		}
	}
	if served && !serves {
		// The spec went back to a revision that served before and serves nowhere now.
		reason, what = routingv1alpha1.ReasonRollbackRefused, "a rollback to it is refused; roll forward to a revision that runs on it"
	}
	msg := fmt.Sprintf("the database is at schema %s, outside the range %s revision %s runs on: %s; nothing of revision %s is created or scaled up, and every shard keeps serving what it serves",
		confirmed, p.updateRange(), p.update, what, p.update)
	p.failSchema(reason, msg)
}
