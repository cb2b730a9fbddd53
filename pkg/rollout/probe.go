package rollout

// The migration probe (spec.schema.probe): which probe Jobs count, what each found, the ranges a
// breaking one narrows, and the gate that runs one before each migration Job.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemadiff"
	"github.com/schemagate/schemagate/pkg/schemarange"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The verdicts of status.schema.probe.verdict: a report's class, Running, or Unavailable.
const (
	ProbeRunning     = "Running"
	ProbeUnavailable = "Unavailable"
	// ProbeUnreadable: the probe ran, but what it found cannot be read (its report is gone or
	// does not parse): never taken as a pass; the migration holds until a retry probes again.
	ProbeUnreadable = "Unreadable"
)

// annotationProbeReport records, on a probe Job, the report schemagate read from its pod (or, for
// a migration that failed on scratch, a report with verdict failed), so that the verdict outlives
// the pod (a ttlSecondsAfterFinished, PodGC after a node is gone).
const annotationProbeReport = "schemagate.io/probe-report"

// annotationProbeRan records, on a probe Job, the migration Job created after it: the migration
// it judged ran on the database, so a breaking verdict keeps narrowing (breakingFroms).
const annotationProbeRan = "schemagate.io/probe-migration-ran"

// probeRun is a probe Job this RoutingService controls and named exactly as ProbeJobName from its
// own labels and annotations, so neither an edited label or annotation nor another object's Job
// says what a migration changes.
type probeRun struct {
	job      *batchv1.Job
	version  string
	from     string
	template string
	attempt  int32
	// result is what it found (readProbe), read once by newPlanner.
	result probeResult
}

// probeResult is what one probe Job says.
type probeResult struct {
	// verdict is ProbeRunning, ProbeUnavailable, or a report's class (expand, conditional,
	// breaking, failed).
	verdict string
	report  *schemadiff.Report
	// why says, for failed, Unavailable and Unreadable, what went wrong (bounded).
	why string
	// record is the report to keep on the Job (annotationProbeReport), when it was read from the
	// pod now.
	record string
}

// ownedProbes are the probe Jobs that count, lowest attempt first, each with what it found.
func ownedProbes(rsvc *routingv1alpha1.RoutingService, o Observed, now time.Time) []probeRun {
	var out []probeRun
	for _, j := range o.Jobs {
		if j == nil || !metav1.IsControlledBy(j, rsvc) || j.Labels[LabelComponent] != ComponentProbe {
			continue
		}
		version, from, tmpl := j.Labels[LabelSchemaVersion], j.Annotations[annotationProbeFrom], j.Annotations[annotationMigrationTemplate]
		attempt, err := strconv.Atoi(j.Labels[LabelAttempt])
		if err != nil || attempt < 1 || attempt > 99999 || !schemaversion.Valid(version) || (from != "" && !schemaversion.Valid(from)) ||
			j.Name != ProbeJobName(rsvc.Name, version, from, tmpl, int32(attempt)) {
			continue
		}
		run := probeRun{job: j, version: version, from: from, template: tmpl, attempt: int32(attempt)}
		run.result = readProbe(j, o.Pods, now)
		out = append(out, run)
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].attempt < out[k].attempt })
	return out
}

