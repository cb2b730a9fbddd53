package rollout

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
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
	ev := evidence(p.readings)
	p.recordEvidence(ev)
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

	if _, err := specRange(&p.rsvc.Spec.Schema); err != nil {
		// The CRD refuses most such specs (CEL); the rest (versions CEL cannot compare) end here.
		p.failSchema(routingv1alpha1.ReasonInvalidSchemaRange, fmt.Sprintf("%s: no migration starts and revision %s does not start until the spec is fixed", err, p.update))
		return false
	}
	if ev.confirms(required) && p.needsCheckAfter(ev, latest) {
		// The migration says so, but only the check's report opens the gate: until then no
		// revision needing the required version (or above) is scaled up either (mayRun).
		p.awaitingCheck = required
	}
	if ev.confirms(required) && p.awaitingCheck == "" && !p.updateRange().contains(confirmed) {
		p.databaseAheadOfUpdate(confirmed)
		return false
	}
	if floor := p.contractFloor(); ev.confirms(required) && p.awaitingCheck == "" && floor != "" &&
		schemaversion.AtLeast(floor, confirmed) && !p.updateRange().contains(floor) {
		// A contract ran to floor and its Job (with its report) is gone: the database is there,
		// whatever the older evidence says (contracted.go).
		p.databaseAheadOfUpdate(floor)
		return false
	}
	if list := outside(p.updateRange(), p.pendingSchemas()); ev.confirms(required) && p.awaitingCheck == "" && len(list) > 0 {
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

// afterFailedAttempt handles the latest attempt for the required version once it failed or ran
// past schemagate's deadline: Stalled, or attempt n+1 when a new retry annotation or a changed
// migration template asks for it.
func (p *planner) afterFailedAttempt(latest *ownedJob, paused bool) {
	required := p.rsvc.Spec.Schema.Version
	reason, msg := p.attemptFailure(latest)
	why := ""
	switch {
	case p.retry != "":
		why = fmt.Sprintf("retry %q", p.retry)
	case p.migrationChanged(latest) && reason != routingv1alpha1.ReasonSchemaDirty:
		// Not for a dirty database: only a person may clear it, and then says so with a retry.
		why = "spec.schema.migration.template changed"
	default:
		p.failSchema(reason, msg)
		return
	}
	next := latest.attempt + 1
	switch {
	case paused:
		// S-16: paused means paused; the retry is kept (not recorded as handled) and acts once
		// the RoutingService is unpaused.
		p.retryWaiting = true
		p.failSchema(reason, fmt.Sprintf("%s; %s starts attempt %d when spec.paused is false", msg, why, next))
	case !stopped(latest.job):
		// Its pods may still run, and two migrations never run at once: stop them first (the Job
		// controller deletes a suspended Job's pods; the Job stays for its logs).
		if jobCondition(latest.job, batchv1.JobFailed) == nil && !ptr.Deref(latest.job.Spec.Suspend, false) {
			p.act(Action{Kind: SuspendJob, Job: latest.job, Note: fmt.Sprintf("%s: stop %s's pods before attempt %d", why, latest.job.Name, next)})
			p.event(false, EventMigrationSuspended, "%s: suspending migration Job %s so that its pods stop before attempt %d starts", why, latest.job.Name, next)
		}
		p.retryWaiting = true
		if since := stopSince(latest.job); p.now.After(since.Add(podStopGrace)) {
			// I3: a pod that never stops (stuck terminating on a lost node) must not make the
			// wait endless: it is reported, and the retry still acts once the pods are gone.
			p.failSchema(reason, fmt.Sprintf("%s; %s waits for the pods of migration Job %s to stop before attempt %d starts, and they have not stopped since %s (a pod stuck terminating? delete it, with --force if its node is gone)",
				msg, why, latest.job.Name, next, since.UTC().Format(time.RFC3339)))
			// No requeue: the Job's status (active, terminating) changes when its pods go, and
			// that event wakes the reconciler.
			return
		}
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating,
			fmt.Sprintf("%s: waiting for the pods of migration Job %s to stop before attempt %d starts", why, latest.job.Name, next))
		p.requeueAt(p.now.Add(5 * time.Second))
	default:
		// S-05: attempt n+1 has its own deterministic name; the failed Job stays for its logs.
		retry := p.retry
		p.startMigration(next, fmt.Sprintf("%s of schema %s after %s", why, required, latest.job.Name), func(name string) {
			p.event(false, EventMigrationRetried, "%s: migration Job %s replaces %s (kept for its logs)", why, name, latest.job.Name)
			if retry != "" {
				p.useRetry()
			}
		})
	}
}

