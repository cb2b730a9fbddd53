package rollout

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// annotationAfterAttempt records, on a check Job, the migration attempt for its version that was
// the latest when it was created (0: none). A check decides the gate only while no later
// migration attempt exists, so the order of the two never depends on timestamps of one second.
const annotationAfterAttempt = "schemagate.io/after-attempt"

// latestAttempt returns the migration Job for version with the highest attempt, if any.
func (p *planner) latestAttempt(version string) *ownedJob {
	var out *ownedJob
	for i := range p.jobs {
		if oj := &p.jobs[i]; schemaversion.Equal(oj.version, version) {
			out = oj
		}
	}
	return out
}

// checkRunning reports whether a check Job (with its reading r, if any) has still to report: it
// has not finished and is within activeDeadlineSeconds + migrationGrace, or it finished and the
// cache does not yet show its pod finished. wake is when to look again.
func (p *planner) checkRunning(check *ownedJob, r *reading) (running bool, wake time.Time) {
	if r != nil && r.pending {
		return true, p.now.Add(2 * time.Second)
	}
	deadline := check.job.CreationTimestamp.Add(jobDeadline(check.job) + migrationGrace)
	finished := jobCondition(check.job, batchv1.JobComplete) != nil || jobCondition(check.job, batchv1.JobFailed) != nil
	return !finished && !p.now.After(deadline), deadline
}

// latestCheck returns the check Job for version with the highest number, if any.
func (p *planner) latestCheck(version string) *ownedJob {
	var out *ownedJob
	for i := range p.checks {
		if oj := &p.checks[i]; schemaversion.Equal(oj.version, version) {
			out = oj
		}
	}
	return out
}

// afterAttempt is the migration attempt a check Job was created after (0 when unreadable).
func afterAttempt(check *ownedJob) int32 {
	n, err := strconv.Atoi(check.job.Annotations[annotationAfterAttempt])
	if err != nil || n < 0 || n > 1<<30 {
		return 0
	}
	return int32(n)
}

// checkDecides reports whether check, not the latest migration attempt, decides the gate: it was
// created after that attempt (or there is none). The annotation is believed only when the
// creation times agree, so a hand edit cannot make an older check outrank a newer attempt.
func checkDecides(check, latest *ownedJob) bool {
	return latest == nil || (afterAttempt(check) >= latest.attempt && !check.job.CreationTimestamp.Before(&latest.job.CreationTimestamp))
}

// needsCheckAfter reports whether, with spec.schema.check.afterMigration, the evidence ev still
// needs a check Job's confirmation: it is the report of the required version's own migration
// attempt (a check that confirmed since would be the evidence instead).
func (p *planner) needsCheckAfter(ev *reading, latest *ownedJob) bool {
	c := p.rsvc.Spec.Schema.Check
	if c == nil || !c.AfterMigration || latest == nil || ev == nil || ev.oj != latest {
		return false
	}
	check := p.latestCheck(p.rsvc.Spec.Schema.Version)
	return check == nil || !checkDecides(check, latest) || !readingOf(p.readings, check).confirms(p.rsvc.Spec.Schema.Version)
}

// checkAfterMigrationDue: with check.afterMigration, the latest attempt succeeded and its report
// confirms the required version, so a check Job runs next.
func (p *planner) checkAfterMigrationDue(latest *ownedJob) bool {
	c := p.rsvc.Spec.Schema.Check
	if c == nil || !c.AfterMigration || latest == nil {
		return false
	}
	r := readingOf(p.readings, latest)
	return r != nil && r.confirms(p.rsvc.Spec.Schema.Version)
}

// evidenceLost reports whether the required version was confirmed before and the evidence is gone
// now: no migration attempt for it is left, or the latest one succeeded but its pods (and report)
// are gone (S-23).
func (p *planner) evidenceLost(latest *ownedJob) bool {
	if latest != nil {
		if r := readingOf(p.readings, latest); r == nil || !r.gone {
			return false
		}
	}
	return p.wasConfirmed()
}

