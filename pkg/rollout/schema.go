package rollout

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// migrationGrace is how long past activeDeadlineSeconds schemagate waits for the Job controller
// to fail a migration Job by itself before it declares the deadline exceeded on its own (S-04:
// a pod that never starts must still end in bounded time).
const migrationGrace = 10 * time.Second

// ownedJob is a migration Job that counts as evidence: controlled by this RoutingService and named
// exactly as MigrationJobName(version, attempt) from its own labels, so neither a Job of another
// RoutingService nor an edited label can confirm a version (scenario S-03).
type ownedJob struct {
	job     *batchv1.Job
	version string
	attempt int32
}

func ownedJobs(rsvc *routingv1alpha1.RoutingService, jobs []*batchv1.Job) []ownedJob {
	var out []ownedJob
	for _, j := range jobs {
		if !metav1.IsControlledBy(j, rsvc) || j.Labels[LabelComponent] != ComponentMigration {
			continue
		}
		version := j.Labels[LabelSchemaVersion]
		attempt, err := strconv.Atoi(j.Labels[LabelAttempt])
		if err != nil || !schemaversion.Valid(version) || j.Name != MigrationJobName(rsvc.Name, version, int32(attempt)) {
			continue
		}
		out = append(out, ownedJob{job: j, version: version, attempt: int32(attempt)})
	}
	sort.Slice(out, func(i, k int) bool { return out[i].attempt < out[k].attempt })
	return out
}

func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		if c := &j.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// schemaGate computes status.schema and the SchemaReady condition, creates the migration Job when
// the required version is not confirmed and no Job for it exists, and reports whether the gate is
// open: whether pods of the update revision may run.
func (p *planner) schemaGate() bool {
	required := p.rsvc.Spec.Schema.Version
	st := &p.status.Schema
	st.RequiredVersion = required

	// confirmed: the highest version whose own migration Job succeeded.
	confirmed, confirmedBy := "", ""
	var latest *ownedJob // the highest attempt for the required version
	for i := range p.jobs {
		oj := &p.jobs[i]
		if jobCondition(oj.job, batchv1.JobComplete) != nil && !schemaversion.AtLeast(confirmed, oj.version) {
			confirmed, confirmedBy = oj.version, oj.job.Name
		}
		if oj.version == required {
			latest = oj
		}
	}
	st.ConfirmedVersion = confirmed
	if latest != nil {
		p.recordJob(latest)
	}

	if schemaversion.AtLeast(confirmed, required) {
		if latest == nil {
			// Confirmed by a Job of a higher version (expand-only migrations).
			st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime = confirmedBy, 0, nil, nil
		}
		if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old == nil || old.Status != metav1.ConditionTrue {
			p.event(false, EventSchemaConfirmed, "schema %s confirmed by Job %s: the gate is open for revision %s", confirmed, confirmedBy, p.update)
			if latest != nil && latest.job.Status.StartTime != nil && latest.job.Status.CompletionTime != nil {
				p.measure(PhaseMigration, "", latest.job.Status.CompletionTime.Sub(latest.job.Status.StartTime.Time))
				p.measure(PhaseGateWait, "", p.since(&latest.job.CreationTimestamp))
			}
		}
		p.schemaCondition(metav1.ConditionTrue, routingv1alpha1.ReasonSchemaConfirmed,
			fmt.Sprintf("schema %s (required %s) confirmed by the success of Job %s", confirmed, required, confirmedBy))
		return true
	}

	deadline := time.Duration(migrationDeadlineSeconds(p.rsvc)) * time.Second
	switch {
	case latest == nil && p.rsvc.Spec.Paused:
		st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime = "", 0, nil, nil
		p.schemaCondition(metav1.ConditionFalse, routingv1alpha1.ReasonMigrationPending,
			fmt.Sprintf("schema %s is required and %s is confirmed; the migration starts when spec.paused is false", required, orNone(confirmed)))
	case latest == nil:
		job := NewMigrationJob(p.rsvc, required, 1)
		p.act(Action{Kind: CreateJob, Job: job, Note: fmt.Sprintf("schema %s required, %s confirmed", required, orNone(confirmed))})
		p.event(false, EventMigrationStarted, "started migration Job %s to bring the schema from %s to %s", job.Name, orNone(confirmed), required)
		st.MigrationJob, st.Attempt = job.Name, 1
		st.StartTime, st.CompletionTime = &metav1.Time{Time: p.now}, nil
		p.schemaCondition(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(job.Name, 1, ""))
		p.requeueAt(p.now.Add(deadline + migrationGrace))
	case p.retry != "" && jobCondition(latest.job, batchv1.JobFailed) == nil && p.pastDeadline(latest) && !stopped(latest.job):
		// A retry of a migration that ran past schemagate's deadline without failing: its pods may
		// still run, and two migrations must never run at once. Suspend the Job (the Job
		// controller stops its pods; the Job stays for its logs) and start attempt n+1 once no pod
		// is left; the retry waits until then.
		if latest.job.Spec.Suspend == nil || !*latest.job.Spec.Suspend {
			p.act(Action{Kind: SuspendJob, Job: latest.job, Note: fmt.Sprintf("retry %q: stop %s's pods before attempt %d", p.retry, latest.job.Name, latest.attempt+1)})
			p.event(false, EventMigrationSuspended, "retry %q: suspending migration Job %s so that its pods stop before attempt %d starts", p.retry, latest.job.Name, latest.attempt+1)
		}
		p.retryWaiting = true
		p.schemaCondition(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating,
			fmt.Sprintf("retry: waiting for the pods of migration Job %s to stop before attempt %d starts", latest.job.Name, latest.attempt+1))
		p.requeueAt(p.now.Add(5 * time.Second))
	case p.retry != "" && (jobCondition(latest.job, batchv1.JobFailed) != nil || p.pastDeadline(latest)):
		// S-05: a retry is a new Job, attempt n+1, with its own deterministic name; the failed Job
		// stays for its logs.
		job := NewMigrationJob(p.rsvc, required, latest.attempt+1)
		p.act(Action{Kind: CreateJob, Job: job, Note: fmt.Sprintf("retry %q of schema %s after %s", p.retry, required, latest.job.Name)})
		p.event(false, EventMigrationRetried, "retry %q: migration Job %s replaces failed %s (kept for its logs)", p.retry, job.Name, latest.job.Name)
		p.useRetry()
		st.MigrationJob, st.Attempt = job.Name, latest.attempt+1
		st.StartTime, st.CompletionTime = &metav1.Time{Time: p.now}, nil
		p.schemaCondition(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(job.Name, latest.attempt+1, ""))
		p.requeueAt(p.now.Add(deadline + migrationGrace))
	case jobCondition(latest.job, batchv1.JobFailed) != nil:
		c := jobCondition(latest.job, batchv1.JobFailed)
		msg := fmt.Sprintf("migration Job %s to schema %s failed (%s: %s)%s; it is kept for its logs and not retried automatically (annotate %s to retry); revision %s does not start",
			latest.job.Name, required, c.Reason, c.Message, p.podCause(latest), routingv1alpha1.AnnotationRetry, p.update)
		p.failSchema(routingv1alpha1.ReasonMigrationFailed, msg)
	case p.pastDeadline(latest):
		msg := fmt.Sprintf("migration Job %s to schema %s did not finish within activeDeadlineSeconds (%ds)%s; annotate %s to retry; revision %s does not start",
			latest.job.Name, required, int64(jobDeadline(latest.job)/time.Second), p.podCause(latest), routingv1alpha1.AnnotationRetry, p.update)
		p.failSchema(routingv1alpha1.ReasonMigrationDeadline, msg)
	default:
		p.schemaCondition(metav1.ConditionFalse, routingv1alpha1.ReasonMigrating, p.migratingMessage(latest.job.Name, latest.attempt, p.podCause(latest)))
		p.requeueAt(latest.job.CreationTimestamp.Add(jobDeadline(latest.job) + migrationGrace))
	}
	if p.stallReason == "" {
		p.setActivity(routingv1alpha1.ReasonMigrating, p.conditionMessage(routingv1alpha1.ConditionSchemaReady))
	}
	return false
}