// readProbe reads a probe Job: Running until it finishes; a Complete Job's report (its
// probe-report container's termination message, pkg/schemadiff, untrusted and bounded); a Failed
// one's step that failed: the team's migration container (the migration failed on the scratch
// database: verdict failed) or one of the probe's own (Unavailable). A Job past its deadline and
// grace that the Job controller has not failed yet is Unavailable too.
func readProbe(j *batchv1.Job, pods []*corev1.Pod, now time.Time) probeResult {
	pod := newestPodOf(j, pods)
	if jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil {
		if pod == nil {
			if rep, err := schemadiff.Parse([]byte(j.Annotations[annotationProbeReport])); err == nil {
				return fromReport(rep, "")
			}
			return probeResult{verdict: ProbeUnreadable, why: fmt.Sprintf("probe Job %s finished, and its pod, with what it found, is gone", j.Name)}
		}
	}
	switch {
	case jobCondition(j, batchv1.JobComplete) != nil:
		msg, ok := terminated(pod, ProbeContainerReport, false)
		if !ok {
			return probeResult{verdict: ProbeUnreadable, why: fmt.Sprintf("probe Job %s succeeded but its %s container left no report", j.Name, ProbeContainerReport)}
		}
		rep, err := schemadiff.Parse([]byte(msg))
		if err != nil {
			return probeResult{verdict: ProbeUnreadable, why: fmt.Sprintf("the report of probe Job %s cannot be read: %s", j.Name, podText(err.Error(), maxQuoted))}
		}
		return fromReport(rep, msg)
	case jobCondition(j, batchv1.JobFailed) != nil:
		for _, step := range []string{ProbeContainerTools, ProbeContainerScratch, ProbeContainerCopy, ProbeContainerReport} {
			if msg, ok := terminated(pod, step, true); ok {
				return probeResult{verdict: ProbeUnavailable, why: fmt.Sprintf("its step %s failed%s", step, terminationText(msg))}
			}
		}
		if name, msg, ok := failedTeamContainer(pod); ok {
			why := fmt.Sprintf("the migration failed on the probe's scratch database (container %s)%s", name, terminationText(msg))
			rep := &schemadiff.Report{Format: schemadiff.Format, Verdict: schemadiff.Failed,
				Changes: []schemadiff.Change{{Class: schemadiff.Failed, Kind: schemadiff.MigrationFailed, Why: podText(why, 200)}}}
			b, err := rep.EncodeWithin(1024)
			if err != nil {
				b = nil
			}
			return probeResult{verdict: string(schemadiff.Failed), why: why, record: string(b)}
		}
		c := jobCondition(j, batchv1.JobFailed)
		return probeResult{verdict: ProbeUnavailable, why: fmt.Sprintf("probe Job %s failed (%s)", j.Name, podText(c.Reason, 64))}
	case now.After(deadlineAt(j, now).Add(migrationGrace)):
		return probeResult{verdict: ProbeUnavailable, why: fmt.Sprintf("probe Job %s ran past its deadline of %s", j.Name, jobDeadline(j))}
	}
	return probeResult{verdict: ProbeRunning}
}

// fromReport is the result a parsed report gives; raw, when not empty, is recorded on the Job.
func fromReport(rep *schemadiff.Report, raw string) probeResult {
	res := probeResult{verdict: string(rep.Verdict), report: rep, record: raw}
	if rep.Verdict == schemadiff.Failed {
		var parts []string
		for _, c := range rep.Changes {
			parts = append(parts, c.String())
		}
		res.why = "the migration failed on the probe's scratch database: " + strings.Join(parts, "; ")
	}
	return res
}

// failedTeamContainer is the migration template's container (migrate, or one of its init
// containers) that exited non-zero in pod, if one did.
func failedTeamContainer(pod *corev1.Pod) (name, message string, ok bool) {
	if pod == nil {
		return "", "", false
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		switch cs.Name {
		case ProbeContainerTools, ProbeContainerScratch, ProbeContainerCopy:
			continue
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return cs.Name, t.Message, true
		}
	}
	return "", "", false
}

// newestPodOf is the newest pod whose controller is j (by UID), or nil.
func newestPodOf(j *batchv1.Job, pods []*corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != j.UID {
			continue
		}
		if out == nil || out.CreationTimestamp.Before(&pod.CreationTimestamp) {
			out = pod
		}
	}
	return out
}

// terminated is the termination message of pod's container (or init container) name, and
// whether it terminated (with a non-zero exit code, when failed is asked).
func terminated(pod *corev1.Pod, name string, failed bool) (string, bool) {
	if pod == nil {
		return "", false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; cs.Name == name && t != nil && (!failed || t.ExitCode != 0) {
				return t.Message, true
			}
		}
	}
	return "", false
}