// nextCheck is the number of the next check Job for the required version.
func (p *planner) nextCheck() int32 {
	if c := p.latestCheck(p.rsvc.Spec.Schema.Version); c != nil {
		return c.attempt + 1
	}
	return 1
}

// wasConfirmed reports whether the required version was confirmed before this reconcile: the stored
// status says so, or a ReplicaSet this RoutingService controls whose revision requires that
// version or a higher one has served its shard. Either may be wrong (status is untrusted), but
// here they only hold back: believing them runs a read-only check instead of a migration and keeps
// conditions as they were; it never opens the gate.
func (p *planner) wasConfirmed() bool {
	required := p.rsvc.Spec.Schema.Version
	if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old != nil && old.Status == metav1.ConditionTrue &&
		schemaversion.AtLeast(p.rsvc.Status.Schema.ConfirmedVersion, required) {
		return true
	}
	// A check for the required version was under way (and its Job may be gone too).
	if prev := p.rsvc.Status.Schema; prev.CheckJob != "" && schemaversion.Equal(prev.RequiredVersion, required) {
		return true
	}
	// The stored status names an attempt for the required version whose Job is gone, long enough
	// ago that the cache has seen it: it may have succeeded and been deleted before it was read.
	if p.attemptVanished() {
		return true
	}
	for _, set := range p.shards {
		for _, rs := range set.all {
			// A revision that also runs on the schema confirmed now served without the required
			// version (binary-first): that is no sign of lost evidence.
			if !p.untrusted[rs] && hasServed(rs) && schemaversion.AtLeast(RequiredSchema(rs), required) && !p.revisionRange(rs).Contains(p.confirmedNow()) {
				return true
			}
		}
	}
	return false
}

// attemptVanished reports whether the stored status names a migration attempt for the required
// version whose Job is not observed, and was created more than reportLag ago (a Job created an
// instant ago may simply not be in the cache yet: see cacheLagging).
func (p *planner) attemptVanished() bool {
	prev := p.storedSchema()
	if !p.storedAttemptMissing() || prev.StartTime == nil {
		return false
	}
	return p.now.After(prev.StartTime.Add(reportLag))
}

// cacheLagging reports whether the stored status names a migration attempt for the required
// version, created less than reportLag ago, that the cache does not show yet: nothing is started
// until it does (or until it is known to be gone), so a stale cache never starts a second
// migration or reuses a name (S-10).
func (p *planner) cacheLagging() bool {
	prev := p.storedSchema()
	return p.storedAttemptMissing() && prev.StartTime != nil && !p.now.After(prev.StartTime.Add(reportLag))
}

func (p *planner) storedAttemptMissing() bool {
	prev := p.rsvc.Status.Schema
	if prev.MigrationJob == "" || prev.Attempt < 1 || !schemaversion.Equal(prev.RequiredVersion, p.rsvc.Spec.Schema.Version) ||
		prev.MigrationJob != MigrationJobName(p.rsvc.Name, schemaversion.Canonical(p.rsvc.Spec.Schema.Version), prev.Attempt) {
		return false
	}
	for _, j := range p.observed.Jobs {
		if j != nil && j.Name == prev.MigrationJob {
			return false
		}
	}
	return true
}

