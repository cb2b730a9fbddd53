package rollout

import (
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaevidence"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// reportLag bounds the wait for a finished Job's pod to show as finished in the cache.
const reportLag = 30 * time.Second

// reading is what one finished migration or check Job of this RoutingService says about the
// database: the schema report of its pod (docs/schema-report.md), or, for a migration Job under
// evidence JobSuccess, the version it was created for.
type reading struct {
	oj *ownedJob
	// at is when the Job finished; readings are ordered by it (then by creation and name).
	at time.Time
	// version and dirty are the report's; tool is the tool the report names.
	version string
	dirty   bool
	tool    string
	// invalid says why the Job's report cannot be used ("" when it can): it wrote none, or one
	// that does not parse. Such a reading confirms nothing and is never the evidence.
	invalid string
	// fromReport: version and dirty come from a schema report (not from JobSuccess).
	fromReport bool
	// gone: the Job succeeded but its pods are gone (deleted, garbage-collected), so there is no
	// report left to read. It is treated as evidence that disappeared (S-23), not as a defect.
	gone bool
	// late: a migration Job that succeeded after schemagate's deadline had passed (deadlineAt).
	// Such a success never opens the gate (a dirty report still closes it): the attempt stays
	// MigrationDeadlineExceeded and a retry runs the next one.
	late bool
	// early is the termination message a migration container left while its Job is still active
	// (sidecar.go); recorded: the reading comes from the report recorded on the Job.
	early    string
	recorded bool
	// pending: the Job finished but the cache does not show its pod finished yet (the pod's update
	// and the Job's arrive separately); waited for, briefly (reportLag), before anything is said.
	pending bool
}

// usable reports whether the reading says which version the database is at.
func (r *reading) usable() bool { return r != nil && r.invalid == "" && !r.gone }

// confirms reports whether the reading says the database is at version or above and not dirty.
func (r *reading) confirms(version string) bool {
	return r.usable() && !r.dirty && !r.late && schemaversion.AtLeast(r.version, version)
}

// describe says what the reading says, for condition messages.
func (r *reading) describe() string {
	if !r.fromReport {
		return fmt.Sprintf("migration Job %s succeeded (evidence JobSuccess)%s", r.oj.job.Name, earlyNote(r))
	}
	tool, dirty := "", ""
	if r.tool != "" {
		tool = " (" + r.tool + ")"
	}
	if r.dirty {
		dirty = ", dirty"
	}
	return fmt.Sprintf("the schema report of %s Job %s%s says the database is at version %s%s%s", r.oj.kind(), r.oj.job.Name, tool, r.version, dirty, earlyNote(r))
}

// readJobs reads every finished migration and check Job this RoutingService owns. A Complete Job
// always gives a reading (possibly invalid or gone); a Failed one only when its pod left a report
// that parses (a dirty one, typically), since a failure is already reported as such.
func (p *planner) readJobs() []*reading {
	jobSuccess := p.rsvc.Spec.Schema.EvidenceOrDefault() == routingv1alpha1.SchemaEvidenceJobSuccess
	var out []*reading
	for _, list := range [][]ownedJob{p.jobs, p.checks, p.contracts} {
		for i := range list {
			oj := &list[i]
			complete := jobCondition(oj.job, batchv1.JobComplete)
			failed := jobCondition(oj.job, batchv1.JobFailed)
			switch {
			case complete != nil && jobSuccess && !oj.check:
				// The Job's success confirms its version, unless a report that parses says
				// more (a lower version, a dirty database): a report is never ignored.
				r := p.readReport(oj, corev1.PodSucceeded)
				if rec := readRecorded(oj, p.now); !r.usable() && rec != nil {
					r = rec
				}
				if !r.usable() {
					r = &reading{oj: oj, version: oj.version}
				}
				r.at = finishedAt(oj.job, complete).Time
				r.late = !oj.check && r.at.After(deadlineAt(oj.job, p.now))
				out = append(out, r)
			case complete != nil:
				r := p.readReport(oj, corev1.PodSucceeded)
				if rec := readRecorded(oj, p.now); !r.usable() && !r.pending && rec != nil {
					r = rec
				}
				r.at = finishedAt(oj.job, complete).Time
				r.late = !oj.check && r.at.After(deadlineAt(oj.job, p.now))
				out = append(out, r)
			case failed != nil:
				r := p.readReport(oj, corev1.PodFailed)
				if rec := readRecorded(oj, p.now); !r.usable() && rec != nil {
					// The migration container had reported before the Job failed (its deadline,
					// with a sidecar still running) and its pod was deleted since.
					r = rec
				}
				if r.usable() {
					r.at = finishedAt(oj.job, failed).Time
					out = append(out, r)
				}
			case !oj.check:
				// Still active: only its pod says anything (a recorded report counts only once
				// the Job is ending, or stopped, and its pods are gone).
				if r := p.readEarly(oj, jobSuccess); r != nil {
					out = append(out, r)
				} else if r := p.readEnding(oj); r != nil {
					out = append(out, r)
				} else if r := p.readStopped(oj); r != nil {
					out = append(out, r)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, k int) bool { return readingBefore(out[i], out[k]) })
	return out
}

// readingBefore orders readings by cause, not by any controller's clock: by the creation of
// their Jobs (the API server's clock; schemagate's migration and check Jobs never overlap, so the
// Job created later saw the database later), then, within a second, a check after the migration
// attempt it was created after, then by attempt number and name. A completion time written by a
// skewed Job controller cannot reorder them.
func readingBefore(a, b *reading) bool {
	ca, cb := a.oj.job.CreationTimestamp, b.oj.job.CreationTimestamp
	if !ca.Equal(&cb) {
		return ca.Before(&cb)
	}
	if a.oj.check != b.oj.check && schemaversion.Equal(a.oj.version, b.oj.version) {
		if a.oj.check {
			return afterAttempt(a.oj) < b.oj.attempt
		}
		return afterAttempt(b.oj) >= a.oj.attempt
	}
	if a.oj.attempt != b.oj.attempt {
		return a.oj.attempt < b.oj.attempt
	}
	return a.oj.job.Name < b.oj.job.Name
}

// readReport reads the schema report of oj's newest pod in phase (schemaevidence.FromPods: only
// the pods whose controller is oj's Job, by UID, so a pod with copied labels says nothing).
func (p *planner) readReport(oj *ownedJob, phase corev1.PodPhase) *reading {
	var finished time.Time
	if c := jobCondition(oj.job, batchv1.JobComplete); c != nil {
		finished = finishedAt(oj.job, c).Time
	}
	rep := schemaevidence.FromPods(schemaevidence.Input{Job: oj.job, Kind: oj.kind(), Pods: p.observed.Pods, Phase: phase,
		Now: p.now, Finished: finished, Lag: reportLag})
	r := &reading{oj: oj, invalid: rep.Problem, gone: rep.Gone, pending: rep.Pending}
	if rep.Problem == "" {
		r.version, r.dirty, r.tool, r.fromReport = rep.Version, rep.Dirty, rep.Tool, true
	}
	return r
}

// evidence is the latest usable reading: what the database was last seen at
// (schemaevidence.Latest says which).
func evidence(readings []*reading) *reading {
	candidates := make([]schemaevidence.Candidate, len(readings))
	for i, r := range readings {
		candidates[i] = schemaevidence.Candidate{Usable: r.usable(), Late: r.late, Dirty: r.dirty}
	}
	if i := schemaevidence.Latest(candidates); i >= 0 {
		return readings[i]
	}
	return nil
}

// readingOf returns oj's reading, if it has one.
func readingOf(readings []*reading, oj *ownedJob) *reading {
	for _, r := range readings {
		if r.oj.job.UID == oj.job.UID && r.oj.job.Name == oj.job.Name {
			return r
		}
	}
	return nil
}

// recordEvidence reports the readings in status.schema: what the database is confirmed at, and
// what the latest report said.
func (p *planner) recordEvidence(ev *reading) {
	st := &p.status.Schema
	st.ConfirmedVersion, st.ConfirmedBy, st.ReportedVersion, st.ReportedBy = "", "", "", ""
	if ev == nil {
		return
	}
	if !ev.dirty {
		st.ConfirmedVersion, st.ConfirmedBy = ev.version, ev.oj.job.Name
	}
	if ev.fromReport {
		st.ReportedVersion, st.ReportedBy = ev.version, ev.oj.job.Name
		if ev.tool != "" {
			st.ReportedBy += " (" + ev.tool + ")"
		}
	}
}

// confirmedNow is the version the evidence in the cluster confirms now: the latest usable reading,
// when it is not dirty ("" otherwise). The gate and mayRun read it, never status.schema, which
// may keep reporting a confirmation whose Job has since been deleted (keepConfirmedRecord).
func (p *planner) confirmedNow() string {
	if ev := evidence(p.readings); ev != nil && !ev.dirty {
		return ev.version
	}
	return ""
}
