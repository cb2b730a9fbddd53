package schemarange

import (
	"fmt"

	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// Pending is a version a migration or contract Job that has started (or is queued to start) may
// bring the database to at any moment, whatever the spec says now.
type Pending struct {
	Version string
	// Job names the Job; Kind is "migration" or "contract".
	Job, Kind string
}

func (s Pending) String() string {
	return fmt.Sprintf("%s Job %s may bring the database to schema %s", s.Kind, s.Job, s.Version)
}

// Database is what the database may be at: the version its reports confirm, the versions above
// it that a live Job may bring it to, and the highest version a contract is recorded to have
// brought it to (a record that outlives the contract's Job). The planner builds it once per
// reconcile from the cluster (its Jobs, their reports and the ReplicaSets' records); every gate,
// scale-up and rollback asks it.
type Database struct {
	// Confirmed is the version the database's own reports confirm ("" for none).
	Confirmed string
	// Pending are the versions above Confirmed that a live migration or contract may reach.
	Pending []Pending
	// Floor is the highest version a contract brought (or is bringing) the database to, as
	// recorded where deleting a Job does not erase it ("" for none).
	Floor string
}

// Outside lists the pending versions r does not contain, in the order of d.Pending.
func (d Database) Outside(r Range) []Pending {
	var out []Pending
	for _, s := range d.Pending {
		if !r.Contains(s.Version) {
			out = append(out, s)
		}
	}
	return out
}

// MayRun reports whether a revision that runs on r may have pods now (invariant I1): r contains
// the confirmed version and every version a live Job may bring the database to, and a contract
// floor above what the reports still say (its Job and report are gone) is in r too.
func (d Database) MayRun(r Range) bool {
	if d.Floor != "" && !r.Contains(d.Floor) && schemaversion.AtLeast(d.Floor, d.Confirmed) {
		return false
	}
	return r.Contains(d.Confirmed) && len(d.Outside(r)) == 0
}