// attemptFailure is the reason and message of an attempt that failed, ran past its deadline, or
// succeeded without confirming the required version (its report, or a later one, says the
// database is below it or dirty, or cannot be read).
func (p *planner) attemptFailure(oj *ownedJob) (string, string) {
	required := p.rsvc.Spec.Schema.Version
	retry := fmt.Sprintf("annotate %s to run attempt %d", routingv1alpha1.AnnotationRetry, oj.attempt+1)
	own := readingOf(p.readings, oj)
	if reason, ok := p.storedEnd(oj.job.Name); ok && reportReasons[reason] && (own == nil || own.gone) && !p.hasPods(oj) {
		// Its report was read, then its pods were deleted: what it said stays the reason.
		return reason, p.endedMessage(oj.job.Name, oj.attempt, reason, "its pods, and the report with them, were deleted")
	}
	if jobCondition(oj.job, batchv1.JobComplete) != nil {
		ev := evidence(p.readings)
		switch {
		case own != nil && own.late && !own.dirty:
			return routingv1alpha1.ReasonMigrationDeadline, fmt.Sprintf("migration Job %s to schema %s succeeded at %s, after schemagate's deadline (activeDeadlineSeconds %ds of running time, + %ds) had passed at %s; a success after the deadline never opens the gate (%s, whose schema report decides); revision %s does not start",
				oj.job.Name, required, own.at.UTC().Format(time.RFC3339), int64(jobDeadline(oj.job)/time.Second), int64(migrationGrace/time.Second),
				deadlineAt(oj.job, p.now).UTC().Format(time.RFC3339), retry, p.update)
		case own != nil && own.invalid != "":
			return routingv1alpha1.ReasonInvalidSchemaReport, fmt.Sprintf("migration Job %s succeeded, but its schema report cannot be used: %s; nothing confirms schema %s, so revision %s does not start (%s; a migration image that cannot write a report needs spec.schema.evidence: JobSuccess)",
				oj.job.Name, own.invalid, required, p.update, retry)
		case ev != nil && ev.dirty:
			return routingv1alpha1.ReasonSchemaDirty, fmt.Sprintf("%s: a migration failed half-way and only a person may clear it; revision %s does not start (fix the database, then %s)",
				ev.describe(), p.update, retry)
		case ev != nil:
			return routingv1alpha1.ReasonSchemaMismatch, fmt.Sprintf("migration Job %s succeeded, but %s, below the required %s: it did not migrate (a wrong database URL, an entrypoint that does nothing?); revision %s does not start (%s, or change spec.schema.migration.template)",
				oj.job.Name, ev.describe(), required, p.update, retry)
		}
	}
	if c := jobCondition(oj.job, batchv1.JobFailed); c != nil && c.Reason == batchv1.JobReasonDeadlineExceeded && (own == nil || !own.dirty) {
		// The Job controller stopped it at activeDeadlineSeconds and deleted its pods: the cause
		// is what they said before (status.schema.cause).
		return routingv1alpha1.ReasonMigrationDeadline, fmt.Sprintf("migration Job %s to schema %s did not finish within activeDeadlineSeconds (%ds) and the Job controller stopped it (%s)%s; annotate %s to retry; revision %s does not start",
			oj.job.Name, required, int64(jobDeadline(oj.job)/time.Second), c.Reason, p.causeOf(oj), routingv1alpha1.AnnotationRetry, p.update)
	}
	if c := jobCondition(oj.job, batchv1.JobFailed); c != nil {
		if own != nil && own.dirty {
			return routingv1alpha1.ReasonSchemaDirty, fmt.Sprintf("migration Job %s to schema %s failed (%s: %s) and %s: only a person may clear it; the Job is kept for its logs; revision %s does not start (fix the database, then %s)",
				oj.job.Name, required, c.Reason, c.Message, own.describe(), p.update, retry)
		}
		return routingv1alpha1.ReasonMigrationFailed, fmt.Sprintf("migration Job %s to schema %s failed (%s: %s)%s; it is kept for its logs and not retried automatically (annotate %s to retry, or change spec.schema.migration.template); revision %s does not start",
			oj.job.Name, required, c.Reason, podText(c.Message, maxQuoted), p.causeOf(oj), routingv1alpha1.AnnotationRetry, p.update)
	}
	return routingv1alpha1.ReasonMigrationDeadline, fmt.Sprintf("migration Job %s to schema %s did not finish within activeDeadlineSeconds (%ds)%s; annotate %s to retry; revision %s does not start",
		oj.job.Name, required, int64(jobDeadline(oj.job)/time.Second), p.causeOf(oj), routingv1alpha1.AnnotationRetry, p.update)
}

