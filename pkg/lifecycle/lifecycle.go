// Package lifecycle decides the two questions of the schema lifecycle that the rest follows from,
// each from a small input and with a typed verdict:
//
//   - Expand: may the migration to the required schema start now, and if not, what holds it
//     (revisions that cannot run on it, places not seen) and what moves instead (binary first);
//   - Phase: which phase of expand, roll out, contract the RoutingService is in.
//
// pkg/rollout observes the inputs (the serving set against the database, the contract's own
// phase), applies the verdicts and writes the SchemaReady condition and status.schema.phase.
package lifecycle

import routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"

// ExpandInput is what the expand gate decides from.
type ExpandInput struct {
	// Incompatible is how many revisions that serve, or that a rollback would return to, cannot
	// run on the migration's version.
	Incompatible int
	// Unseen is how many places (shards whose cluster does not answer) cannot be seen.
	Unseen int
	// AllowBreaking is spec.schema.allowBreakingMigration.
	AllowBreaking bool
	// UpdateRunsOnCurrent: the update revision's range contains the database's current version.
	UpdateRunsOnCurrent bool
}

// ExpandVerdict is what the expand gate decides about a migration that is due.
type ExpandVerdict int

const (
	// ExpandStart: no revision stands in the migration's way, and every place is seen.
	ExpandStart ExpandVerdict = iota
	// ExpandBreaking: revisions stand in its way (or a place cannot be seen), and
	// allowBreakingMigration says to go on.
	ExpandBreaking
	// ExpandBinaryFirst: revisions stand in its way, or a place cannot be seen, and the update
	// revision runs on the database's current schema: shards roll first, the migration follows.
	ExpandBinaryFirst
	// ExpandRefused: revisions stand in its way and nothing else can move: IncompatibleRevision.
	ExpandRefused
	// ExpandUnseen: nothing seen stands in its way, but a shard's cluster does not answer, so
	// what serves there is not known: the migration waits for it.
	ExpandUnseen
)

// String is the verdict's name.
func (v ExpandVerdict) String() string {
	switch v {
	case ExpandStart:
		return "Start"
	case ExpandBreaking:
		return "Breaking"
	case ExpandBinaryFirst:
		return "BinaryFirst"
	case ExpandRefused:
		return "Refused"
	case ExpandUnseen:
		return "Unseen"
	}
	return "ExpandVerdict(?)"
}

// Expand is the expand gate's rule. A place not seen is never read as a place where nothing
// serves: it holds the migration as a revision in its way would, except that, with nothing seen
// in the way and no way around it, the verdict is to wait (ExpandUnseen) rather than refuse.
func Expand(in ExpandInput) ExpandVerdict {
	switch {
	case in.Incompatible == 0 && in.Unseen == 0:
		return ExpandStart
	case in.AllowBreaking:
		return ExpandBreaking
	case in.UpdateRunsOnCurrent:
		return ExpandBinaryFirst
	case in.Incompatible > 0:
		return ExpandRefused
	default:
		return ExpandUnseen
	}
}

// Evidence is what the next phase is decided from, all of it observed in one reconcile.
type Evidence struct {
	// Invalid: the spec's range is not a range that contains spec.schema.version.
	Invalid bool
	// Confirmed: the database is confirmed at a version inside the update revision's range, at
	// or above spec.schema.version: no migration is needed.
	Confirmed bool
	// BinaryFirst: the migration is needed, but the update revision runs on the database's
	// current version and a revision that serves, or a rollback target, does not run on the
	// required one: shards roll first.
	BinaryFirst bool
	// Promoted: the update revision is promoted in every shard.
	Promoted bool
	// Contract: spec.schema.contract is set (the contract phases are decided there).
	Contract bool
	// ContractPhase is the phase the contract decided: RollbackWindow, Contracting or Complete;
	// "" while it waits for the shards, or without a contract.
	ContractPhase routingv1alpha1.SchemaPhase
}

// Phase decides the lifecycle phase: Expanding while the required schema is not confirmed (the
// migration runs, waits, or is refused), RollingOut while shards are promoted (after the
// migration, or before it when binary-first), Complete once every shard is promoted on a
// confirmed schema and no contract follows. With a contract, the phases after RollingOut are the
// contract's.
func Phase(e Evidence) routingv1alpha1.SchemaPhase {
	switch {
	case e.Invalid:
		return routingv1alpha1.SchemaPhaseExpanding
	case e.Contract && e.ContractPhase != "":
		return e.ContractPhase
	case e.Confirmed && e.Promoted && !e.Contract:
		return routingv1alpha1.SchemaPhaseComplete
	case e.Confirmed:
		return routingv1alpha1.SchemaPhaseRollingOut
	case e.BinaryFirst && !e.Promoted:
		return routingv1alpha1.SchemaPhaseRollingOut
	default:
		return routingv1alpha1.SchemaPhaseExpanding
	}
}
