package rollout

import (
	"time"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Event reasons recorded on a RoutingService, one per transition.
const (
	EventMigrationStarted    = "MigrationStarted"                             // a migration Job was created
	EventBreakingMigration   = "BreakingMigration"                            // a migration started with allowBreakingMigration breaks a revision
	EventProbeStarted        = "ProbeStarted"                                 // a migration probe Job was created
	EventProbeRetried        = "ProbeRetried"                                 // a retry started the next probe attempt
	EventProbeSawNoChange    = "ProbeSawNoChange"                             // a probe's migration left no trace on the scratch database
	EventAssumedSchemaRange  = "AssumedSchemaRange"                           // a revision serves past its own schema version on an assumed range
	EventSchemaConfirmed     = routingv1alpha1.ReasonSchemaConfirmed          // the gate opened
	EventMigrationFailed     = routingv1alpha1.ReasonMigrationFailed          // the Job failed
	EventMigrationDeadline   = routingv1alpha1.ReasonMigrationDeadline        // the Job ran past its deadline
	EventShardStarted        = "ShardStarted"                                 // a shard began promoting
	EventShardBaking         = "ShardBaking"                                  // a shard is fully on the new revision
	EventShardPromoted       = "ShardPromoted"                                // a shard finished baking
	EventShardRegressed      = "ShardRegressed"                               // a baking shard lost availability
	EventBakeRestarted       = "BakeRestarted"                                // a tolerated pod restart started a shard's bake over
	EventProgressDeadline    = routingv1alpha1.ReasonProgressDeadlineExceeded // a shard missed its deadline
	EventRollingBack         = routingv1alpha1.ReasonRollingBack              // a shard returns to the stable revision
	EventShardRolledBack     = "ShardRolledBack"                              // a shard is back on the stable revision
	EventRolloutComplete     = routingv1alpha1.ReasonRolloutComplete          // the revision is stable everywhere
	EventAborted             = routingv1alpha1.ReasonAborted                  // the user aborted a rollout
	EventAbortIgnored        = "AbortIgnored"                                 // an abort with nothing in progress
	EventMigrationRetried    = "MigrationRetried"                             // a failed migration runs again
	EventMigrationSuspended  = "MigrationSuspended"                           // a timed-out migration is stopped before a retry
	EventMigrationSuperseded = "MigrationSuperseded"                          // an older version's migration past its deadline is stopped for a newer one
	EventReplicaSetAdopted   = "ReplicaSetAdopted"                            // an orphaned ReplicaSet with matching labels was adopted
	EventShardResized        = "ShardResized"                                 // a shard's replicas changed and its serving revision was scaled at once
	EventReplicasOverwritten = "ReplicasOverwritten"                          // someone else scaled a shard's ReplicaSet through /scale; schemagate sets it back and names them
	EventNameConflict        = routingv1alpha1.ReasonNameConflict             // a name schemagate needs is held by an object it does not control
	EventTemplateMismatch    = routingv1alpha1.ReasonTemplateMismatch         // a ReplicaSet named for the revision runs another template
	EventRolloutRetried      = "RolloutRetried"                               // a failed revision is tried again
	EventRetryIgnored        = "RetryIgnored"                                 // a retry with nothing failed
	EventBakeSkipped         = "BakeSkipped"                                  // promote ended a bake early
	EventPromoteIgnored      = "PromoteIgnored"                               // a promote with no shard baking
	EventSchemaEvidenceLost  = routingv1alpha1.ReasonSchemaEvidenceLost       // the Job that confirmed the schema is gone
	EventCheckStarted        = "SchemaCheckStarted"                           // a check Job asks the database for its version
	EventShardCheckPassed    = "ShardCheckPassed"                             // a check of spec.strategy.checks passed in a shard
	EventCheckWindowShort    = "CheckWindowShort"                             // a prometheus check's range is shorter than twice its scrape interval
)

// Phases measured by Event.Duration (the manager exports them as
// schemagate_phase_duration_seconds{namespace,name,phase,shard}).
const (
	// PhaseMigration: the migration Job's own run, from its startTime to its completionTime.
	PhaseMigration = "migration"
	// PhaseGateWait: from the migration Job's creation to the gate opening.
	PhaseGateWait = "gate_wait"
	// PhaseShardProgress: a shard's step, from its start to the new revision serving it fully.
	PhaseShardProgress = "shard_progress"
	// PhaseShardBake: a shard's bake, from completion to promotion.
	PhaseShardBake = "shard_bake"
)

// Outcomes of a rollout (schemagate_rollouts_total{outcome}).
const (
	OutcomeComplete        = "complete"
	OutcomeFailed          = "failed"
	OutcomeAborted         = "aborted"
	OutcomeMigrationFailed = "migration_failed"
)

// Measure is a phase duration an Event reports.
type Measure struct {
	Phase    string
	Shard    string
	Duration time.Duration
}

// OutcomeOf maps an Event reason to the rollout outcome it ends with, if any.
func OutcomeOf(reason string) string {
	switch reason {
	case EventRolloutComplete:
		return OutcomeComplete
	case EventProgressDeadline:
		return OutcomeFailed
	case EventAborted:
		return OutcomeAborted
	case EventMigrationFailed, EventMigrationDeadline:
		return OutcomeMigrationFailed
	}
	return ""
}
