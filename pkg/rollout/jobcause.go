package rollout

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Why a schema Job is where it is, for messages: its pods' causes (an image that does not pull, a
// pod that cannot be scheduled), read from the pods it controls, bounded like every pod text.

// hasPods reports whether any pod controlled by oj's Job is observed.
func (p *planner) hasPods(oj *ownedJob) bool {
	for _, pod := range p.observed.Pods {
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
	newest := newestPodOf(oj.job, p.observed.Pods)
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