// startMigration creates attempt of the required version's migration Job, unless the RoutingService
// is paused (nothing is created) or the name is held by an object it does not control (S-21).
// started records the transition's Event and is called only when the Job is created.
func (p *planner) startMigration(attempt int32, note string, started func(name string)) {
	st := &p.status.Schema
	required := p.rsvc.Spec.Schema.Version
	job := NewMigrationJob(p.rsvc, schemaversion.Canonical(required), attempt)
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
			"pod %s of a migration Job that no longer exists is still %s; the migration to schema %s starts when it has ended, since two migrations never run at once",
			pod.Name, podPhase(pod), required))
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

// hasPods reports whether any pod controlled by oj's Job is observed.
func (p *planner) hasPods(oj *ownedJob) bool {
	for _, pod := range p.pods {
		if pod != nil && metav1.IsControlledBy(pod, oj.job) {
			return true
		}
	}
	return false
}

// podCause says, from the pods of a migration Job, why it is stuck or failed, as the pods report
// it: a container waiting (ImagePullBackOff, ErrImagePull, CreateContainerConfigError, …), a
// container that exited non-zero (with what its schema report says and the tail of the tool's
// error, or the tail of its termination message), or a pod the scheduler cannot place. It returns
// "" when the pods say nothing useful, else "pod <name>: <cause>" for the most recent pod: valid
// UTF-8, at most maxCause bytes (pod text is untrusted input).
func (p *planner) podCauseText(oj *ownedJob) string {
	var newest *corev1.Pod
	for _, pod := range p.pods {
		if pod == nil || !metav1.IsControlledBy(pod, oj.job) {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&pod.CreationTimestamp) {
			newest = pod
		}
	}
	if newest == nil {
		return ""
	}
	for _, c := range newest.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return podText(fmt.Sprintf("pod %s: %s: %s", newest.Name, c.Reason, podText(c.Message, maxQuoted)), maxCause)
		}
	}
	exited := func(name string, t *corev1.ContainerStateTerminated) string {
		return podText(fmt.Sprintf("pod %s: container %s exited %d (%s)%s", newest.Name, name, t.ExitCode, t.Reason, terminationText(t.Message)), maxCause)
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, newest.Status.InitContainerStatuses...), newest.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return podText(fmt.Sprintf("pod %s: container %s waiting: %s: %s", newest.Name, cs.Name, w.Reason, podText(w.Message, maxQuoted)), maxCause)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return exited(cs.Name, t)
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			return exited(cs.Name, t)
		}
	}
	return ""
}

