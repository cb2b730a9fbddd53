package rollout

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// annotationContracted records, on every ReplicaSet the RoutingService controls, the highest
// schema version a contract of this RoutingService brought the database to. A contract Job is the
// only other record that a contract ran, and a Job is deleted by hand, by a cleanup or with a
// restore that skips Jobs: without this record the contract would run again, and a spec reverted
// in Git to a revision whose range ends below the contract would roll back onto a schema it cannot
// run on. The ReplicaSets are where the handled controls are kept too (controls.go): they are what
// a rollback acts on, they survive a lost status and an orphaning delete, and no GitOps tool
// applies them. Written by recordControls, with the same merge patch.
//
// Anyone who may patch the ReplicaSets can raise it: that refuses rollbacks and skips a contract,
// never lets a revision run where it cannot. Lowering it needs the contract Job gone as well.
const annotationContracted = "schemagate.io/contracted"

// recordedContract is the highest valid version recorded in annotationContracted on the
// ReplicaSets whose records count (recordedReplicaSets); "" when none. A value that is not a
// version of at most 63 characters is ignored.
func (p *planner) recordedContract() string {
	floor := ""
	for _, rs := range p.recordedReplicaSets() {
		v := rs.Annotations[annotationContracted]
		if !validVersion(v) {
			continue
		}
		if floor == "" || !schemaversion.AtLeast(floor, v) {
			floor = schemaversion.Canonical(v)
		}
	}
	return floor
}

// contractDone is the version to record: the highest of what the ReplicaSets record and of the
// contract Jobs that completed with their own report confirming their version; "" when none did.
// A contract that completed without such a report is not recorded: contractDecide calls it
// failed, and contractFloor still counts it (from the Job) for as long as the Job exists.
func (p *planner) contractDone() string {
	done := p.recordedContract()
	for i := range p.contracts {
		oj := &p.contracts[i]
		if jobCondition(oj.job, batchv1.JobComplete) == nil {
			continue
		}
		if own := readingOf(p.readings, oj); own == nil || !own.usable() || !own.confirms(oj.version) || own.dirty {
			continue
		}
		if done == "" || !schemaversion.AtLeast(done, oj.version) {
			done = oj.version
		}
	}
	return done
}

// contractRecordMessage says why a contract counts as done with no Job of it left.
func contractRecordMessage(version string) string {
	return fmt.Sprintf("the ReplicaSets record a contract to schema %s (%s); its Job is gone", version, annotationContracted)
}
