package rollout

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemareport"
)

// How long a migration Job may take, when it counts as suspended by someone else, and how text
// copied from its pods is bounded.

// maxCause bounds status.schema.cause (its CRD limit); maxQuoted bounds one message quoted from a
// pod (a waiting reason's message, a Job condition's message).
const (
	maxCause  = 1024
	maxQuoted = 512
)

// deadlineAt is when schemagate's own deadline for a migration (or check) Job passes: its
// activeDeadlineSeconds of running time, plus migrationGrace for the Job controller to act
// first. Running time counts, as for the Job controller, from the Job's status.startTime, which
// the Job controller sets when the Job starts and again when it is resumed, so time spent
// suspended (a queue such as Kueue) does not count; from its creation when it has no startTime
// (a Job whose pods are never created still ends, I3). A startTime in the future is taken as now.
// A resumed Job counts from its resume (resumedAt) even before the Job controller has written the
// new startTime: from the moment schemagate first saw it released, or, in the reconcile that sees
// that first, from now.
// Worked numbers: created 12:00, suspended by a queue until 12:30 (startTime 12:30),
// activeDeadlineSeconds 600 → the deadline passes at 12:40:10; the same when the Job controller
// writes startTime only at 12:31, or never.
func deadlineAt(j *batchv1.Job, now time.Time) time.Time {
	base := j.CreationTimestamp.Time
	if st := notAfter(j.Status.StartTime, now); st != nil && st.After(base) {
		base = st.Time
	}
	if r, ok := resumedAt(j, now); ok && r.After(base) {
		base = r
	} else if !ok && resuming(j) {
		base = now
	}
	return base.Add(jobDeadline(j) + migrationGrace)
}

// annotationResumedAt records on a migration Job when schemagate first saw it released from a
// suspension (spec.suspend false) that the Job controller had not yet acted on (its Suspended
// condition still True): an RFC 3339 time, so that the deadline of a resumed Job counts from its
// resume whatever the Job controller does.
const annotationResumedAt = "schemagate.io/resumed-at"

// resuming reports whether j is unfinished, no longer asked to be suspended, and still Suspended
// for the Job controller: it has just been resumed.
func resuming(j *batchv1.Job) bool {
	return !ptr.Deref(j.Spec.Suspend, false) && !JobFinished(j) && jobCondition(j, batchv1.JobSuspended) != nil
}

// resumedAt is when j was last resumed, as the cluster says: the transition of its Suspended
// condition to False (the Job controller's resume), or, while it is still True, annotationResumedAt
// when that is after the suspension began and not in the future (the annotation is untrusted).
// False when j was never resumed, or no valid time says when.
func resumedAt(j *batchv1.Job, now time.Time) (time.Time, bool) {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionFalse {
			return notAfter(&c.LastTransitionTime, now).Time, true
		}
	}
	c := jobCondition(j, batchv1.JobSuspended)
	if c == nil || ptr.Deref(j.Spec.Suspend, false) {
		return time.Time{}, false
	}
	v, ok := j.Annotations[annotationResumedAt]
	if !ok || len(v) > 64 {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil || at.After(now) || at.Before(c.LastTransitionTime.Time) {
		return time.Time{}, false
	}
	return at, true
}

// markResumed plans annotationResumedAt on the latest migration attempt when it has just been
// resumed and no valid time says since when.
func (p *planner) markResumed(latest *ownedJob) {
	if latest == nil || !resuming(latest.job) {
		return
	}
	if _, ok := resumedAt(latest.job, p.now); ok {
		return
	}
	p.act(Action{Kind: AnnotateJob, Job: latest.job, Annotations: map[string]string{annotationResumedAt: p.now.UTC().Format(time.RFC3339)},
		Note: "released from its suspension: its deadline counts from now"})
}

// queued reports whether a migration Job is suspended by someone other than schemagate (a queue
// holds it until capacity is free): spec.suspend is set, it has not finished, and its Suspended
// condition was set before its deadline had passed. schemagate itself suspends only Jobs that
// are over (past their deadline, or superseded), so a suspension before the deadline is not its
// own.
func queued(j *batchv1.Job) bool {
	_, ok := queuedSince(j)
	return ok
}

// queuedSince is when a queued Job was suspended (its Suspended condition's transition time).
func queuedSince(j *batchv1.Job) (time.Time, bool) {
	if !ptr.Deref(j.Spec.Suspend, false) || JobFinished(j) {
		return time.Time{}, false
	}
	c := jobCondition(j, batchv1.JobSuspended)
	if c == nil {
		return time.Time{}, false
	}
	since := c.LastTransitionTime.Time
	if since.Before(j.CreationTimestamp.Time) {
		since = j.CreationTimestamp.Time
	}
	if since.After(deadlineAt(j, since)) {
		return time.Time{}, false
	}
	return since, true
}

