package rollout

import (
	"fmt"
	"strings"

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
	p.decideSchema(metav1.ConditionFalse, routingv1alpha1.ReasonWaitingForMigration, fmt.Sprintf(
		"revision %s runs on %s and the database is confirmed at %s, but %s, outside that range: nothing of revision %s is created or scaled up until it has ended, and every shard keeps serving what it serves",
		p.update, p.updateRange(), orNone(p.confirmedNow()), strings.Join(parts, "; "), p.update))
}