// reconfirm handles lost evidence (S-23) before any check Job for it exists: with spec.schema.check
// a check Job asks the database, and everything is held as it is meanwhile; without one, a steady
// RoutingService stays as it is (nothing needs the gate) and a rollout in progress is Stalled with
// SchemaEvidenceLost, until a retry annotation runs the migration again as attempt n+1.
func (p *planner) reconfirm(latest *ownedJob, paused bool) {
	required := p.rsvc.Spec.Schema.Version
	gone := p.lostEvidence(latest)
	next := p.nextAttempt(latest)
	switch {
	case p.rsvc.Spec.Schema.Check != nil && p.checkAfterMigrationDue(latest) && paused:
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonCheckingSchema,
			fmt.Sprintf("migration Job %s succeeded; the check Job that confirms schema %s starts when spec.paused is false", latest.job.Name, required))
	case p.rsvc.Spec.Schema.Check != nil && p.checkAfterMigrationDue(latest):
		p.startCheck(p.nextCheck(), latest, fmt.Sprintf("confirm schema %s after migration Job %s", required, latest.job.Name))
	case p.rsvc.Spec.Schema.Check != nil && paused:
		p.hold(fmt.Sprintf("%s; the check Job that asks the database starts when spec.paused is false; nothing is created or scaled up until it reports", gone))
	case p.rsvc.Spec.Schema.Check != nil:
		if p.startCheck(p.nextCheck(), latest, fmt.Sprintf("%s: ask the database", gone)) {
			p.event(false, EventSchemaEvidenceLost, "%s: a check Job asks the database instead of running the migration again", gone)
		}
	case p.retry != "" && paused:
		p.retryWaiting = true
		p.hold(fmt.Sprintf("%s; retry %q runs the migration again (attempt %d) when spec.paused is false", gone, p.retry, next))
	case p.retry != "":
		why := fmt.Sprintf("retry %q", p.retry)
		p.startMigration(next, fmt.Sprintf("%s of schema %s: %s", why, required, gone), func(name string) {
			p.event(false, EventMigrationRetried, "%s: migration Job %s runs the migration again (%s)", why, name, gone)
			p.useRetry()
		})
	case p.allPromoted():
		// Steady: nothing needs the gate, so nothing flips; a scale-up waits for new evidence.
		msg := fmt.Sprintf("%s and spec.schema.check is not set: every shard keeps serving, but no pod is created or scaled up until the schema is confirmed again (set spec.schema.check, or annotate %s to run the migration again as attempt %d)",
			gone, routingv1alpha1.AnnotationRetry, next)
		if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old == nil || old.Reason != routingv1alpha1.ReasonSchemaConfirmed || old.Message != msg {
			p.event(true, EventSchemaEvidenceLost, "%s", msg)
		}
		p.hold(msg)
	default:
		p.keepConfirmedRecord()
		p.failSchema(routingv1alpha1.ReasonSchemaEvidenceLost, fmt.Sprintf("%s and spec.schema.check is not set, so nothing can confirm it again; revision %s does not start (set spec.schema.check, or annotate %s to run the migration again as attempt %d)",
			gone, p.update, routingv1alpha1.AnnotationRetry, next))
	}
}

// lostEvidence says what disappeared, for messages.
func (p *planner) lostEvidence(latest *ownedJob) string {
	required := p.rsvc.Spec.Schema.Version
	prev := p.rsvc.Status.Schema
	switch {
	case latest != nil:
		return fmt.Sprintf("schema %s was confirmed by migration Job %s, whose pods and schema report are gone", required, latest.job.Name)
	case p.storedAttemptMissing() && prev.ConfirmedBy == prev.MigrationJob && schemaversion.AtLeast(prev.ConfirmedVersion, required):
		return fmt.Sprintf("schema %s was confirmed by the schema report of migration Job %s (attempt %d), which has since been deleted", required, prev.MigrationJob, prev.Attempt)
	case p.storedAttemptMissing():
		return fmt.Sprintf("migration Job %s (attempt %d) to schema %s is gone, and what it did was never read", prev.MigrationJob, prev.Attempt, required)
	case prev.CheckJob != "" && schemaversion.Equal(prev.RequiredVersion, required):
		return fmt.Sprintf("the evidence for schema %s is gone, and so is check Job %s that was asking the database", required, prev.CheckJob)
	case p.rsvc.Status.Schema.MigrationJob != "":
		return fmt.Sprintf("schema %s was confirmed by Job %s, which is gone", required, p.rsvc.Status.Schema.MigrationJob)
	default:
		return fmt.Sprintf("schema %s was confirmed, and the Job that confirmed it is gone", required)
	}
}

// nextAttempt is the number of the next migration attempt for the required version: after the
// latest one that exists, and after the one the stored status names (its Job may be gone), so a
// deleted attempt's name is never reused.
func (p *planner) nextAttempt(latest *ownedJob) int32 {
	n := int32(0)
	if latest != nil {
		n = latest.attempt
	}
	if prev := p.rsvc.Status.Schema; schemaversion.Equal(prev.RequiredVersion, p.rsvc.Spec.Schema.Version) && prev.Attempt > n && prev.Attempt < 1<<20 {
		n = prev.Attempt
	}
	return n + 1
}