// probeOn reports whether a probe runs before the migration: the manager has a probe image and
// spec.schema.probe.mode is not Off.
func (p *planner) probeOn() bool {
	im := p.observed.Probe
	return im != nil && im.Tools != "" && (im.Database != "" || (p.rsvc.Spec.Schema.Probe != nil && p.rsvc.Spec.Schema.Probe.DatabaseImage != "")) &&
		p.rsvc.Spec.Schema.Probe.ModeOrDefault() != routingv1alpha1.ProbeModeOff
}

// breakingFroms are the versions a breaking probe's migration starts from, for each breaking
// probe that still speaks for the database: the probe of the migration the spec asks for now
// (its version and template), or of a migration that ran (a migration Job of its version was
// created from its template). A probe of a migration that was replaced (a fixed template, an
// expand/contract split) narrows nothing. Read from the cluster on every reconcile.
func breakingFroms(rsvc *routingv1alpha1.RoutingService, probes []probeRun, jobs []ownedJob) []string {
	var out []string
	for i := range probes {
		if speaksForDatabase(rsvc, &probes[i], jobs) {
			out = appendOnce(out, probes[i].from)
		}
	}
	return out
}

// speaksForDatabase reports whether run is a breaking probe whose narrowing holds
// (breakingFroms): the probe of the migration the spec asks for now, or of one that ran (recorded
// on the probe Job, or a migration Job of its version created from its template), unless the spec
// now asks for the same version from another template and no migration of that version completed
// (the team is fixing a migration that never reached the database).
func speaksForDatabase(rsvc *routingv1alpha1.RoutingService, run *probeRun, jobs []ownedJob) bool {
	if run.result.verdict != string(schemadiff.Breaking) || run.from == "" {
		return false
	}
	sameVersion := schemaversion.Equal(run.version, rsvc.Spec.Schema.Version)
	if sameVersion && run.template == migrationTemplateHash(rsvc) {
		return true
	}
	ran, completed := run.job.Annotations[annotationProbeRan] != "", false
	for _, oj := range jobs {
		if !schemaversion.Equal(oj.version, run.version) {
			continue
		}
		ran = ran || oj.job.Annotations[annotationMigrationTemplate] == run.template
		completed = completed || jobCondition(oj.job, batchv1.JobComplete) != nil
	}
	return ran && (!sameVersion || completed)
}

// narrows reports whether run narrows ranges now: such a probe Job is kept (pruneJobs).
func (p *planner) narrows(run *probeRun) bool { return speaksForDatabase(p.rsvc, run, p.jobs) }

// probeNarrowed is r narrowed by every breaking probe that speaks for the database
// (schemarange.NarrowedByBreaking): the narrowing of a range only assumed is recorded in the
// cluster as the probe Job and its report.
func (p *planner) probeNarrowed(r schemarange.Range) schemarange.Range {
	for _, from := range p.breakingFrom {
		r = r.NarrowedByBreaking(from)
	}
	return r
}

// currentProbe is the latest attempt of the probe for the migration the spec asks for now, from
// the database's version now, or nil.
func (p *planner) currentProbe(from string) *probeRun {
	var out *probeRun
	for i := range p.probes {
		run := &p.probes[i]
		if schemaversion.Equal(run.version, p.rsvc.Spec.Schema.Version) && run.from == from && run.template == migrationTemplateHash(p.rsvc) {
			out = run
		}
	}
	return out
}