// migrationQueued reports the latest attempt while someone else keeps it suspended: nothing
// runs and its deadline does not run (MigrationSuspended, Reconciling); once it has been
// suspended longer than its activeDeadlineSeconds, Stalled until it is released (I3: the wait
// ends in a terminal condition; releasing it still runs it, with its whole deadline).
func (p *planner) migrationQueued(latest *ownedJob) {
	st := &p.status.Schema
	since, _ := queuedSince(latest.job)
	since = notAfter(&metav1.Time{Time: since}, p.now).Time
	st.SuspendedSince = &metav1.Time{Time: since}
	limit := jobDeadline(latest.job)
	msg := fmt.Sprintf("migration Job %s (attempt %d) to schema %s is suspended since %s by someone other than schemagate (a queue such as Kueue holds it until capacity is free): nothing runs, and its activeDeadlineSeconds does not run while it is suspended; no pod of revision %s runs until it succeeds",
		latest.job.Name, latest.attempt, p.rsvc.Spec.Schema.Version, since.UTC().Format(time.RFC3339), p.update)
	if p.now.After(since.Add(limit)) {
		p.failSchema(routingv1alpha1.ReasonMigrationSuspended, fmt.Sprintf("%s; it has been suspended for longer than activeDeadlineSeconds (%ds): free capacity in its queue or release it, and it runs", msg, int64(limit/time.Second)))
		return
	}
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonMigrationSuspended, msg)
	// Released, the Job's status changes and wakes the reconciler; the stall is looked at then.
	p.requeueAt(since.Add(limit + time.Second))
}

// podText makes text copied from a pod or a Job safe for a condition: valid UTF-8 (invalid bytes
// become U+FFFD, so what is written encodes as computed), and at most n bytes, keeping the tail
// (the end of a tool's output says what went wrong) after "…".
func podText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := len(s) - (n - len("…"))
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return "…" + s[cut:]
}

// terminationText says what a container's termination message says, for a cause: a schema
// report is described (version, dirty, and the tail of the tool's error it carries), anything
// else is quoted by its tail; "" when empty.
func terminationText(message string) string {
	if strings.TrimSpace(message) == "" {
		return ""
	}
	r, err := schemareport.Parse([]byte(message))
	if err != nil {
		return ": " + podText(strings.TrimSpace(message), maxQuoted)
	}
	dirty := ""
	if r.Dirty {
		dirty = ", dirty"
	}
	out := fmt.Sprintf(": its schema report says the database is at version %s%s", r.Version, dirty)
	if r.Error != "" {
		out += "; the tool said: " + podText(r.Error, maxQuoted)
	}
	return out
}

// mergeMetadata returns user's entries with ours over them (ours win).
func mergeMetadata(user, ours map[string]string) map[string]string {
	if len(user) == 0 && len(ours) == 0 {
		return nil
	}
	return mergeLabels(user, ours)
}

// jobMetadata is spec.schema.migration.jobMetadata, empty when unset.
func jobMetadata(rsvc *routingv1alpha1.RoutingService) routingv1alpha1.JobMetadata {
	if m := rsvc.Spec.Schema.Migration.JobMetadata; m != nil {
		return *m
	}
	return routingv1alpha1.JobMetadata{}
}

// S-36. A migration whose DDL waits for a lock another session holds (a long transaction, a
// dump) is, to the API, a Job that stays active: the manager cannot ask the database. So while a
// migration runs its condition says for how long, and when schemagate's deadline ends it, and
// hints at the likeliest cause of a long wait. The elapsed time moves in steps, so that the
// condition (a status write each time it changes) changes a handful of times, not every
// reconcile: 10 s steps in the first minute, minutes up to 10 min, then 5 min. Worked numbers:
// started 12:00:00, seen at 12:00:47 → "running for 40 s", refreshed at 12:00:50; at 12:03:20
// → "running for 3 min", refreshed at 12:04:00.

// runStart is when a migration Job started running: its status.startTime (reset when a queue
// releases it), else its creation; never in the future.
func runStart(j *batchv1.Job, now time.Time) time.Time {
	start := j.CreationTimestamp.Time
	if st := notAfter(j.Status.StartTime, now); st != nil && st.After(start) {
		start = st.Time
	}
	if start.After(now) {
		start = now
	}
	return start
}

// elapsedStep rounds d down to its step and returns it with the step's length.
func elapsedStep(d time.Duration) (shown, step time.Duration) {
	switch {
	case d < time.Minute:
		step = 10 * time.Second
	case d < 10*time.Minute:
		step = time.Minute
	default:
		step = 5 * time.Minute
	}
	return d.Truncate(step), step
}

// formatElapsed is a stepped duration as the message says it: "40 s", "3 min", "1 h 5 min".
func formatElapsed(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int64(d/time.Minute))
	}
	return fmt.Sprintf("%d h %d min", int64(d/time.Hour), int64(d%time.Hour/time.Minute))
}

// runningFor is the part of the Migrating message that says how long the attempt has run, when
// the deadline ends it, and why a migration may wait.
func (p *planner) runningFor(j *batchv1.Job, attempt int32) string {
	return p.runningSince(runStart(j, p.now), deadlineAt(j, p.now), attempt)
}

// runningSince is runningFor for an attempt that started at start and ends at deadline (also for
// one just created, so that the next reconcile, which sees the Job, says the same).
func (p *planner) runningSince(start, deadline time.Time, attempt int32) string {
	shown, _ := elapsedStep(p.now.Sub(start))
	return fmt.Sprintf("; attempt %d has been running for %s (since %s) and schemagate's deadline ends it at %s (a migration that takes longer than expected may be waiting for a lock another session holds)",
		attempt, formatElapsed(shown), start.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339))
}

// nextElapsedStep is when the elapsed time shown for a running migration Job next changes.
func (p *planner) nextElapsedStep(j *batchv1.Job) time.Time {
	start := runStart(j, p.now)
	shown, step := elapsedStep(p.now.Sub(start))
	return start.Add(shown + step)
}