// allPromoted reports whether every shard's step says the update revision is promoted (steps are
// believed only with evidence in the cluster: newPlanner).
func (p *planner) allPromoted() bool {
	for _, shard := range p.rsvc.Spec.Shards {
		if ss := p.shardStatus(shard.Name); ss.StepRevision != p.update || ss.Step != routingv1alpha1.ShardStepPromoted {
			return false
		}
	}
	return true
}

// hold keeps the schema conditions as they were while the evidence is being re-established: a
// SchemaReady that was True stays True (with msg), so Ready does not flip in a steady state; the
// gate itself stays closed (mayRun reads only evidence), so nothing is created or scaled up.
func (p *planner) hold(msg string) {
	p.keepConfirmedRecord()
	if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old != nil && old.Status == metav1.ConditionTrue {
		p.holding = true
		p.decideSchema(metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed, msg)
		return
	}
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonCheckingSchema, msg)
}

// startCheck creates the n-th check Job for the required version and holds everything while it
// runs, unless a migration may still be changing the database (it waits) or the name is held by
// another object (NameConflict). It reports whether the Job is created.
func (p *planner) startCheck(n int32, latest *ownedJob, note string) bool {
	required := p.rsvc.Spec.Schema.Version
	job := NewCheckJob(p.rsvc, schemaversion.Canonical(required), n)
	job.Annotations = map[string]string{annotationAfterAttempt: "0"}
	if latest != nil {
		job.Annotations[annotationAfterAttempt] = strconv.Itoa(int(latest.attempt))
	}
	if running := p.migrationStillRunning(); running != "" {
		p.retryWaiting = p.retry != ""
		p.hold(fmt.Sprintf("%s: %s, so the check Job %s waits for it to end", note, running, job.Name))
		p.requeueAt(p.now.Add(5 * time.Second))
		return false
	}
	if holder := p.taken("Job", job.Name); holder != "" {
		p.failSchema(routingv1alpha1.ReasonNameConflict, fmt.Sprintf(
			"check Job %s/%s cannot be created: %s; schemagate never takes it as evidence; delete or rename it and the check of schema %s starts",
			p.rsvc.Namespace, job.Name, holder, required))
		p.requeueAt(p.now.Add(conflictRecheck))
		return false
	}
	p.act(Action{Kind: CreateJob, Job: job, Note: note})
	p.event(false, EventCheckStarted, "%s: started check Job %s", note, job.Name)
	p.status.Schema.CheckJob = job.Name
	p.hold(fmt.Sprintf("%s: check Job %s asks the database whether it is at schema %s; no pod is created or scaled up until it reports", note, job.Name, required))
	p.setActivity(routingv1alpha1.ReasonCheckingSchema, p.schemaMessage())
	p.requeueAt(p.now.Add(time.Duration(p.rsvc.Spec.Schema.Check.ActiveDeadlineSecondsOrDefault())*time.Second + migrationGrace))
	return true
}