// probeGate runs the probe before the migration Job and reports whether the migration may start:
//
//   - no probe for (version, database's version, template): its Job is created (Probing);
//   - it runs: Probing, until its deadline;
//   - the migration failed on the scratch database: Stalled (ProbeMigrationFailed), until a retry
//     annotation starts the next probe attempt or a changed template a new probe;
//   - it could not run: a Warning Event and the migration starts (onFailure Proceed), or Stalled
//     (ProbeFailed, onFailure Hold), with the same ways out;
//   - a breaking change that reached this gate passed the expand gate (allowBreakingMigration,
//     or every revision it touches declares its range): a Warning Event, once, and it starts;
//   - otherwise it starts.
//
// status.schema.probe reports the probe it read.
func (p *planner) probeGate() bool {
	if !p.probeOn() {
		return true
	}
	required := p.rsvc.Spec.Schema.Version
	from := p.confirmedNow()
	if from != "" && !validVersion(from) {
		// Not a version the status can name (over 63 characters): no probe, as without one.
		return true
	}
	if why := probeUnsafe(p.rsvc); why != "" {
		// The probe would run the migration on the database it names: it never starts.
		p.status.Schema.Probe = &routingv1alpha1.ProbeStatus{From: from, To: required, Verdict: ProbeUnavailable, Changes: podText(why, maxCause)}
		if p.rsvc.Spec.Schema.Probe.OnFailureOrDefault() == routingv1alpha1.ProbeFailureHold {
			p.failSchema(routingv1alpha1.ReasonProbeFailed, fmt.Sprintf(
				"the probe of the migration to schema %s cannot run: %s; spec.schema.probe.onFailure is Hold, so the migration waits (or set spec.schema.probe.mode: Off)", required, why))
			return false
		}
		p.eventOnce(routingv1alpha1.ReasonProbeFailed, "", "the probe of the migration to schema %s cannot run: %s; the migration starts without it (spec.schema.probe.onFailure Proceed)", required, why)
		return true
	}
	run := p.currentProbe(from)
	if run != nil && p.retry != "" && (run.result.verdict == string(schemadiff.Failed) || run.result.verdict == ProbeUnavailable || run.result.verdict == ProbeUnreadable) {
		p.event(false, EventProbeRetried, "retry %q: probe Job %s found the migration cannot be judged (%s); probe attempt %d starts", p.retry, run.job.Name, run.result.why, run.attempt+1)
		p.useRetry()
		p.startProbe(from, run.attempt+1)
		return false
	}
	if run == nil {
		p.startProbe(from, 1)
		return false
	}
	p.status.Schema.Probe = probeStatus(run)
	res := run.result
	switch res.verdict {
	case ProbeRunning:
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonProbing, fmt.Sprintf(
			"probe Job %s runs the migration to schema %s on a scratch copy of the database's schema %s; the migration Job starts once it has a verdict", run.job.Name, required, orNone(from)))
		p.requeueAt(deadlineAt(run.job, p.now).Add(migrationGrace + time.Second))
		return false
	case string(schemadiff.Failed):
		p.failSchema(routingv1alpha1.ReasonProbeMigrationFailed, fmt.Sprintf(
			"the migration to schema %s is not run on the database: %s (probe Job %s); fix the migration (a changed spec.schema.migration.template probes again), set a schemagate.io/retry annotation to probe again, or, when it fails only on the scratch copy (roles or extensions the copy lacks), set spec.schema.probe.mode: Off",
			required, res.why, run.job.Name))
		return false
	case ProbeUnreadable:
		// The probe ran and what it found is lost or garbled: never a pass, whatever onFailure.
		p.failSchema(routingv1alpha1.ReasonProbeFailed, fmt.Sprintf(
			"the probe of the migration to schema %s ran, but what it found cannot be read: %s; the migration waits: set a schemagate.io/retry annotation to probe again (or spec.schema.probe.mode: Off)", required, res.why))
		return false
	case ProbeUnavailable:
		if p.rsvc.Spec.Schema.Probe.OnFailureOrDefault() == routingv1alpha1.ProbeFailureHold {
			p.failSchema(routingv1alpha1.ReasonProbeFailed, fmt.Sprintf(
				"the probe of the migration to schema %s could not run: %s; spec.schema.probe.onFailure is Hold, so the migration waits: set a schemagate.io/retry annotation to probe again (or spec.schema.probe.mode: Off)", required, res.why))
			return false
		}
		if !stopped(run.job) {
			// Its pods may still read the database: the migration never starts beside them.
			p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonProbing, fmt.Sprintf(
				"probe Job %s could not run (%s); the migration to schema %s starts without it once its pods have stopped", run.job.Name, res.why, required))
			p.requeueAt(p.now.Add(5 * time.Second))
			return false
		}
		p.eventOnce(routingv1alpha1.ReasonProbeFailed, run.job.Name, "the probe of the migration to schema %s could not run: %s; the migration starts without it (spec.schema.probe.onFailure Proceed)", required, res.why)
	case string(schemadiff.Conditional):
		if res.report.Has(schemadiff.NothingChanged) {
			p.eventOnce(EventProbeSawNoChange, run.job.Name, "probe Job %s saw the migration to schema %s change nothing on its scratch database, not even its tool's version table: if it reads its database's address from elsewhere than %s (spec.schema.probe.databaseEnv), it ran on that database; the migration starts",
				run.job.Name, required, p.rsvc.Spec.Schema.Probe.DatabaseEnvOrDefault())
		}
	case string(schemadiff.Breaking):
		p.eventOnce(routingv1alpha1.ReasonBreakingChange, run.job.Name, "probe Job %s found a breaking change in the migration to schema %s (%s); it starts because %s",
			run.job.Name, required, p.status.Schema.Probe.Changes, p.breakingPassesBecause(from))
	}
	return true
}

