package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schemagate/schemagate/pkg/retention"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// jobKinds are the components whose Jobs pruneJobs keeps a history of, each counted on its own.
var jobKinds = []string{ComponentMigration, ComponentCheck, ComponentShardCheck, ComponentProbe}

// pruneJobs deletes, for each kind of Job (migration, schema check, shard check, probe), the oldest
// finished Jobs this RoutingService controls beyond spec.strategy.jobHistoryLimit, the way cleanup
// prunes ReplicaSets beyond revisionHistoryLimit: the Jobs that still matter (jobsThatMatter) are
// never deleted and count towards the limit; the oldest of the others go, by creation time (the API
// server's clock), then name. Jobs not finished (no Complete or Failed condition) neither count nor
// go. Worked numbers: limit 3, migration Jobs v1#1, v2#1 (the evidence), v3#1..v3#5 all failed,
// required version 3 → 7 finished, 4 too many: v1#1, v3#1, v3#2 and v3#3 go; v2#1, v3#4 (the
// next oldest) and v3#5 (the latest attempt) stay.
//
// What is kept is computed from the Jobs and their pods only, never from the stored status, which
// is untrusted (S-19): a hand-edited status claiming another schema cannot expose the evidence Job.
// The stored status can only keep a Job it names (its migrationJob), never have one deleted.
func (p *planner) pruneJobs() {
	limit := int(p.rsvc.Spec.Strategy.JobHistoryLimitOrDefault())
	keep := p.jobsThatMatter()
	byKind := map[string][]*batchv1.Job{}
	for _, j := range p.observed.Jobs {
		if j == nil || !metav1.IsControlledBy(j, p.rsvc) || j.DeletionTimestamp != nil || !JobFinished(j) {
			continue
		}
		byKind[j.Labels[LabelComponent]] = append(byKind[j.Labels[LabelComponent]], j)
	}
	for _, kind := range jobKinds {
		jobs := byKind[kind]
		sort.SliceStable(jobs, func(i, k int) bool {
			a, b := jobs[i].CreationTimestamp, jobs[k].CreationTimestamp
			if !a.Equal(&b) {
				return a.Before(&b)
			}
			return jobs[i].Name < jobs[k].Name
		})
		items := make([]retention.Item, len(jobs))
		for i, j := range jobs {
			// A Job finished less than reportLag ago: its pod may not be in the cache yet.
			items[i] = retention.Item{Keep: keep[j], Ripe: finishedTime(j).Add(reportLag)}
		}
		v := retention.Prune(items, limit, p.now)
		if !v.Recheck.IsZero() {
			// No watch event may come when it ripens: look again then.
			p.requeueAt(v.Recheck.Add(time.Second))
		}
		for _, i := range v.Delete {
			p.act(Action{Kind: DeleteJob, Job: jobs[i],
				Note: fmt.Sprintf("jobHistoryLimit %d: the newest %d finished %s Jobs are kept, and the ones that still matter", limit, limit, kind)})
		}
	}
}

// jobsThatMatter returns the Jobs pruneJobs never deletes:
//
//   - the evidence: the Job whose reading says what the database is at now (evidence.go), which
//     status.schema.confirmedBy names;
//   - a Job with pods still active or terminating (one finished less than reportLag, 30 s, ago is
//     not deleted either, by pruneJobs: its pod may not be in the cache yet, and its report could
//     still become the evidence);
//   - the latest migration attempt and the latest check Job for spec.schema.version (the gate
//     reads them: retries, failures, lost evidence), and, per shard, the latest check Job run
//     before that shard for the update revision (spec.schema.check.beforeEachShard);
//   - the shard-check Jobs of the update revision (a shard's checks are read from them);
//   - the migration Job the stored status names (it may only hold a Job back).
func (p *planner) jobsThatMatter() map[*batchv1.Job]bool {
	keep := map[*batchv1.Job]bool{}
	add := func(oj *ownedJob) {
		if oj != nil {
			keep[oj.job] = true
		}
	}
	if ev := evidence(p.readings); ev != nil {
		add(ev.oj)
	}
	required := p.rsvc.Spec.Schema.Version
	add(p.latestAttempt(required))
	add(p.latestCheck(required))
	beforeShard := map[string]*ownedJob{}
	for i := range p.checks {
		oj := &p.checks[i]
		if key := oj.job.Annotations[annotationBeforeShard]; schemaversion.Equal(oj.version, required) && strings.HasSuffix(key, "/"+p.update) {
			// p.checks is sorted by number: the last one per key is the latest.
			beforeShard[key] = oj
		}
	}
	for _, oj := range beforeShard {
		add(oj)
	}
	// The probes that narrow a range (probe.go), and the latest of the migration asked for now:
	// the narrowing is read back from them.
	for i := range p.probes {
		run := &p.probes[i]
		if p.narrows(run) || (schemaversion.Equal(run.version, required) && run.template == migrationTemplateHash(p.rsvc)) {
			keep[run.job] = true
		}
	}
	for _, j := range p.observed.Jobs {
		if j == nil {
			continue
		}
		switch {
		case !stopped(j), !JobFinished(j):
			keep[j] = true
		case j.Labels[LabelComponent] == ComponentShardCheck && j.Labels[LabelRevision] == p.update:
			keep[j] = true
		case j.Name == p.rsvc.Status.Schema.MigrationJob:
			keep[j] = true
		}
	}
	return keep
}

// JobFinished reports whether a Job has a Complete or Failed condition that is True.
func JobFinished(j *batchv1.Job) bool {
	return jobCondition(j, batchv1.JobComplete) != nil || jobCondition(j, batchv1.JobFailed) != nil
}

// finishedTime is when a finished Job finished (its completion time, else its condition's
// transition time); the zero time for a Job not finished.
func finishedTime(j *batchv1.Job) metav1.Time {
	c := jobCondition(j, batchv1.JobComplete)
	if c == nil {
		c = jobCondition(j, batchv1.JobFailed)
	}
	if c == nil {
		return metav1.Time{}
	}
	return *finishedAt(j, c)
}