// afterCheck handles the latest check Job once it decides the gate (it ran after the latest
// migration attempt) and the gate is not open: it is still running (hold), or it reported a
// version below the required one (SchemaMismatch), a dirty database (SchemaDirty), no usable
// report (InvalidSchemaReport), or failed (SchemaCheckFailed). Each of those is Stalled; a retry
// runs the migration again when the database is behind or was dirty, and the check again when the
// check itself gave no answer.
func (p *planner) afterCheck(check, latest *ownedJob, paused bool) {
	required := p.rsvc.Spec.Schema.Version
	r := readingOf(p.readings, check)
	failed := jobCondition(check.job, batchv1.JobFailed)
	if running, wake := p.checkRunning(check, r); running {
		msg := fmt.Sprintf("check Job %s asks the database whether it is at schema %s; no pod is created or scaled up until it reports", check.job.Name, required)
		if p.wasConfirmed() {
			msg = fmt.Sprintf("%s: %s", p.lostEvidence(latest), msg)
		}
		p.hold(msg)
		p.setActivity(routingv1alpha1.ReasonCheckingSchema, msg)
		p.requeueAt(wake)
		return
	}
	ev := evidence(p.readings)
	reason, msg, migrate := "", "", false
	switch {
	case r != nil && r.usable() && r.dirty:
		reason, msg, migrate = routingv1alpha1.ReasonSchemaDirty, fmt.Sprintf("%s: a migration failed half-way and only a person may clear it; revision %s does not start (fix the database, then annotate %s to run the migration)", r.describe(), p.update, routingv1alpha1.AnnotationRetry), true
	case r != nil && r.usable() && r.confirms(required) && ev != nil && ev.dirty:
		// The check confirmed, but a later reading says the database is dirty now.
		reason, msg, migrate = routingv1alpha1.ReasonSchemaDirty, fmt.Sprintf("%s: only a person may clear it; revision %s does not start (fix the database, then annotate %s)", ev.describe(), p.update, routingv1alpha1.AnnotationRetry), true
	case r != nil && r.usable() && r.confirms(required) && ev != nil:
		reason, msg, migrate = routingv1alpha1.ReasonSchemaMismatch, fmt.Sprintf("%s, below the required %s; revision %s does not start (annotate %s to run the migration as attempt %d)", ev.describe(), required, p.update, routingv1alpha1.AnnotationRetry, p.nextAttempt(latest)), true
	case r != nil && r.usable():
		reason, msg, migrate = routingv1alpha1.ReasonSchemaMismatch, fmt.Sprintf("%s, below the required %s; revision %s does not start (annotate %s to run the migration as attempt %d)", r.describe(), required, p.update, routingv1alpha1.AnnotationRetry, p.nextAttempt(latest)), true
	case r != nil && r.invalid != "":
		reason, msg = routingv1alpha1.ReasonInvalidSchemaReport, fmt.Sprintf("check Job %s succeeded, but its schema report cannot be used: %s; revision %s does not start (annotate %s to run the check again)", check.job.Name, r.invalid, p.update, routingv1alpha1.AnnotationRetry)
	case failed != nil:
		reason, msg = routingv1alpha1.ReasonSchemaCheckFailed, fmt.Sprintf("check Job %s failed (%s: %s)%s; revision %s does not start (annotate %s to run the check again)", check.job.Name, failed.Reason, failed.Message, p.podCause(check), p.update, routingv1alpha1.AnnotationRetry)
	default:
		reason, msg = routingv1alpha1.ReasonSchemaCheckFailed, fmt.Sprintf("check Job %s did not finish within activeDeadlineSeconds (%ds)%s; revision %s does not start (annotate %s to run the check again)", check.job.Name, int64(jobDeadline(check.job)/time.Second), p.podCause(check), p.update, routingv1alpha1.AnnotationRetry)
	}
	if ev != nil && ev != r && r != nil && r.usable() {
		// A later reading (a failed migration's dirty report) is what the database is at now.
		msg = fmt.Sprintf("%s; since then %s", msg, ev.describe())
	}
	switch {
	case p.retry == "":
		p.failSchema(reason, msg)
	case paused:
		p.retryWaiting = true
		p.failSchema(reason, fmt.Sprintf("%s; retry %q acts when spec.paused is false", msg, p.retry))
	case migrate || p.rsvc.Spec.Schema.Check == nil:
		// With spec.schema.check removed since, the migration is the only way left to ask.
		why, next := fmt.Sprintf("retry %q", p.retry), p.nextAttempt(latest)
		p.startMigration(next, fmt.Sprintf("%s of schema %s after check Job %s", why, required, check.job.Name), func(name string) {
			p.event(false, EventMigrationRetried, "%s: migration Job %s brings the schema to %s after check Job %s", why, name, required, check.job.Name)
			p.useRetry()
		})
	default:
		if p.startCheck(check.attempt+1, latest, fmt.Sprintf("retry %q after check Job %s", p.retry, check.job.Name)) {
			p.useRetry()
		}
	}
}