// breakingPassesBecause says why a breaking change passed the expand gate.
func (p *planner) breakingPassesBecause(from string) string {
	if p.rsvc.Spec.Schema.AllowBreakingMigration {
		return "spec.schema.allowBreakingMigration is set: planned downtime"
	}
	var declared []string
	for _, e := range p.servingSet(nil, p.failureTargets()).entries {
		if !e.rng.Assumed && e.rng.Contains(p.rsvc.Spec.Schema.Version) {
			declared = appendOnce(declared, fmt.Sprintf("revision %s declares %s", revisionOf(e.rs), e.rng))
		}
	}
	if len(declared) == 0 {
		return "no revision that serves or that a rollback would return to runs on schema " + orNone(from)
	}
	return "the declared ranges stand although the probe contradicts them: " + strings.Join(declared, "; ")
}

// startProbe creates attempt n of the probe Job (Probing), unless the API server refused it in
// this reconcile or its name is held by an object this RoutingService does not control.
func (p *planner) startProbe(from string, n int32) {
	required := p.rsvc.Spec.Schema.Version
	job := NewProbeJob(p.rsvc, *p.observed.Probe, schemaversion.Canonical(required), from, n)
	if holder := p.taken("Job", job.Name); holder != "" {
		p.failSchema(routingv1alpha1.ReasonNameConflict, fmt.Sprintf("probe Job %s/%s cannot be created: %s; delete or rename it and the probe of schema %s starts", p.rsvc.Namespace, job.Name, holder, required))
		p.requeueAt(p.now.Add(conflictRecheck))
		return
	}
	p.status.Schema.Probe = &routingv1alpha1.ProbeStatus{Job: job.Name, From: from, To: required, Verdict: ProbeRunning}
	if p.refused("create", "Job", job.Name) {
		p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonProbing, fmt.Sprintf(
			"the API server refused probe Job %s, which is created again on the next reconcile; the migration to schema %s waits for its verdict", job.Name, required))
		return
	}
	p.act(Action{Kind: CreateJob, Job: job, Note: fmt.Sprintf("probe the migration to schema %s from %s", required, orNone(from))})
	p.event(false, EventProbeStarted, "started probe Job %s: the migration to schema %s runs first on a scratch copy of the database's schema %s", job.Name, required, orNone(from))
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonProbing, fmt.Sprintf(
		"probe Job %s runs the migration to schema %s on a scratch copy of the database's schema %s; the migration Job starts once it has a verdict", job.Name, required, orNone(from)))
	p.requeueAt(p.now.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second + migrationGrace + time.Second))
}

