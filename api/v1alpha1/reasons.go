package v1alpha1

// Condition reasons of names that are taken, templates that differ and migrations that wait.
const (
	// ReasonNameConflict: an object with the deterministic name schemagate needs (a migration Job or
	// a shard's ReplicaSet) exists and is not controlled by this RoutingService. It is never taken as
	// evidence or adopted as a revision; Stalled=True names it until the name is free.
	ReasonNameConflict = "NameConflict"
	// ReasonTemplateMismatch: a ReplicaSet this RoutingService controls carries the update
	// revision's name and labels but runs another pod template (a hand edit, or a hash collision).
	// It is never counted as the revision; Stalled=True names it and the first difference.
	ReasonTemplateMismatch = "TemplateMismatch"
	// ReasonWaitingForMigration: the required schema's migration waits for another migration Job of
	// this RoutingService (an earlier version's) to end, since two migrations never run at once; or
	// the update revision waits for a migration or contract Job that may still bring the database
	// outside its range. Stalled=True with it once such a Job has had only terminating pods for
	// progressDeadlineSeconds: only a person can tell whether they still run.
	ReasonWaitingForMigration = "WaitingForMigration"
)

// Condition reasons of the schema report (docs/schema-report.md).
const (
	// ReasonSchemaMismatch: a migration or check Job finished, but its schema report says the
	// database is at a lower version than spec.schema.version. The gate stays closed; Stalled=True
	// until a retry annotation or a changed migration template starts the next attempt.
	ReasonSchemaMismatch = "SchemaMismatch"
	// ReasonSchemaDirty: the latest schema report says the database is dirty (a migration failed
	// half-way). Only a person may clear it: no automatic retry; after the fix, a retry annotation
	// starts the next attempt.
	ReasonSchemaDirty = "SchemaDirty"
	// ReasonInvalidSchemaReport: a Job that finished wrote no schema report, or one that cannot be
	// read (too large, malformed, an unknown format, a version that is not a version). The gate
	// stays closed; Stalled=True.
	ReasonInvalidSchemaReport = "InvalidSchemaReport"
	// ReasonCheckingSchema: a check Job is asking the database for its version (after a migration,
	// with spec.schema.check.afterMigration).
	ReasonCheckingSchema = "CheckingSchema"
	// ReasonSchemaCheckFailed: the check Job failed or ran past its deadline without a report.
	ReasonSchemaCheckFailed = "SchemaCheckFailed"
	// ReasonMigrationSuspended: the migration Job is suspended by someone other than schemagate
	// (a queue such as Kueue holds it until capacity is free): nothing runs, and its deadline does
	// not run either. Reconciling=True while it waits; Stalled=True once it has been suspended
	// longer than the migration's activeDeadlineSeconds, until it is released.
	ReasonMigrationSuspended = "MigrationSuspended"
	// ReasonSchemaEvidenceLost: the Job that confirmed the schema is gone, no check Job is
	// configured, and the rollout needs the gate open; a retry annotation runs the migration again.
	ReasonSchemaEvidenceLost = "SchemaEvidenceLost"
)

// Condition and Event reasons of the pod-health gate (spec.strategy.podHealth): a pod of the
// update revision restarted more than maxRestarts times in a shard, and the rollout failed at once
// (failurePolicy applies). The message names the pod, the container and the cause.
const (
	// ReasonPodOOMKilled: the container's last termination was an OOM kill (OOMKilled, exit 137).
	ReasonPodOOMKilled = "PodOOMKilled"
	// ReasonPodCrashLooping: the container waits in CrashLoopBackOff.
	ReasonPodCrashLooping = "PodCrashLooping"
	// ReasonPodRestarted: the container restarted for another cause (a crash, a failed liveness
	// probe).
	ReasonPodRestarted = "PodRestarted"
)

// Condition and Event reasons of shard checks.
const (
	// ReasonShardCheckFailed: a check of spec.strategy.checks failed in a shard: the rollout
	// failed at once and failurePolicy applies (a dryRun check only reports it, as an Event).
	ReasonShardCheckFailed = "ShardCheckFailed"
	// ReasonShardCheckInconclusive: a check's inconclusive measurements (no data, NaN) went
	// beyond its inconclusiveLimit: the shard holds, as Argo Rollouts pauses, until a person
	// promotes (the check is set aside) or aborts. The RoutingService is Reconciling while it
	// holds, and Stalled once it held progressDeadlineSeconds.
	ReasonShardCheckInconclusive = "ShardCheckInconclusive"
	// ReasonInvalidCheck: a check of spec.strategy.checks can never be measured as written (a
	// CEL condition that does not compile, an address or URL that does not parse, a JSONPath
	// that does not parse), which the API server cannot tell: Stalled=True names the field, and
	// no shard starts or steps the update revision until the spec is fixed.
	ReasonInvalidCheck = "InvalidCheck"
)

