package rollout

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The migration container and its report before the Job ends. A migration pod may carry a second
// container that never exits (a proxy injected by a service mesh): the migration container exits
// 0 with its report, and the Job stays active until its deadline, when the Job controller fails it
// and deletes its pod, report and all. The report is read as soon as the migration container has
// terminated, and recorded on the Job, so that it stays the evidence after the pod is gone.
// Native sidecars (init containers with restartPolicy: Always) need none of this: the kubelet
// stops them once the migration container exits, and the Job completes.

// AnnotationSchemaReport records, on a migration Job, the schema report its migration container
// wrote (its termination message), copied by schemagate once that container terminated with exit
// code 0 while the Job was still active. It is read only from a Job this RoutingService controls,
// under the Job's deterministic name, and only when the Job's pods no longer give a usable report.
const AnnotationSchemaReport = "schemagate.io/schema-report"

// migrationContainer names the migration container of a migration Job's pods: the first
// container of the Job's pod template, which schemagate created from
// spec.schema.migration.template.spec.containers[0]. Containers an admission webhook adds to the
// pods (before or after it) and init containers, native sidecars included, are never it.
func migrationContainer(j *batchv1.Job) string {
	if cs := j.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Name
	}
	return ""
}

// readEarly reads the report of a migration Job that has not finished (and is not suspended) from
// its newest pod whose migration container has terminated with exit code 0: the database is at
// what that report says, whatever another container still does. Under evidence JobSuccess that
// exit code confirms the Job's version when no report parses, as the Job's success would. It
// returns nil while the migration container runs, failed, or left a report that does not parse
// (the Job's own end is read then).
func (p *planner) readEarly(oj *ownedJob, jobSuccess bool) *reading {
	name := migrationContainer(oj.job)
	if name == "" || ptr.Deref(oj.job.Spec.Suspend, false) {
		return nil
	}
	var pod *corev1.Pod
	var term *corev1.ContainerStateTerminated
	for _, candidate := range p.observed.Pods {
		if candidate == nil || !metav1.IsControlledBy(candidate, oj.job) || (pod != nil && !pod.CreationTimestamp.Before(&candidate.CreationTimestamp)) {
			continue
		}
		for _, cs := range candidate.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == name && t != nil && t.ExitCode == 0 {
				pod, term = candidate, t
			}
		}
	}
	if pod == nil {
		return nil
	}
	at := term.FinishedAt.Time
	if at.IsZero() || at.After(p.now) {
		at = p.now
	}
	report, err := schemareport.Parse([]byte(term.Message))
	switch {
	case err == nil:
		return &reading{oj: oj, at: at, version: schemaversion.Canonical(report.Version), dirty: report.Dirty, tool: report.Tool, fromReport: true, early: term.Message}
	case jobSuccess:
		return &reading{oj: oj, at: at, version: oj.version}
	}
	return nil
}

// readRecorded is the reading of the report recorded on a migration Job (AnnotationSchemaReport),
// or nil when there is none that parses.
func readRecorded(oj *ownedJob, at time.Time) *reading {
	msg, ok := oj.job.Annotations[AnnotationSchemaReport]
	if !ok || oj.check {
		return nil
	}
	report, err := schemareport.Parse([]byte(msg))
	if err != nil {
		return nil
	}
	return &reading{oj: oj, at: at, version: schemaversion.Canonical(report.Version), dirty: report.Dirty, tool: report.Tool, fromReport: true, recorded: true}
}

// readEnding is the recorded report of a migration Job the Job controller is ending but has not
// marked Failed yet: since Kubernetes 1.31 it first adds FailureTarget (at activeDeadlineSeconds,
// say), deletes the pods, and adds Failed only once they are gone. In between, the Job is not
// finished and its pods no longer say anything, so without this the report recorded from its
// migration container (readEarly) would vanish for a moment and close an open gate. nil unless
// the Job carries FailureTarget, no pod of it is left in the cache and a recorded report parses.
func (p *planner) readEnding(oj *ownedJob) *reading {
	if jobCondition(oj.job, batchv1.JobFailureTarget) == nil || p.hasPods(oj) {
		return nil
	}
	r := readRecorded(oj, p.now)
	if r == nil {
		return nil
	}
	r.at = finishedAt(oj.job, jobCondition(oj.job, batchv1.JobFailureTarget)).Time
	return r
}