// podCause is ": <podCauseText>" for a condition message, or "".
func (p *planner) podCause(oj *ownedJob) string {
	if cause := p.podCauseText(oj); cause != "" {
		return ": " + cause
	}
	return ""
}

// causeOf is ": <cause>" for a condition message: what oj's pods say now, else what
// status.schema.cause kept for it, else "".
func (p *planner) causeOf(oj *ownedJob) string {
	cause := p.podCauseText(oj)
	if cause == "" && p.status.Schema.MigrationJob == oj.job.Name {
		cause = p.status.Schema.Cause
	}
	if cause == "" {
		return ""
	}
	return ": " + cause
}

func (p *planner) migratingMessage(job string, attempt int32, cause string) string {
	msg := fmt.Sprintf("migration Job %s (attempt %d) is bringing the schema to %s%s; no pod of revision %s runs until it succeeds",
		job, attempt, p.rsvc.Spec.Schema.Version, cause, p.update)
	if p.rsvc.Spec.Schema.AllowBreakingMigration {
		if list := p.incompatibleWith(p.rsvc.Spec.Schema.Version); len(list) > 0 {
			msg += fmt.Sprintf("; spec.schema.allowBreakingMigration is set, and the migration breaks %s", describeIncompatible(list))
		}
	}
	return msg
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

// failedJobGone reports whether the stored status says the latest attempt for required ended
// without confirming it (failed, past its deadline, dirty, below the version, or with a report
// that cannot be used: attemptEndReasons) and that attempt's Job is gone (a
// ttlSecondsAfterFinished, a person), with no later attempt in the cluster. Status is untrusted,
// but here it only holds back: believing it can never start a migration or open the gate, and
// not believing it would re-run a failed migration in a loop under a TTL policy, or call a report
// that was read "never read". A report reason that a check Job may have given is left to the
// check (or a new one), which asks the database again.
func (p *planner) failedJobGone(required string, latest *ownedJob) bool {
	prev := p.rsvc.Status.Schema
	reason, ok := p.storedEnd(prev.MigrationJob)
	if !ok || (latest != nil && latest.attempt >= prev.Attempt) {
		return false
	}
	if reportReasons[reason] && (prev.CheckJob != "" || p.latestCheck(required) != nil) {
		return false
	}
	for _, j := range p.observed.Jobs {
		if j != nil && j.Name == prev.MigrationJob {
			return false
		}
	}
	return true
}

// afterVanishedAttempt handles an attempt that ended without confirming the version and whose Job
// is gone: still Stalled with the reason it had, and attempt n+1 only on a retry annotation (its
// template can no longer be compared).
func (p *planner) afterVanishedAttempt(paused bool) {
	old := p.oldCondition(routingv1alpha1.ConditionSchemaReady)
	prev := p.rsvc.Status.Schema
	required := p.rsvc.Spec.Schema.Version
	msg := p.endedMessage(prev.MigrationJob, prev.Attempt, old.Reason, "the Job has been deleted")
	// Status keeps naming the attempt that ran, not an earlier one still in the cluster.
	stored, st := p.storedSchema(), &p.status.Schema
	st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime = stored.MigrationJob, stored.Attempt, stored.StartTime, stored.CompletionTime
	switch {
	case p.retry == "":
		p.failSchema(old.Reason, msg)
	case paused:
		p.retryWaiting = true
		p.failSchema(old.Reason, fmt.Sprintf("%s; retry %q starts it when spec.paused is false", msg, p.retry))
	default:
		why, gone := fmt.Sprintf("retry %q", p.retry), prev.MigrationJob
		p.startMigration(prev.Attempt+1, fmt.Sprintf("%s of schema %s after %s (deleted)", why, required, gone), func(name string) {
			p.event(false, EventMigrationRetried, "%s: migration Job %s replaces %s (which was deleted)", why, name, gone)
			p.useRetry()
		})
	}
}