// Condition and Event reasons of writes the API server refused.
const (
	// ReasonWriteRefused: the API server refused a create, patch or delete schemagate needs (an
	// invalid pod template field the CRD cannot check, an admission policy, a ResourceQuota, a
	// PodDisruptionBudget that cannot be created). Stalled=True quotes the server's message
	// (bounded); the write is tried again on every reconcile, progress deadlines keep running, and
	// nothing already serving is changed because of it.
	ReasonWriteRefused = "WriteRefused"
)

// Condition and Event reasons of the schema lifecycle: expand, roll out, contract
// (docs/schema-lifecycle.md).
const (
	// ReasonIncompatibleRevision: the migration to spec.schema.version is refused before its Job
	// exists, because a revision that serves a shard, or that a rollback would return to, cannot
	// run on that version; the message names each such revision, its range and its shards.
	ReasonIncompatibleRevision = "IncompatibleRevision"
	// ReasonRollbackRefused: a rollback (failurePolicy, abort, or a spec reverted to an older
	// revision) would return a shard to a revision whose range does not contain the database's
	// reported version; the shard holds on the revision that works.
	ReasonRollbackRefused = "RollbackRefused"
	// ReasonRollbackUnsafe: RollbackSafe=False: a revision a rollback would return to cannot run
	// on the database's reported version.
	ReasonRollbackUnsafe = "RollbackUnsafe"
	// ReasonRollbackAvailable: RollbackSafe=True.
	ReasonRollbackAvailable = "RollbackAvailable"
	// ReasonRollbackUnverified: RollbackSafe=Unknown: a revision a rollback would return to runs
	// on the database's schema only by an assumed range (it declares none, and the database is
	// past the version it was built for): whether its binary works there is not known.
	ReasonRollbackUnverified = "RollbackUnverified"
	// ReasonInvalidSchemaRange: spec.schema.compatibility is not a range of versions that contains
	// spec.schema.version (a shape the API server cannot compare): no migration starts and no pod
	// of the revision runs until the spec is fixed; Stalled=True.
	ReasonInvalidSchemaRange = "InvalidSchemaRange"
	// ReasonDatabaseAhead: the database reports a version outside the range of a revision that
	// serves a shard; nothing scales up on that revision.
	ReasonDatabaseAhead = "DatabaseAhead"
	// ReasonProbing: SchemaReady=False while the migration probe (spec.schema.probe) runs on its
	// scratch database; the migration Job starts once it has a verdict.
	ReasonProbing = "Probing"
	// ReasonBreakingChange: the migration is refused before its Job exists because its probe found
	// a breaking change (a dropped or renamed column or table, an incompatible type change, a NOT
	// NULL column with no default) and a revision that serves or that a rollback would return to
	// runs on the database only by an assumed range; the message names the change, the revisions
	// and the fixes. Stalled=True. As a Warning Event: the probe's breaking change contradicts a
	// declared range (the declaration stands), or allowBreakingMigration lets it through.
	ReasonBreakingChange = "BreakingChange"
	// ReasonProbeMigrationFailed: the migration failed on the probe's scratch database, so it is
	// not run on the database; Stalled=True until a retry annotation or a changed template.
	ReasonProbeMigrationFailed = "ProbeMigrationFailed"
	// ReasonProbeFailed: the probe could not run (its copy of the schema or its scratch database
	// failed, its deadline passed). With spec.schema.probe.onFailure Proceed (the default) a
	// Warning Event, and the migration starts as without a probe; with Hold, Stalled=True.
	ReasonProbeFailed = "ProbeFailed"
	// ReasonWaitingForContract: a new revision needs another expand while a contract is pending
	// and its range does not cover both versions.
	ReasonWaitingForContract = "WaitingForContract"
	// ReasonContracting: the contract Job runs.
	ReasonContracting = "Contracting"
	// ReasonContractFailed: the contract Job failed, or its report does not confirm the version.
	ReasonContractFailed = "ContractFailed"
	// ReasonContractComplete: the database reports the contract version.
	ReasonContractComplete = "ContractComplete"
	// ContractReady=False reasons: what the contract waits for.
	ReasonWaitingForShards   = "WaitingForShards"
	ReasonOlderPodsRemain    = "OlderPodsRemain"
	ReasonRollbackWindow     = "RollbackWindow"
	ReasonAwaitingApproval   = "AwaitingApproval"
	ReasonMigrationRunning   = "MigrationRunning"
	ReasonContractReadyToRun = "ReadyToRun"
	// ReasonClusterUnreachable: a shard's cluster does not answer; the shard holds what it
	// serves (Ready=False; Stalled=True after unreachableDeadlineSeconds).
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonCredentialsRefused: a shard's cluster refused its credentials, or its Secret is
	// missing or unusable; the message names the Secret.
	ReasonCredentialsRefused = "CredentialsRefused"
	// ReasonClusterConnecting: a shard's cluster client is being set up.
	ReasonClusterConnecting = "ClusterConnecting"
	// ReasonManagedByAnotherHub: a shard's cluster is managed by another hub (its anchor says
	// so); schemagate.io/takeover hands it over.
	ReasonManagedByAnotherHub = "ManagedByAnotherHub"
	// ReasonClustersReachable: ClustersReachable=True.
	ReasonClustersReachable = "ClustersReachable"
)