// recordEarlyReports asks for the report of every early reading to be recorded on its Job, so that
// it outlives the pod (the Job controller deletes it at the deadline).
func (p *planner) recordEarlyReports() {
	for _, r := range p.readings {
		if r.early == "" || r.oj.job.Annotations[AnnotationSchemaReport] == r.early {
			continue
		}
		p.act(Action{Kind: AnnotateJob, Job: r.oj.job, Annotations: map[string]string{AnnotationSchemaReport: r.early},
			Note: fmt.Sprintf("migration container %s terminated with its schema report while the Job is still active: keep the report on the Job", migrationContainer(r.oj.job))})
	}
}

// stopReportedJobs asks for every migration Job whose early report is recorded on it
// (recordEarlyReports, a reconcile before) to be stopped (StopJob): the migration ran once and
// said so, and nothing may run it again. Without this, deleting the pod a sidecar keeps running
// (a drain, an eviction, a person) makes the Job controller start another pod, whose migration
// container runs the migration a second time (issue 42 item 9; docs/schema-report.md promises a
// migration that reported clean is never run again). Only the report recorded on the Job is
// waited for, so the evidence outlives the pods the stop deletes.
func (p *planner) stopReportedJobs() {
	for _, r := range p.readings {
		if r.early == "" || r.oj.job.Annotations[AnnotationSchemaReport] != r.early || stoppedAfterReport(r.oj.job) {
			continue
		}
		p.act(Action{Kind: StopJob, Job: r.oj.job,
			Note: fmt.Sprintf("migration container %s reported %s and its report is recorded on the Job: no other pod of it may run the migration again", migrationContainer(r.oj.job), r.version)})
	}
}

// stoppedAfterReport reports whether j was stopped (StopJob): its spec.parallelism is 0.
func stoppedAfterReport(j *batchv1.Job) bool {
	return j.Spec.Parallelism != nil && *j.Spec.Parallelism == 0
}

// readStopped is the recorded report of a migration Job stopped once its report was recorded
// (stopReportedJobs), whose pods the Job controller has deleted: the Job stays active until its
// deadline with nothing else to read. nil unless the Job is stopped, not suspended, no pod of it
// is left in the cache and a recorded report parses. at is the Job's start (the cluster no
// longer says when the migration container ended).
func (p *planner) readStopped(oj *ownedJob) *reading {
	if !stoppedAfterReport(oj.job) || ptr.Deref(oj.job.Spec.Suspend, false) || p.hasPods(oj) {
		return nil
	}
	at := p.now
	if st := notAfter(oj.job.Status.StartTime, p.now); st != nil {
		at = st.Time
	}
	return readRecorded(oj, at)
}

// earlyNote says, for messages, that a reading came from the migration container before the Job
// ended.
func earlyNote(r *reading) string {
	switch {
	case r == nil:
		return ""
	case r.early != "":
		return fmt.Sprintf(" (its migration container %s has terminated; the Job's other containers still run)", migrationContainer(r.oj.job))
	case r.recorded:
		return " (as recorded on the Job when its migration container terminated)"
	}
	return ""
}

// jobEnd is when a migration attempt's work ended, for the migration phase's duration: its Job's
// completion time, or, when ev is its early reading, when its migration container terminated.
// nil when unknown (oj may be nil).
func (oj *ownedJob) jobEnd(ev *reading) *metav1.Time {
	switch {
	case oj == nil:
		return nil
	case oj.job.Status.CompletionTime != nil:
		return oj.job.Status.CompletionTime
	case ev != nil && ev.oj == oj && ev.early != "":
		return &metav1.Time{Time: ev.at}
	}
	return nil
}