// probeStatus is status.schema.probe for run.
func probeStatus(run *probeRun) *routingv1alpha1.ProbeStatus {
	st := &routingv1alpha1.ProbeStatus{Job: run.job.Name, From: run.from, To: run.version, Verdict: run.result.verdict}
	switch {
	case run.result.report != nil:
		st.Changes = podText(strings.Join(run.result.report.Lines()[1:], "; "), maxCause)
	case run.result.why != "":
		st.Changes = podText(run.result.why, maxCause)
	}
	return st
}

// probeFindings says, for a refusal, what the probes that narrowed a range found.
func (p *planner) probeFindings() string {
	var parts []string
	for i := range p.probes {
		run := &p.probes[i]
		if run.result.report != nil && run.result.verdict == string(schemadiff.Breaking) && containsVersion(p.breakingFrom, run.from) {
			var changes []string
			for _, c := range run.result.report.Changes {
				if c.Class == schemadiff.Breaking {
					changes = append(changes, c.String())
				}
			}
			parts = append(parts, fmt.Sprintf("probe Job %s found %s", run.job.Name, podText(strings.Join(changes, "; "), maxQuoted)))
		}
	}
	return strings.Join(parts, "; ")
}

func containsVersion(list []string, v string) bool {
	for _, x := range list {
		if schemaversion.Equal(x, v) {
			return true
		}
	}
	return false
}

// eventOnce records a Warning Event about probe Job job unless the stored status already showed
// that probe with the verdict this reconcile reports (it was said then).
func (p *planner) eventOnce(reason, job, format string, args ...any) {
	old, now := p.rsvc.Status.Schema.Probe, p.status.Schema.Probe
	if old != nil && now != nil && old.Job == job && old.Verdict == now.Verdict {
		return
	}
	p.event(true, reason, format, args...)
}

// recordProbe keeps status.schema.probe about the required version's probe: the latest attempt
// for the spec's migration template, or none.
func (p *planner) recordProbe() {
	st := &p.status.Schema
	var latest *probeRun
	for i := range p.probes {
		if run := &p.probes[i]; schemaversion.Equal(run.version, p.rsvc.Spec.Schema.Version) && run.template == migrationTemplateHash(p.rsvc) {
			if latest == nil || latest.job.CreationTimestamp.Before(&run.job.CreationTimestamp) || latest.attempt < run.attempt {
				latest = run
			}
		}
	}
	for i := range p.probes {
		// What a probe found is kept on its Job, so it outlives the pod.
		if run := &p.probes[i]; run.result.record != "" && run.job.Annotations[annotationProbeReport] != run.result.record {
			p.act(Action{Kind: AnnotateJob, Job: run.job, Annotations: map[string]string{annotationProbeReport: run.result.record},
				Note: "keep what the probe found on its Job"})
		}
	}
	switch {
	case latest != nil:
		st.Probe = probeStatus(latest)
	case st.Probe != nil && (!schemaversion.Equal(st.Probe.To, p.rsvc.Spec.Schema.Version) || st.Probe.Verdict != ProbeRunning):
		st.Probe = nil
	}
}

// markProbeRan records, on the probe of the migration that starts now (migration Job name), that
// the migration it judged runs on the database (annotationProbeRan).
func (p *planner) markProbeRan(name string) {
	if !p.probeOn() {
		return
	}
	if run := p.currentProbe(p.confirmedNow()); run != nil && run.job.Annotations[annotationProbeRan] == "" {
		p.act(Action{Kind: AnnotateJob, Job: run.job, Annotations: map[string]string{annotationProbeRan: name},
			Note: "the migration this probe judged starts"})
	}
}
