package rollout

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemarange"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// The schema the database may be at next. A migration or contract Job of this RoutingService that
// has started and may still change the database (live: not finished, or with pods left) may bring
// it to its version at any moment, whatever the spec says now. So a revision may run only on a
// range that contains the confirmed version and every such version: a spec reverted to an older
// revision while a migration it cannot run on is still running rolls nothing back onto it (it
// would serve on the new schema the moment the migration ends), and once the migration has ended
// the evidence decides (the revert is refused if it confirmed its version, and rolls if it ended
// without effect).

// pendingSchemas are the versions above the confirmed one that the migration and contract Jobs
// counting as evidence (ownedJobs) may bring the database to, lowest attempt first: a live Job
// (live), and a queued one that never started (suspended by a queue such as Kueue, which may
// admit it at any moment). A Job that started and was suspended since (by schemagate, past its
// deadline) is not pending. A version at or below the confirmed one moves nothing up.
func (p *planner) pendingSchemas() []schemarange.Pending {
	confirmed := p.confirmedNow()
	var out []schemarange.Pending
	for _, jobs := range [][]ownedJob{p.jobs, p.contracts} {
		for i := range jobs {
			oj := &jobs[i]
			if !live(oj.job) && !(queued(oj.job) && oj.job.Status.StartTime == nil) {
				continue
			}
			if confirmed != "" && schemaversion.AtLeast(confirmed, oj.version) {
				continue
			}
			out = append(out, schemarange.Pending{Version: oj.version, Job: oj.job.Name, Kind: oj.kind()})
		}
	}
	return out
}

// database is what the database may be at, now and next (pkg/schemarange): the confirmed version,
// the versions live Jobs may bring it to and the contract floor.
func (p *planner) database() schemarange.Database {
	return schemarange.Database{Confirmed: p.confirmedNow(), Pending: p.pendingSchemas(), Floor: p.contractFloor()}
}

// mayRunOn reports whether a revision that runs on r may have pods now (I1): the database's
// answer (schemarange.Database.MayRun).
func (p *planner) mayRunOn(r schemarange.Range) bool { return p.database().MayRun(r) }

// waitForPending closes the gate of an update revision whose confirmed schema it runs on while a
// live migration or contract may bring the database outside its range: SchemaReady False,
// WaitingForMigration, naming the Job, the version and the range. What serves keeps serving; the
// Job's watch event wakes the next reconcile when it ends.
func (p *planner) waitForPending(list []schemarange.Pending) {
	parts := make([]string, 0, len(list))
	for _, s := range list {
		parts = append(parts, s.String())
	}
	msg := fmt.Sprintf("revision %s runs on %s and the database is confirmed at %s, but %s, outside that range: nothing of revision %s is created or scaled up until it has ended, and every shard keeps serving what it serves",
		p.update, p.updateRange(), orNone(p.confirmedNow()), strings.Join(parts, "; "), p.update)
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration, msg)
	// Like every wait, not for ever: a Job left with only terminating pods (their node gone, a
	// finalizer) may hold it indefinitely, and only a person can tell whether they still run.
	limit := p.rsvc.Spec.Strategy.ProgressDeadline()
	if limit <= 0 {
		limit = time.Duration(routingv1alpha1.DefaultProgressDeadlineSeconds) * time.Second
	}
	for _, s := range list {
		oj := p.schemaJobNamed(s.Job)
		if oj == nil {
			continue
		}
		since := terminatingSince(oj.job)
		if since.IsZero() {
			continue
		}
		if p.now.Before(since.Add(limit)) {
			p.requeueAt(since.Add(limit))
			continue
		}
		p.stall(routingv1alpha1.ReasonWaitingForMigration, fmt.Sprintf(
			"%s; %s Job %s has had no active pod since %s, only terminating ones, for longer than progressDeadlineSeconds (%ds): if their node is gone, delete those pods (kubectl delete pod --force) once you know the migration no longer runs",
			msg, s.Kind, s.Job, since.UTC().Format(time.RFC3339), int64(limit/time.Second)))
		return
	}
}

// schemaJobNamed is the migration or contract Job of this RoutingService named name (nil: none).
func (p *planner) schemaJobNamed(name string) *ownedJob {
	for _, jobs := range [][]ownedJob{p.jobs, p.contracts} {
		for i := range jobs {
			if jobs[i].job.Name == name {
				return &jobs[i]
			}
		}
	}
	return nil
}

// terminatingSince is when a Job was left with terminating pods only: it has no active pod, some
// terminating, and it finished (finishedTime) or was asked to stop (stopSince). Zero while a pod
// is active or none terminates.
func terminatingSince(j *batchv1.Job) time.Time {
	if j.Status.Active > 0 || j.Status.Terminating == nil || *j.Status.Terminating == 0 {
		return time.Time{}
	}
	if t := finishedTime(j); !t.IsZero() {
		return t.Time
	}
	return stopSince(j)
}