func (p *planner) failSchema(reason, msg string) {
	if old := p.oldCondition(routingv1alpha1.ConditionSchemaReady); old == nil || old.Reason != reason {
		p.event(true, reason, "%s", msg)
	}
	p.schemaCondition(metav1.ConditionFalse, reason, msg)
	p.stall(reason, msg)
}

// recordJob reports a migration Job in status.schema.
func (p *planner) recordJob(oj *ownedJob) {
	st := &p.status.Schema
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

func finishedAt(j *batchv1.Job, c *batchv1.JobCondition) *metav1.Time {
	if j.Status.CompletionTime != nil {
		return j.Status.CompletionTime.DeepCopy()
	}
	t := c.LastTransitionTime
	return &t
}

func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// podCause says, from the pods of a migration Job, why it is stuck or failed, as the pods report
// it: a container waiting (ImagePullBackOff, ErrImagePull, CreateContainerConfigError, …), a
// container that exited non-zero, or a pod the scheduler cannot place. It returns "" when the pods
// say nothing useful, else ": pod <name>: <cause>" for the most recent pod.
func (p *planner) podCause(oj *ownedJob) string {
	var newest *corev1.Pod
	for _, pod := range p.pods {
		if pod.Labels[LabelSchemaVersion] != oj.version || pod.Labels[LabelAttempt] != strconv.Itoa(int(oj.attempt)) || pod.Labels[LabelName] != p.rsvc.Name {
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
			return fmt.Sprintf(": pod %s: %s: %s", newest.Name, c.Reason, c.Message)
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, newest.Status.InitContainerStatuses...), newest.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return fmt.Sprintf(": pod %s: container %s waiting: %s: %s", newest.Name, cs.Name, w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf(": pod %s: container %s exited %d (%s) %s", newest.Name, cs.Name, t.ExitCode, t.Reason, t.Message)
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf(": pod %s: container %s exited %d (%s) %s", newest.Name, cs.Name, t.ExitCode, t.Reason, t.Message)
		}
	}
	return ""
}

// jobDeadline is the deadline a migration Job was created with (its activeDeadlineSeconds), so a
// later change of spec.schema.migration.activeDeadlineSeconds does not move a running Job's deadline.
func jobDeadline(j *batchv1.Job) time.Duration {
	if j.Spec.ActiveDeadlineSeconds != nil {
		return time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second
	}
	return 600 * time.Second
}

// pastDeadline reports whether schemagate's own deadline for a running migration Job has passed:
// its activeDeadlineSeconds from creation, plus migrationGrace for the Job controller to act first.
func (p *planner) pastDeadline(oj *ownedJob) bool {
	return p.now.After(oj.job.CreationTimestamp.Add(jobDeadline(oj.job) + migrationGrace))
}

// stopped reports whether a migration Job has no pod that could still be migrating: none active
// and none terminating.
func stopped(j *batchv1.Job) bool {
	return j.Status.Active == 0 && (j.Status.Terminating == nil || *j.Status.Terminating == 0)
}

func (p *planner) migratingMessage(job string, attempt int32, cause string) string {
	return fmt.Sprintf("migration Job %s (attempt %d) is bringing the schema to %s%s; no pod of revision %s runs until it succeeds",
		job, attempt, p.rsvc.Spec.Schema.Version, cause, p.update)
}
