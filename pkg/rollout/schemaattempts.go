package rollout

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The migration's attempts once one failed, ran past its deadline or vanished: Stalled, or attempt
// n+1 when a new retry annotation or a changed migration template asks for it.

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
		same := ""
		if latest.job.Annotations[annotationMigrationTemplate] == migrationTemplateHash(p.rsvc) {
			// Said, so nobody takes a retry of a broken migration for a fix of it.
			same = "; its migration template is unchanged since that attempt, so the same migration runs again"
		}
		p.startMigration(next, fmt.Sprintf("%s of schema %s after %s", why, required, latest.job.Name), func(name string) {
			p.event(false, EventMigrationRetried, "%s: migration Job %s replaces %s (kept for its logs)%s", why, name, latest.job.Name, same)
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
