package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RoutingServiceSpec is the desired state of a RoutingService: a routing binary, the database
// schema version it needs, the migration that brings the database there, and the region shards it
// is promoted through, in order.
// +kubebuilder:validation:XValidation:rule="!has(self.schema.runWithShard) || self.shards.exists(s, s.name == self.schema.runWithShard)",message="spec.schema.runWithShard must name a shard of spec.shards",fieldPath=".schema.runWithShard"
type RoutingServiceSpec struct {
	// template is the pod template of the routing binary, as in a Deployment. schemagate adds the
	// labels schemagate.io/name, schemagate.io/shard and schemagate.io/revision and merges each
	// shard's nodeSelector into it. Every container must name an image.
	// +required
	// +kubebuilder:validation:XValidation:rule="size(self.spec.containers) > 0",message="spec.template.spec.containers must not be empty"
	// +kubebuilder:validation:XValidation:rule="self.spec.containers.all(c, has(c.image) && size(c.image) > 0)",message="spec.template.spec.containers[].image must not be empty",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`

	// schema declares the database schema version the template requires and the migration Job
	// that brings the database to it. No pod of a revision runs before its schema is confirmed:
	// by default by the schema report the migration (or check) Job's container writes, saying the
	// database is at that version or above and not dirty (docs/schema-report.md).
	// +required
	Schema SchemaSpec `json:"schema"`

	// shards are the region shards, in promotion order. A revision is promoted in shards[0] first,
	// then, once that shard is fully available and baked, in shards[1], and so on.
	// Between 1 and 50 shards; names are unique.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	Shards []ShardSpec `json:"shards"`

	// strategy tunes how a revision is promoted within and across shards. Every field of it is
	// optional and defaulted; an empty or omitted strategy means all defaults.
	// +optional
	// +kubebuilder:default={}
	Strategy RolloutStrategy `json:"strategy,omitempty"`

	// paused stops all promotion while true: nothing is scaled (replica changes included), no
	// migration Job is started or retried, and what serves keeps serving. A retry or promote
	// annotation set while paused acts once after unpausing. Time paused counts against neither the
	// progress deadline nor the bake: a shard that was progressing or baking starts its step again.
	// Set it declaratively (it survives GitOps self-heal).
	// +optional
	Paused bool `json:"paused,omitempty"`

	// disruptionBudget sets the PodDisruptionBudget schemagate keeps for each shard, which limits
	// voluntary evictions (kubectl drain, a cluster autoscaler scaling nodes down) of the shard's
	// routing pods, all revisions counted together. Omitted, every shard gets one with the
	// default maxUnavailable. See docs/disruption-budgets.md.
	// +optional
	// +kubebuilder:default={}
	DisruptionBudget DisruptionBudgetSpec `json:"disruptionBudget,omitempty"`
}

// DisruptionBudgetSpec configures the per-shard policy/v1 PodDisruptionBudgets. Each is named
// <routingservice>-<shard>, selects the shard's routing pods of every revision (the labels
// schemagate.io/name, schemagate.io/shard and app.kubernetes.io/component=routing), has the
// RoutingService as its controller (the garbage collector removes it with the RoutingService), and
// exists before the shard's first pod is created.
type DisruptionBudgetSpec struct {
	// enabled set to false opts out: schemagate creates no PodDisruptionBudget and deletes the ones
	// it created before (for clusters where another tool owns them). Default true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// maxUnavailable is how many of a shard's routing pods may be unavailable at once because of
	// evictions: a number of pods (>= 0) or a percentage of the shard's pods, which the disruption
	// controller rounds up (policy/v1 semantics), set as it is on each shard's budget.
	// Omitted, each shard's budget is spec.strategy.maxUnavailable resolved against the shard's
	// replicas (rounded down, as a rollout step uses it), but at least 1 pod, and it follows
	// replica and strategy changes. The floor of 1 is deliberate: strategy.maxUnavailable defaults
	// to 0, and a budget that allows no disruption makes `kubectl drain` wait forever on every node
	// running such a pod (the Kubernetes documentation on PodDisruptionBudgets warns of it). Set 0
	// explicitly only to forbid voluntary evictions altogether.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="spec.disruptionBudget.maxUnavailable must be a non-negative number or percentage"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// SchemaSpec is the schema version a revision requires and how to reach it.
// The range must contain version, and a contract version lies above version and inside the
// range. CEL cannot compare dotted versions, so each rule compares up to 4 segments of at most 18
// digits as numbers; other shapes pass here and the manager refuses them (InvalidSchemaRange).
// +kubebuilder:validation:XValidation:rule="!has(self.compatibility) || !has(self.compatibility.min) || !((size(self.compatibility.min.split('.')) <= 4 && self.compatibility.min.split('.').all(s, size(s) <= 18)) && (size(self.version.split('.')) <= 4 && self.version.split('.').all(s, size(s) <= 18))) || ((size(self.compatibility.min.split('.')) > 0 ? int(self.compatibility.min.split('.')[0]) : 0) < (size(self.version.split('.')) > 0 ? int(self.version.split('.')[0]) : 0) || ((size(self.compatibility.min.split('.')) > 0 ? int(self.compatibility.min.split('.')[0]) : 0) == (size(self.version.split('.')) > 0 ? int(self.version.split('.')[0]) : 0) && ((size(self.compatibility.min.split('.')) > 1 ? int(self.compatibility.min.split('.')[1]) : 0) < (size(self.version.split('.')) > 1 ? int(self.version.split('.')[1]) : 0) || ((size(self.compatibility.min.split('.')) > 1 ? int(self.compatibility.min.split('.')[1]) : 0) == (size(self.version.split('.')) > 1 ? int(self.version.split('.')[1]) : 0) && ((size(self.compatibility.min.split('.')) > 2 ? int(self.compatibility.min.split('.')[2]) : 0) < (size(self.version.split('.')) > 2 ? int(self.version.split('.')[2]) : 0) || ((size(self.compatibility.min.split('.')) > 2 ? int(self.compatibility.min.split('.')[2]) : 0) == (size(self.version.split('.')) > 2 ? int(self.version.split('.')[2]) : 0) && ((size(self.compatibility.min.split('.')) > 3 ? int(self.compatibility.min.split('.')[3]) : 0) <= (size(self.version.split('.')) > 3 ? int(self.version.split('.')[3]) : 0))))))))",message="spec.schema.compatibility.min must be at or below spec.schema.version (versions compare segment by segment as numbers)"
// +kubebuilder:validation:XValidation:rule="!has(self.compatibility) || !has(self.compatibility.max) || !((size(self.compatibility.max.split('.')) <= 4 && self.compatibility.max.split('.').all(s, size(s) <= 18)) && (size(self.version.split('.')) <= 4 && self.version.split('.').all(s, size(s) <= 18))) || ((size(self.version.split('.')) > 0 ? int(self.version.split('.')[0]) : 0) < (size(self.compatibility.max.split('.')) > 0 ? int(self.compatibility.max.split('.')[0]) : 0) || ((size(self.version.split('.')) > 0 ? int(self.version.split('.')[0]) : 0) == (size(self.compatibility.max.split('.')) > 0 ? int(self.compatibility.max.split('.')[0]) : 0) && ((size(self.version.split('.')) > 1 ? int(self.version.split('.')[1]) : 0) < (size(self.compatibility.max.split('.')) > 1 ? int(self.compatibility.max.split('.')[1]) : 0) || ((size(self.version.split('.')) > 1 ? int(self.version.split('.')[1]) : 0) == (size(self.compatibility.max.split('.')) > 1 ? int(self.compatibility.max.split('.')[1]) : 0) && ((size(self.version.split('.')) > 2 ? int(self.version.split('.')[2]) : 0) < (size(self.compatibility.max.split('.')) > 2 ? int(self.compatibility.max.split('.')[2]) : 0) || ((size(self.version.split('.')) > 2 ? int(self.version.split('.')[2]) : 0) == (size(self.compatibility.max.split('.')) > 2 ? int(self.compatibility.max.split('.')[2]) : 0) && ((size(self.version.split('.')) > 3 ? int(self.version.split('.')[3]) : 0) <= (size(self.compatibility.max.split('.')) > 3 ? int(self.compatibility.max.split('.')[3]) : 0))))))))",message="spec.schema.compatibility.max must be at or above spec.schema.version (versions compare segment by segment as numbers)"
// +kubebuilder:validation:XValidation:rule="!has(self.contract) || !((size(self.contract.version.split('.')) <= 4 && self.contract.version.split('.').all(s, size(s) <= 18)) && (size(self.version.split('.')) <= 4 && self.version.split('.').all(s, size(s) <= 18))) || !((size(self.contract.version.split('.')) > 0 ? int(self.contract.version.split('.')[0]) : 0) < (size(self.version.split('.')) > 0 ? int(self.version.split('.')[0]) : 0) || ((size(self.contract.version.split('.')) > 0 ? int(self.contract.version.split('.')[0]) : 0) == (size(self.version.split('.')) > 0 ? int(self.version.split('.')[0]) : 0) && ((size(self.contract.version.split('.')) > 1 ? int(self.contract.version.split('.')[1]) : 0) < (size(self.version.split('.')) > 1 ? int(self.version.split('.')[1]) : 0) || ((size(self.contract.version.split('.')) > 1 ? int(self.contract.version.split('.')[1]) : 0) == (size(self.version.split('.')) > 1 ? int(self.version.split('.')[1]) : 0) && ((size(self.contract.version.split('.')) > 2 ? int(self.contract.version.split('.')[2]) : 0) < (size(self.version.split('.')) > 2 ? int(self.version.split('.')[2]) : 0) || ((size(self.contract.version.split('.')) > 2 ? int(self.contract.version.split('.')[2]) : 0) == (size(self.version.split('.')) > 2 ? int(self.version.split('.')[2]) : 0) && ((size(self.contract.version.split('.')) > 3 ? int(self.contract.version.split('.')[3]) : 0) <= (size(self.version.split('.')) > 3 ? int(self.version.split('.')[3]) : 0))))))))",message="spec.schema.contract.version must be above spec.schema.version"
// +kubebuilder:validation:XValidation:rule="!has(self.contract) || !has(self.compatibility) || !has(self.compatibility.max) || !((size(self.contract.version.split('.')) <= 4 && self.contract.version.split('.').all(s, size(s) <= 18)) && (size(self.compatibility.max.split('.')) <= 4 && self.compatibility.max.split('.').all(s, size(s) <= 18))) || ((size(self.contract.version.split('.')) > 0 ? int(self.contract.version.split('.')[0]) : 0) < (size(self.compatibility.max.split('.')) > 0 ? int(self.compatibility.max.split('.')[0]) : 0) || ((size(self.contract.version.split('.')) > 0 ? int(self.contract.version.split('.')[0]) : 0) == (size(self.compatibility.max.split('.')) > 0 ? int(self.compatibility.max.split('.')[0]) : 0) && ((size(self.contract.version.split('.')) > 1 ? int(self.contract.version.split('.')[1]) : 0) < (size(self.compatibility.max.split('.')) > 1 ? int(self.compatibility.max.split('.')[1]) : 0) || ((size(self.contract.version.split('.')) > 1 ? int(self.contract.version.split('.')[1]) : 0) == (size(self.compatibility.max.split('.')) > 1 ? int(self.compatibility.max.split('.')[1]) : 0) && ((size(self.contract.version.split('.')) > 2 ? int(self.contract.version.split('.')[2]) : 0) < (size(self.compatibility.max.split('.')) > 2 ? int(self.compatibility.max.split('.')[2]) : 0) || ((size(self.contract.version.split('.')) > 2 ? int(self.contract.version.split('.')[2]) : 0) == (size(self.compatibility.max.split('.')) > 2 ? int(self.compatibility.max.split('.')[2]) : 0) && ((size(self.contract.version.split('.')) > 3 ? int(self.contract.version.split('.')[3]) : 0) <= (size(self.compatibility.max.split('.')) > 3 ? int(self.compatibility.max.split('.')[3]) : 0))))))))",message="spec.schema.contract.version must be inside spec.schema.compatibility (at or below compatibility.max)"
type SchemaSpec struct {
	// version is the schema version the template requires: a dotted numeric string ("9",
	// "2026.10.1"), compared segment by segment as numbers, so "9" < "10" and
	// "2026.9.30" < "2026.10.1". It is the version the migration brings the database to (the
	// expand step); the template runs on the schemas of compatibility, and lowering version never
	// runs a migration (docs/schema-lifecycle.md).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)*$`
	Version string `json:"version"`

	// compatibility is the range of database schema versions the template's binary runs on: the
	// oldest (min) and newest (max) schema it still works against. It must contain version. It is
	// part of the revision, and recorded on the revision's ReplicaSets, so what an old revision is
	// known to run on survives a lost status write or a restored backup. A migration to a version
	// outside the range of a revision that serves a shard, or that a rollback would return to, is
	// refused before its Job exists (IncompatibleRevision); a rollback to a revision whose range
	// does not contain the database's version is refused (RollbackRefused). When unset, the
	// revision is assumed to run on version and every newer schema (the rule of earlier
	// releases), and plan and status say the range is assumed (docs/schema-lifecycle.md).
	// +optional
	Compatibility *SchemaCompatibility `json:"compatibility,omitempty"`

	// migration is the Job that brings the database up to version (the expand step). It runs
	// exactly once per version and attempt, before any pod of the revision, unless the revision
	// also runs on the database's current version (compatibility.min), when shards may roll
	// first and the migration follows.
	// +required
	Migration MigrationSpec `json:"migration"`

	// contract is an optional migration that removes what only older revisions needed (the
	// contract step), run exactly once when every shard is fully promoted to revisions whose
	// range contains contract.version, no pod of any other revision exists, and the rollback
	// window has passed (condition ContractReady says what it waits for).
	// +optional
	Contract *ContractSpec `json:"contract,omitempty"`

	// allowBreakingMigration lets a migration start although a revision that serves a shard, or
	// that a rollback would return to, cannot run on its version: planned downtime, chosen by a
	// person. Default false: such a migration is refused before its Job exists.
	// +optional
	AllowBreakingMigration bool `json:"allowBreakingMigration,omitempty"`

	// probe is the dry run of each migration before its Job exists: the team's migration
	// container runs against a scratch PostgreSQL brought to the database's schema, and what it
	// changes is classified (expand, conditional, breaking, failed). A breaking change narrows
	// every revision whose range is only assumed to the database's version now, so the expand
	// gate refuses the migration (BreakingChange) and a rollback to such a revision is refused
	// once it ran. It runs when the manager is given a probe image (--probe-image) and mode is
	// not Off (docs/schema-lifecycle.md, "The probe in the cluster").
	// +optional
	Probe *ProbeSpec `json:"probe,omitempty"`

	// evidence says what confirms a schema version. Report (the default): the schema report a
	// migration or check container writes to its termination message (docs/schema-report.md) must
	// say the database is at version or above and not dirty; a Job that succeeds without one
	// confirms nothing. JobSuccess: the success of the migration Job is enough when its pod leaves
	// no report that parses, for migration images that cannot write one (a report that parses
	// still decides); a Job that exits 0 without migrating then opens the gate.
	// Report is the default because a Complete Job is not a migrated database: a Job can succeed
	// while the database still reports the old version.
	// +optional
	// +kubebuilder:default=Report
	Evidence SchemaEvidence `json:"evidence,omitempty"`

	// runWithShard names the shard whose place the schema Jobs (migration, contract and check)
	// run in: its cluster (spec.shards[].cluster) and its namespace there, controlled by the
	// anchor there, for a database that only that cluster reaches. Unset, or a shard without a
	// cluster: the RoutingService's own namespace. The gate stays global: no pod of a revision
	// runs in any cluster before its schema is confirmed. While that cluster does not answer the
	// RoutingService holds: nothing is created, scaled or deleted anywhere, conditions say why,
	// and the time away is not charged to any shard's progress deadline or bake
	// (docs/clusters.md). Changing it moves where the next Job runs, and is refused while a
	// migration or contract Job runs; the Jobs that ran before stay where they ran, and are read
	// while a shard still runs in their cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=20
	RunWithShard string `json:"runWithShard,omitempty"`

	// check is an optional read-only Job that asks the database which version it is at, without
	// changing it, and writes a schema report. schemagate runs it instead of the migration when
	// the Job that confirmed the current version is gone (a ttlSecondsAfterFinished, a person):
	// conditions stay as they are while it runs, no migration runs again, and nothing is scaled
	// up until it reports. Without it, lost evidence is reported and waits for a
	// retry annotation.
	// +optional
	Check *SchemaCheckSpec `json:"check,omitempty"`
}

// SchemaCompatibility is the range of database schema versions a binary runs on, both ends
// included, compared as versions (docs/schema-lifecycle.md).
type SchemaCompatibility struct {
	// min is the oldest schema version the binary runs on. Default: spec.schema.version.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)*$`
	Min string `json:"min,omitempty"`

	// max is the newest schema version the binary runs on. Unset: every newer schema.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)*$`
	Max string `json:"max,omitempty"`
}

// ContractSpec is the contract migration: it runs once, after every shard left the revisions
// that needed what it removes.
type ContractSpec struct {
	// version is the schema version the database is at after the contract. It must be above
	// spec.schema.version and inside spec.schema.compatibility.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)*$`
	Version string `json:"version"`

	// migration is the contract Job: the same template, backoff, deadline and report rules as
	// spec.schema.migration. Its container receives SCHEMAGATE_SCHEMA_VERSION=version.
	// +required
	Migration MigrationSpec `json:"migration"`

	// rollbackWindowSeconds is how long after the last shard was promoted the contract waits
	// with no failure, in seconds, so that a rollback to the older revision stays possible.
	// Default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	RollbackWindowSeconds *int32 `json:"rollbackWindowSeconds,omitempty"`

	// requireApproval holds the contract, once every other rule holds, until a person sets the
	// schemagate.io/approve-contract annotation (kubectl schemagate approve-contract NAME).
	// +optional
	RequireApproval bool `json:"requireApproval,omitempty"`
}

// ProbeSpec configures the migration probe (spec.schema.probe).
type ProbeSpec struct {
	// mode is Enforce (the default: the probe runs before each migration and its verdict feeds
	// the gates) or Off (no probe runs; ranges stay as declared or assumed).
	// +optional
	// +kubebuilder:default=Enforce
	Mode ProbeMode `json:"mode,omitempty"`

	// onFailure is what happens when the probe cannot run (its copy of the schema fails, the
	// scratch database does not start, it runs past its deadline): Proceed (the default: the
	// migration starts as it would without a probe, and status.schema.probe and a Warning Event
	// say the probe did not run) or Hold (the migration waits, Stalled with ProbeFailed, until
	// a retry annotation or a changed migration template).
	// +optional
	// +kubebuilder:default=Proceed
	OnFailure ProbeFailurePolicy `json:"onFailure,omitempty"`

	// databaseEnv is the environment variable of the migration container that holds the
	// database's URL: the probe's copy step reads the database through it (read-only), and the
	// migration container runs with it pointed at the scratch database. Default DATABASE_URL.
	// +optional
	// +kubebuilder:default=DATABASE_URL
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	DatabaseEnv string `json:"databaseEnv,omitempty"`

	// databaseImage is the scratch PostgreSQL's image: the same major version as the database.
	// Default: the manager's --probe-database-image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	DatabaseImage string `json:"databaseImage,omitempty"`

	// activeDeadlineSeconds bounds the probe Job, in seconds. Default 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=3600
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// ProbeMode says whether the migration probe runs.
// +kubebuilder:validation:Enum=Enforce;Off
type ProbeMode string

const (
	ProbeModeEnforce ProbeMode = "Enforce"
	ProbeModeOff     ProbeMode = "Off"
)

// ProbeFailurePolicy says what a probe that cannot run does to the migration.
// +kubebuilder:validation:Enum=Proceed;Hold
type ProbeFailurePolicy string

const (
	ProbeFailureProceed ProbeFailurePolicy = "Proceed"
	ProbeFailureHold    ProbeFailurePolicy = "Hold"
)

// SchemaEvidence names what confirms a schema version.
// +kubebuilder:validation:Enum=Report;JobSuccess
type SchemaEvidence string

const (
	// SchemaEvidenceReport: the migration or check Job's schema report confirms the version.
	SchemaEvidenceReport SchemaEvidence = "Report"
	// SchemaEvidenceJobSuccess: the migration Job's success confirms the version it was created for.
	SchemaEvidenceJobSuccess SchemaEvidence = "JobSuccess"
)

// SchemaCheckSpec describes the check Job: a read-only container (for instance
// `schemagate-schema report --tool golang-migrate`) that writes a schema report and exits.
type SchemaCheckSpec struct {
	// template is the check Job's pod template. restartPolicy must be Never or OnFailure. The
	// container receives SCHEMAGATE_SCHEMA_VERSION (the required version) in its environment. It
	// must not change the database.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.spec.restartPolicy) && self.spec.restartPolicy in ['Never', 'OnFailure']",message="spec.schema.check.template.spec.restartPolicy must be Never or OnFailure",fieldPath=".spec.restartPolicy"
	// +kubebuilder:validation:XValidation:rule="size(self.spec.containers) > 0 && self.spec.containers.all(c, has(c.image) && size(c.image) > 0)",message="spec.schema.check.template.spec.containers[].image must not be empty",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`

	// afterMigration runs, when true, the check right after each successful migration as an
	// independent confirmation: the gate opens only on the check's report. Default false.
	// +optional
	AfterMigration bool `json:"afterMigration,omitempty"`

	// beforeEachShard runs, when true, the check before each shard after the first starts, for
	// databases that other hands change: the shard starts only once its check's report confirms
	// the schema; a report below it closes the gate (SchemaMismatch) with every shard serving what
	// it serves. Default false.
	// +optional
	BeforeEachShard bool `json:"beforeEachShard,omitempty"`

	// backoffLimit is the number of retries of the check pod before the check Job fails.
	// Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the check, in seconds from the Job's creation; past it (plus
	// 10 s for the Job controller) the RoutingService is Stalled with SchemaCheckFailed.
	// Default 120 s.
	// +optional
	// +kubebuilder:default=120
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// MigrationSpec describes the migration Job.
type MigrationSpec struct {
	// template is the migration Job's pod template. restartPolicy must be Never or OnFailure
	// (a Job rule). The container receives SCHEMAGATE_SCHEMA_VERSION in its environment.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.spec.restartPolicy) && self.spec.restartPolicy in ['Never', 'OnFailure']",message="spec.schema.migration.template.spec.restartPolicy must be Never or OnFailure",fieldPath=".spec.restartPolicy"
	// +kubebuilder:validation:XValidation:rule="size(self.spec.containers) > 0 && self.spec.containers.all(c, has(c.image) && size(c.image) > 0)",message="spec.schema.migration.template.spec.containers[].image must not be empty",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`

	// backoffLimit is the number of retries of the migration pod before the Job fails
	// (the Job's backoffLimit). Default 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the migration, in seconds of running time: from the Job's
	// status.startTime, which the Job controller sets when the Job starts and again when it is
	// resumed, or from its creation when it has none. Time the Job spends suspended (by a queue
	// such as Kueue) does not count, as for the Job controller. It is set on the Job, and
	// schemagate enforces it itself too (plus 10 s for the Job controller to act first), so a
	// migration whose pod never starts (image pull failure, unschedulable) still ends. A Job
	// that stays suspended longer than activeDeadlineSeconds is Stalled (MigrationSuspended)
	// until it is released. A success that comes after schemagate's deadline never opens the
	// gate: the attempt stays MigrationDeadlineExceeded, and a retry annotation runs the next
	// attempt, whose schema report decides. Default 600 s.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// jobMetadata are labels and annotations put on the migration Job itself (the template's
	// metadata reaches only its pods), for tools that read Jobs: a queue label such as
	// kueue.x-k8s.io/queue-name, a cost-centre label. schemagate's own keys win and cannot be
	// set here: app.kubernetes.io/managed-by, app.kubernetes.io/component and every key under
	// schemagate.io/. A change applies to the next migration Job; it never starts one.
	// +optional
	JobMetadata *JobMetadata `json:"jobMetadata,omitempty"`
}

// JobMetadata are labels and annotations for a Job schemagate creates.
type JobMetadata struct {
	// labels are added to the Job's labels (at most 32; keys and values as Kubernetes labels).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('schemagate.io/') && k != 'app.kubernetes.io/managed-by' && k != 'app.kubernetes.io/component')",message="spec.schema.migration.jobMetadata.labels must not set app.kubernetes.io/managed-by, app.kubernetes.io/component or a schemagate.io/ key: schemagate sets them"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 316 && size(self[k]) <= 63)",message="spec.schema.migration.jobMetadata.labels: a key is at most 316 characters (prefix/name) and a value at most 63"
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the Job's annotations (at most 32, each value at most 4096
	// characters).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('schemagate.io/'))",message="spec.schema.migration.jobMetadata.annotations must not set a schemagate.io/ key: schemagate sets them"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 316 && size(self[k]) <= 4096)",message="spec.schema.migration.jobMetadata.annotations: a key is at most 316 characters and a value at most 4096"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ShardSpec is one region shard.
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.cluster)",message="spec.shards[].autoscaling is not supported yet for a shard with a cluster",fieldPath=".autoscaling"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.maxReplicas) || self.replicas <= self.autoscaling.maxReplicas",message="spec.shards[].replicas, the size an autoscaled shard starts with, must not be above autoscaling.maxReplicas",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.minReplicas) || self.replicas >= self.autoscaling.minReplicas",message="spec.shards[].replicas, the size an autoscaled shard starts with, must not be below autoscaling.minReplicas",fieldPath=".replicas"
type ShardSpec struct {
	// name identifies the shard: a DNS label of at most 20 characters, unique in spec.shards.
	// It appears in ReplicaSet names (<routingservice>-<shard>-<hash>) and labels.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// replicas is the number of pods the shard runs (>= 0). A change applies at once to the
	// revision serving the shard, whatever the rollout is doing (migrating, stalled, not yet at
	// this shard), within maxSurge/maxUnavailable; mid-step, the serving revision grows first,
	// never the one being proven. Paused excepted.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Replicas int32 `json:"replicas"`

	// nodeSelector is merged into the pod template's nodeSelector for this shard's pods, so that
	// they stay in its region, e.g. {"topology.kubernetes.io/region": "us-east-1"}. It wins over the
	// template's own entry for the same key.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// cluster places the shard in another Kubernetes cluster (a spoke), reached with the
	// credentials of a Secret in the RoutingService's namespace. Unset: the shard runs in the
	// RoutingService's own cluster, as before. The schema Jobs run in the RoutingService's
	// namespace unless spec.schema.runWithShard names a shard with a cluster; either way no pod of
	// a revision runs in any cluster before its schema is confirmed. docs/clusters.md.
	// +optional
	Cluster *ShardCluster `json:"cluster,omitempty"`

	// autoscaling lets an autoscaler own the shard's size: a HorizontalPodAutoscaler schemagate
	// creates from these fields, or the team's own (scaler External). Either scales the shard's
	// RoutingShard, <routingservice>-<shard>; replicas is then the size the shard starts with. A
	// size change never starts a revision, a migration or a check. Not yet for a shard with a
	// cluster. docs/autoscaling.md.
	// +optional
	Autoscaling *ShardAutoscaling `json:"autoscaling,omitempty"`
}

// ShardCluster names the cluster a shard runs in and how schemagate reaches it.
type ShardCluster struct {
	// name identifies the cluster, as Cluster API names it: the kubeconfig is read from the Secret
	// <name>-kubeconfig, key "value", in the RoutingService's namespace, unless secretRef names
	// another. A DNS label of at most 50 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// namespace is the namespace in that cluster the shard's ReplicaSets run in. Default: the
	// RoutingService's namespace name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// secretRef names the Secret holding the cluster's credentials, when it is not
	// <name>-kubeconfig.
	// +optional
	SecretRef *ClusterSecretRef `json:"secretRef,omitempty"`
}

// ClusterSecretFormat says how a cluster Secret holds its credentials.
// +kubebuilder:validation:Enum=Kubeconfig;ArgoCD
type ClusterSecretFormat string

const (
	// ClusterSecretKubeconfig: a kubeconfig under key (default "value"), as Cluster API writes
	// <cluster>-kubeconfig. Its current context is used; exec and auth-provider plugins and file
	// references are refused.
	ClusterSecretKubeconfig ClusterSecretFormat = "Kubeconfig"
	// ClusterSecretArgoCD: an Argo CD cluster Secret (keys server and config, the latter JSON
	// with bearerToken and tlsClientConfig). exec, AWS and username/password configs are refused.
	ClusterSecretArgoCD ClusterSecretFormat = "ArgoCD"
)

// ClusterSecretRef names a Secret in the RoutingService's namespace.
type ClusterSecretRef struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// format is Kubeconfig (default) or ArgoCD.
	// +optional
	// +kubebuilder:default=Kubeconfig
	Format ClusterSecretFormat `json:"format,omitempty"`
	// key is the data key holding the kubeconfig (format Kubeconfig). Default "value".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// UnreachablePolicy says what the rollout does while a shard's cluster cannot be reached.
// +kubebuilder:validation:Enum=Hold;Skip
type UnreachablePolicy string

const (
	// UnreachableHold: the rollout waits at that shard; the shards after it are not started.
	UnreachableHold UnreachablePolicy = "Hold"
	// UnreachableSkip: the shards after it go on; the unreachable shard keeps the revision it
	// serves and is rolled when its cluster returns. Ready stays False meanwhile.
	UnreachableSkip UnreachablePolicy = "Skip"
)

// FailurePolicy says what happens when a shard misses its progress deadline.
// +kubebuilder:validation:Enum=Rollback;Halt
type FailurePolicy string

const (
	// FailurePolicyRollback returns every shard the failed revision touched (and only those) to the
	// revision that last served that shard alone and fully, scaling it up before the failed one
	// down, so the shard never has fewer available pods than its floor while it goes back.
	FailurePolicyRollback FailurePolicy = "Rollback"
	// FailurePolicyHalt stops where the rollout is and touches nothing more.
	FailurePolicyHalt FailurePolicy = "Halt"
)

// RolloutStrategy tunes promotion. maxSurge and maxUnavailable have Deployment semantics within
// a shard: a percentage of the shard's replicas, surge rounded up and unavailable rounded down.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && has(self.maxUnavailable) && (self.maxSurge == 0 || self.maxSurge == '0%') && (self.maxUnavailable == 0 || self.maxUnavailable == '0%'))",message="spec.strategy.maxSurge and spec.strategy.maxUnavailable must not both be 0"
type RolloutStrategy struct {
	// maxSurge is how many pods above a shard's replicas may exist during its step: a number of
	// pods or a percentage of replicas (rounded up). Default 25%.
	// +optional
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="spec.strategy.maxSurge must be a non-negative number or percentage"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// maxUnavailable is how many of a shard's replicas may be unavailable during its step because
	// of schemagate: a number of pods or a percentage of replicas (rounded down). Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="spec.strategy.maxUnavailable must be a non-negative number or percentage"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// minReadySeconds is how long, in seconds, a new pod must be ready before it counts as
	// available (the ReplicaSet's minReadySeconds). Default 0 s.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds *int32 `json:"minReadySeconds,omitempty"`

	// bakeSeconds is how long, in seconds, a shard must stay fully promoted and available before
	// the next shard starts, counted from the moment it was complete; 0 skips the bake.
	// Default 60 s.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	BakeSeconds *int32 `json:"bakeSeconds,omitempty"`

	// progressDeadlineSeconds bounds each shard's step, in seconds from its start (kept in
	// status.shards[].stepStartTime): a shard not fully available by then fails the rollout under
	// failurePolicy. Default 600 s.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// failurePolicy decides what a failed shard step does: Rollback returns each shard the failed
	// revision touched, and only those, to the revision that last served it alone and fully
	// (recorded on its ReplicaSet as schemagate.io/served-order); Halt stops and touches nothing more
	// (replica changes still apply). Default Rollback.
	// +optional
	// +kubebuilder:default=Rollback
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// unreachablePolicy says what the rollout does while a shard's cluster (spec.shards[].cluster)
	// cannot be reached: Hold (default) waits at that shard, Skip goes on with the shards after it.
	// Either way the unreachable shard is never counted as promoted, never rolled back, never
	// scaled or emptied, and the progress deadline is not charged for the time it was unreachable.
	// +optional
	// +kubebuilder:default=Hold
	UnreachablePolicy UnreachablePolicy `json:"unreachablePolicy,omitempty"`

	// unreachableDeadlineSeconds is how long a shard's cluster may stay unreachable, in seconds,
	// before Stalled=True (reason ClusterUnreachable) says a person is needed. Nothing in any
	// cluster changes when it passes. Default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	UnreachableDeadlineSeconds *int32 `json:"unreachableDeadlineSeconds,omitempty"`

	// revisionHistoryLimit is how many scaled-down old ReplicaSets each shard keeps for rollback.
	// Default 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// jobHistoryLimit is how many finished Jobs of each kind (migration, schema check, shard
	// check) the RoutingService keeps; older ones are deleted with their pods (propagation
	// Background), oldest first. Jobs that still matter are always kept and count towards the
	// limit: the Job whose schema report confirms the schema now (status.schema.confirmedBy), any
	// Job still running or finished less than 30 s ago, the latest migration and check Job for
	// spec.schema.version, and the check Jobs of the update revision. Default 3, at least 1.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	JobHistoryLimit *int32 `json:"jobHistoryLimit,omitempty"`

	// podHealth is the built-in pod-health gate, on unless its mode is Off: while the update
	// revision rolls out, a shard fails (failurePolicy applies) as soon as one of that revision's
	// pods there has a container restarted (a crash, an OOM kill, a failed liveness probe) more
	// than maxRestarts times since the shard's step started; a tolerated restart starts the
	// shard's bake over. It watches the shard stepping or baking and every shard already
	// promoted, until the last shard is promoted. Default: Enforce with maxRestarts 0.
	// +optional
	// +kubebuilder:default={}
	PodHealth *PodHealth `json:"podHealth,omitempty"`

	// checks judge each shard by what the service does, not only by pod readiness: they
	// run during each shard's bake, and the shard is promoted only once every check passed and
	// bakeSeconds have passed. A check that fails fails the shard at once, without waiting for the
	// progress deadline, and failurePolicy applies; a dryRun check is reported and never fails
	// the shard. At most 5 (a bound the API server's CEL cost budget needs), names unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:XValidation:rule="self.filter(c, has(c.when) && 'PodReady' in c.when).size() <= 1",message="spec.strategy.checks: at most one check runs at PodReady"
	Checks []ShardCheck `json:"checks,omitempty"`
}

// PodHealthMode says whether the pod-health gate judges the update revision's pods.
// +kubebuilder:validation:Enum=Enforce;Off
type PodHealthMode string

const (
	// PodHealthEnforce fails a shard whose update-revision pods restart more than maxRestarts.
	PodHealthEnforce PodHealthMode = "Enforce"
	// PodHealthOff turns the gate off: restarts are neither counted nor reported.
	PodHealthOff PodHealthMode = "Off"
)

// PodHealth tunes the built-in pod-health gate (spec.strategy.podHealth).
type PodHealth struct {
	// mode is Enforce (the default) or Off. Off is the only way to turn the gate off.
	// +optional
	// +kubebuilder:default=Enforce
	Mode PodHealthMode `json:"mode,omitempty"`

	// maxRestarts is how many times a container of one update-revision pod may restart, from
	// any cause, after its shard's step started, before the shard fails (reason PodRestarted,
	// PodOOMKilled or PodCrashLooping, naming the pod, the container and the cause). Each
	// tolerated restart starts the shard's bake over. Default 0: any restart fails the shard.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRestarts *int32 `json:"maxRestarts,omitempty"`
}

// ShardCheck is one check of a shard, run once per shard and revision during the shard's bake
// (or before the shard starts). It has exactly one provider: job, http or prometheus. The http and
// prometheus providers are measured by the manager itself, every intervalSeconds, count times
// (the semantics of Argo Rollouts' AnalysisTemplate metrics).
// +kubebuilder:validation:XValidation:rule="(has(self.job) ? 1 : 0) + (has(self.http) ? 1 : 0) + (has(self.prometheus) ? 1 : 0) == 1",message="spec.strategy.checks[]: exactly one of job, http or prometheus must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.when) || !('PodReady' in self.when) || (size(self.when) == 1 && has(self.http) && self.http.url.contains('{{podIP}}'))",message="spec.strategy.checks[].when: PodReady is for an http check alone (no other moment), and its url must name the pod with {{podIP}}"
type ShardCheck struct {
	// name identifies the check: a DNS label of at most 20 characters, unique in checks.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// dryRun evaluates the check and reports its result (status, Events) but never fails the
	// shard: how a team adopts a check before trusting it. Default false.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// when says when the check runs, per shard: Bake (during the shard's bake, the default),
	// BeforeStart (before the shard starts promoting: a pre-check; a failure fails the rollout
	// before the shard is touched), or both; or PodReady alone, for an http check whose url names
	// {{podIP}}: it is sent to each pod of the RoutingService once the pod's containers are ready,
	// and the pod becomes Ready (counts as available, joins Service endpoints, lets the shard take
	// an old pod away) only after it passed. The pods carry a readiness gate
	// (schemagate.io/pod-check) that schemagate sets; see docs/checks.md.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:default={Bake}
	When []CheckWhen `json:"when,omitempty"`

	// job is a Job run in the shard's namespace for each shard and revision: it passes when the
	// Job succeeds and fails when it fails or runs past its deadline. Its containers receive
	// SCHEMAGATE_SHARD, SCHEMAGATE_REVISION, SCHEMAGATE_SCHEMA_VERSION and SCHEMAGATE_CHECK.
	// +optional
	Job *JobCheck `json:"job,omitempty"`

	// http is a request the manager sends, for smoke tests against a shard's endpoint: each
	// measurement passes when the status code is expected (and the JSON condition holds).
	// +optional
	HTTP *HTTPCheck `json:"http,omitempty"`

	// prometheus is a PromQL query the manager runs against a Prometheus server: each measurement
	// passes when successCondition holds for its result.
	// +optional
	Prometheus *PrometheusCheck `json:"prometheus,omitempty"`

	// Measurement says how often and how many times an http or prometheus check is measured,
	// and how many failures it tolerates. A job check ignores it.
	Measurement `json:",inline"`
}

// Measurement is how an http or prometheus check is measured. A check passes once count
// measurements were taken and no limit was exceeded. It fails at once when failed measurements
// exceed failureLimit or consecutive errors exceed consecutiveErrorLimit; it is Inconclusive (the
// shard holds until a person promotes or aborts, as Argo Rollouts pauses; Stalled once it held
// progressDeadlineSeconds) when inconclusive measurements exceed inconclusiveLimit.
type Measurement struct {
	// intervalSeconds is the time between two measurements, in seconds. Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	IntervalSeconds *int32 `json:"intervalSeconds,omitempty"`

	// count is how many measurements the check takes before it passes. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Count *int32 `json:"count,omitempty"`

	// initialDelaySeconds delays the first measurement after the check starts (the bake's start,
	// or the shard's pre-check), in seconds, so rates have data from the new revision. Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	InitialDelaySeconds *int32 `json:"initialDelaySeconds,omitempty"`

	// failureLimit is how many failed measurements are tolerated; one more fails the check.
	// Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	FailureLimit *int32 `json:"failureLimit,omitempty"`

	// inconclusiveLimit is how many inconclusive measurements (no data, NaN, neither condition
	// holds) are tolerated; one more makes the check Inconclusive. Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`

	// consecutiveErrorLimit is how many measurements in a row may end in an error (the server
	// unreachable, a timeout, a query that does not parse, a result of many series); one more
	// fails the check. Default 4.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`

	// minSuccessful is how many successful measurements a pass needs: no data, NaN and errors are
	// never a pass on their own, so a check that reached count with fewer successes goes on
	// measuring until it has them or a limit ends it (inconclusiveLimit holds the shard,
	// failureLimit and consecutiveErrorLimit fail it). At most count. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinSuccessful *int32 `json:"minSuccessful,omitempty"`

	// timeoutSeconds bounds one measurement (connect, request and response), in seconds; past
	// it the measurement is an error. Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=60
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// HTTPCheck is an HTTP GET the manager sends. In url and in header values, {{shard}},
// {{revision}}, {{stableRevision}}, {{namespace}}, {{name}} and {{schemaVersion}} are replaced by
// the shard's name, the update revision, the stable revision (status.stableRevision: the one the
// shards not yet promoted serve; "none" in a first rollout), the RoutingService's namespace and
// name, and spec.schema.version. A check at PodReady also has {{podIP}} and {{podName}}, the pod
// it is sent to, and {{revision}} is that pod's revision.
type HTTPCheck struct {
	// url is the http or https URL to GET.
	// +required
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="spec.strategy.checks[].http.url must start with http:// or https://"
	URL string `json:"url"`

	// headers are sent with the request; a Host header sets the request's host (how a router is
	// asked for one domain).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	Headers []HTTPHeader `json:"headers,omitempty"`

	// expectedStatus lists the status codes that pass. Default [200].
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	ExpectedStatus []int32 `json:"expectedStatus,omitempty"`

	// json is, when set, a condition that must also hold: the response body is JSON and the field it names equals a
	// value.
	// +optional
	JSON *JSONCondition `json:"json,omitempty"`

	// tls verifies an https server with a CA of your own and presents a client certificate.
	// +optional
	TLS *CheckTLS `json:"tls,omitempty"`
}

// HTTPHeader is one request header.
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="a header has value or valueFrom, not both"
type HTTPHeader struct {
	// name is the header's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`
	// value is the header's value (placeholders are replaced). Unset with valueFrom unset: an
	// empty value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
	// valueFrom reads the value from a Secret in the RoutingService's namespace instead, verbatim
	// (no placeholders; one trailing newline dropped), for a token or a tenant ID that must not sit
	// in the spec. The manager gets that one Secret by name, past its cache, when it measures
	// (docs/security.md); a Secret it cannot read makes the measurement an Error that names the
	// Secret and key, never the value.
	// +optional
	ValueFrom *HeaderValueSource `json:"valueFrom,omitempty"`
}

// HeaderValueSource says where a header's value comes from.
type HeaderValueSource struct {
	// secretKeyRef names the Secret and its key.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector is one key of a Secret in the RoutingService's own namespace (there is no
// namespace field: a check never reads another namespace's Secrets).
type SecretKeySelector struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key is the key in the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// CheckTLS is how an https check verifies its server and proves who the manager is. Unset: the
// system's root certificates, no client certificate.
type CheckTLS struct {
	// ca is a key of a Secret holding the PEM certificates of the authorities that may sign the
	// server's certificate (ca.crt of a cert-manager Certificate's Secret, for instance); they
	// replace the system's roots for this check.
	// +optional
	CA *SecretKeySelector `json:"ca,omitempty"`
	// clientCertificateSecretName names a Secret of type kubernetes.io/tls whose tls.crt and
	// tls.key the manager presents to servers that ask for a client certificate (mutual TLS).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ClientCertificateSecretName string `json:"clientCertificateSecretName,omitempty"`
	// serverName is the name the server's certificate must carry, when it is not the URL's host:
	// a check at PodReady addresses each pod by {{podIP}}, and the pods' certificate names the
	// Service.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
}

// JSONCondition is a condition on a JSON response body.
type JSONCondition struct {
	// path is a JSONPath expression in kubectl's syntax, for instance {.status} or
	// {.checks[0].ok}; it must name exactly one value.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Path string `json:"path"`
	// equals is the value the field must have, as text (true, 42, ok).
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Equals string `json:"equals"`
}

// PrometheusCheck is a PromQL instant query the manager runs. In query, {{shard}}, {{revision}},
// {{stableRevision}}, {{namespace}}, {{name}} and {{schemaVersion}} are replaced as in HTTPCheck,
// so a query can compare the update revision with the stable one (docs/pod-health.md).
type PrometheusCheck struct {
	// address is the Prometheus server's base URL, e.g. http://prometheus.monitoring:9090.
	// +required
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="spec.strategy.checks[].prometheus.address must start with http:// or https://"
	Address string `json:"address"`

	// query is the PromQL query. It must return one number: a scalar or a vector of one sample
	// (aggregate with sum() or max()); an empty vector or NaN is inconclusive (no data), a
	// vector of several samples is an error.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`

	// successCondition is a CEL expression over the double `result`, for instance
	// `result < 0.01` (compare with doubles: `result < 1` does not compile); the measurement
	// passes when it is true. One that does not compile, or does not yield a bool, is refused
	// before any shard starts (Stalled, reason InvalidCheck).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	SuccessCondition string `json:"successCondition"`

	// failureCondition is, when set, a CEL expression over `result` that fails the measurement;
	// a result for which neither condition holds is inconclusive. Unset: a result for which
	// successCondition is false fails. It is checked as successCondition is.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	FailureCondition string `json:"failureCondition,omitempty"`

	// scrapeIntervalSeconds is, when set, the scrape interval of the series the query reads, as
	// Prometheus is configured: a range in the query ([1m]) shorter than twice it holds fewer than
	// two samples, so rate() over it finds no data. schemagate then warns (a Warning Event
	// CheckWindowShort when the check starts, and kubectl schemagate plan) and measures anyway.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	ScrapeIntervalSeconds *int32 `json:"scrapeIntervalSeconds,omitempty"`

	// headers are sent with each query: Authorization (a bearer token from a Secret), or the
	// tenant header of a multi-tenant Prometheus (X-Scope-OrgID). A Host header is refused.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:XValidation:rule="self.all(h, h.name.lowerAscii() != 'host')",message="spec.strategy.checks[].prometheus.headers may not set Host"
	Headers []HTTPHeader `json:"headers,omitempty"`

	// tls verifies an https Prometheus with a CA of your own and presents a client certificate.
	// +optional
	TLS *CheckTLS `json:"tls,omitempty"`
}

// CheckWhen is a moment of a shard's step at which a check runs.
// +kubebuilder:validation:Enum=Bake;BeforeStart;PodReady
type CheckWhen string

const (
	// CheckWhenPodReady: on each pod once its containers are ready; the pod is Ready only once
	// it passed (a readiness gate).
	CheckWhenPodReady CheckWhen = "PodReady"
	// CheckWhenBake: during the shard's bake; the shard is promoted once it passed.
	CheckWhenBake CheckWhen = "Bake"
	// CheckWhenBeforeStart: before the shard starts promoting; it starts once it passed.
	CheckWhenBeforeStart CheckWhen = "BeforeStart"
)

// PodCheckGate is the readiness gate (a pod condition type) of the pods of a RoutingService with
// a check at PodReady: schemagate sets it True once the pod passed that check, and the kubelet
// reports the pod Ready only then.
const PodCheckGate corev1.PodConditionType = "schemagate.io/pod-check"

// PodReadyCheck returns the check that runs at PodReady (the CRD allows at most one), or nil.
func (s *RolloutStrategy) PodReadyCheck() *ShardCheck {
	for i := range s.Checks {
		if s.Checks[i].Runs(CheckWhenPodReady) {
			return &s.Checks[i]
		}
	}
	return nil
}

// Runs reports whether the check runs at w (an empty when means Bake).
func (c *ShardCheck) Runs(w CheckWhen) bool {
	if len(c.When) == 0 {
		return w == CheckWhenBake
	}
	for _, x := range c.When {
		if x == w {
			return true
		}
	}
	return false
}

// JobCheck is a check run as a Job.
type JobCheck struct {
	// template is the check Job's pod template. restartPolicy must be Never or OnFailure.
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.spec.restartPolicy) && self.spec.restartPolicy in ['Never', 'OnFailure']",message="spec.strategy.checks[].job.template.spec.restartPolicy must be Never or OnFailure",fieldPath=".spec.restartPolicy"
	// +kubebuilder:validation:XValidation:rule="size(self.spec.containers) > 0 && self.spec.containers.all(c, has(c.image) && c.image != '')",message="spec.strategy.checks[].job.template.spec.containers[].image must not be empty",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`

	// backoffLimit is the number of retries of the check pod before the check fails. Default 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// activeDeadlineSeconds bounds the check, in seconds from its Job's creation; past it (plus
	// 10 s) the check has failed. Default 300 s.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// CheckPhase is where a shard check is.
type CheckPhase string

const (
	// CheckPhaseRunning: the check's Job runs.
	CheckPhaseRunning CheckPhase = "Running"
	// CheckPhasePassed: the check's Job succeeded.
	CheckPhasePassed CheckPhase = "Passed"
	// CheckPhaseFailed: the check's Job failed or ran past its deadline.
	CheckPhaseFailed CheckPhase = "Failed"
	// CheckPhaseInconclusive: more measurements were inconclusive than inconclusiveLimit allows:
	// the shard holds until a person promotes (the check is set aside) or aborts; Stalled once
	// it held progressDeadlineSeconds.
	CheckPhaseInconclusive CheckPhase = "Inconclusive"
)

// ShardCheckStatus reports one check of a shard for status.shards[].stepRevision. It is computed
// from the check's Job on every reconcile, never trusted from the stored status.
type ShardCheckStatus struct {
	// name is the check's name.
	// +required
	Name string `json:"name"`
	// when is the moment it ran: Bake or BeforeStart.
	// +required
	When CheckWhen `json:"when"`
	// phase is Running, Passed or Failed.
	// +required
	Phase CheckPhase `json:"phase"`
	// job is the check's Job: one per attempt (its name ends in the attempt number, and its
	// label schemagate.io/check-attempt says it); a retry, or the revision applied again, runs a
	// new attempt.
	// +optional
	Job string `json:"job,omitempty"`
	// dryRun is true when the result is reported and never fails the shard.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// message says what the Job or the last measurement reported, for humans.
	// +optional
	Message string `json:"message,omitempty"`

	// revision is the update revision the check ran for; measurements of another revision are
	// not counted.
	// +optional
	Revision string `json:"revision,omitempty"`
	// startTime is when the check started (initialDelaySeconds counts from it).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// count is how many measurements were taken; successful, failed, inconclusive and errors
	// split it; consecutiveErrors is the number of errors since the last other result.
	// +optional
	Count int32 `json:"count,omitempty"`
	// successful is how many measurements met the success condition.
	// +optional
	Successful int32 `json:"successful,omitempty"`
	// failed is how many measurements met the failure condition, or failed the success one.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// inconclusive is how many measurements gave no data (an empty result, NaN) or met neither condition.
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
	// errors is how many measurements could not be taken (unreachable, a timeout, a bad answer).
	// +optional
	Errors int32 `json:"errors,omitempty"`
	// consecutiveErrors is the number of errors since the last measurement of another phase.
	// +optional
	ConsecutiveErrors int32 `json:"consecutiveErrors,omitempty"`
	// measurements are the last measurements, newest last (at most 10).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Measurements []MeasurementResult `json:"measurements,omitempty"`
}

// MeasurementPhase is the outcome of one measurement.
type MeasurementPhase string

const (
	// MeasurementSuccessful: the condition held.
	MeasurementSuccessful MeasurementPhase = "Successful"
	// MeasurementFailed: the condition did not hold (or failureCondition did).
	MeasurementFailed MeasurementPhase = "Failed"
	// MeasurementInconclusive: no data (an empty result, NaN), or neither condition held.
	MeasurementInconclusive MeasurementPhase = "Inconclusive"
	// MeasurementError: the measurement could not be taken (unreachable, timeout, bad query).
	MeasurementError MeasurementPhase = "Error"
)

// MeasurementResult is one measurement of an http or prometheus check.
type MeasurementResult struct {
	// time is when it was taken.
	// +required
	Time metav1.Time `json:"time"`
	// phase is Successful, Failed, Inconclusive or Error.
	// +required
	Phase MeasurementPhase `json:"phase"`
	// value is what was measured: the query's number, or the HTTP status code.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Value string `json:"value,omitempty"`
	// message explains an error or an inconclusive result, for humans.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SchemaStatus reports the schema gate.
type SchemaStatus struct {
	// requiredVersion is spec.schema.version as last observed.
	// +optional
	RequiredVersion string `json:"requiredVersion,omitempty"`

	// confirmedVersion is the schema version the database is confirmed to be at: from the latest
	// schema report of a migration or check Job this RoutingService owns (with evidence Report),
	// or from the success of its migration Jobs (JobSuccess). It is read back from those Jobs and
	// their pods on every reconcile, never trusted from this field, an annotation, or another
	// object, so a hand-edited status cannot open the gate.
	// +optional
	ConfirmedVersion string `json:"confirmedVersion,omitempty"`

	// confirmedBy is the Job whose report (or success) gives confirmedVersion.
	// +optional
	ConfirmedBy string `json:"confirmedBy,omitempty"`

	// reportedVersion is the version the latest schema report says the database is at, dirty or
	// not; empty when no report was read.
	// +optional
	ReportedVersion string `json:"reportedVersion,omitempty"`

	// reportedBy is the Job whose report gives reportedVersion, and the tool the report names,
	// as "<job> (<tool>)".
	// +optional
	ReportedBy string `json:"reportedBy,omitempty"`

	// checkJob is the name of the current (or last) check Job, when spec.schema.check is set.
	// +optional
	CheckJob string `json:"checkJob,omitempty"`

	// migrationJob is the name of the current (or last) migration Job.
	// +optional
	MigrationJob string `json:"migrationJob,omitempty"`

	// attempt is the attempt number of migrationJob for requiredVersion, from 1.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// startTime is when migrationJob was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when migrationJob succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// suspendedSince is when migrationJob was suspended by someone other than schemagate (a
	// queue such as Kueue holds it until capacity is free); unset while it is not suspended.
	// +optional
	SuspendedSince *metav1.Time `json:"suspendedSince,omitempty"`

	// cause is what the pods of migrationJob last said about why it is stuck or failed: a
	// container waiting (its reason and message), a container that exited non-zero (its exit
	// code and the tail of the tool's own error), a pod that cannot be scheduled. It is kept once
	// the pods are gone (the Job controller deletes them at the deadline), so the condition that
	// ends the attempt still names the cause. At most 1024 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Cause string `json:"cause,omitempty"`

	// phase is where the schema lifecycle stands: Expanding (the migration runs or waits),
	// RollingOut (shards are promoted), RollbackWindow (every shard is promoted; the contract
	// waits for the window, or for approval), Contracting (the contract Job runs), Complete.
	// +optional
	Phase SchemaPhase `json:"phase,omitempty"`

	// phaseSince is when phase last changed.
	// +optional
	PhaseSince *metav1.Time `json:"phaseSince,omitempty"`

	// revisions are the schema ranges of the revisions that serve a shard or that a rollback
	// would return to, newest first (at most 16).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Revisions []RevisionSchema `json:"revisions,omitempty"`

	// contract reports the contract migration, when spec.schema.contract is set.
	// +optional
	Contract *ContractStatus `json:"contract,omitempty"`

	// probe reports the migration probe of the required version (spec.schema.probe), read back
	// from its Job on every reconcile.
	// +optional
	Probe *ProbeStatus `json:"probe,omitempty"`
}

// ProbeStatus is what the migration probe of one version found.
type ProbeStatus struct {
	// job is the probe Job.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job,omitempty"`
	// from is the version the database was at, which the scratch copy starts from ("" for a
	// database with no schema yet).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	From string `json:"from,omitempty"`
	// to is the version the migration brings the scratch database to.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	To string `json:"to,omitempty"`
	// verdict is Running, Expand, Conditional, Breaking, Failed (the migration failed on the
	// scratch database) or Unavailable (the probe could not run).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Verdict string `json:"verdict,omitempty"`
	// changes are the changes the probe found, each with its class, at most 1024 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Changes string `json:"changes,omitempty"`
}

// SchemaPhase is a step of the schema lifecycle: expand, roll out, contract.
type SchemaPhase string

const (
	SchemaPhaseExpanding      SchemaPhase = "Expanding"
	SchemaPhaseRollingOut     SchemaPhase = "RollingOut"
	SchemaPhaseRollbackWindow SchemaPhase = "RollbackWindow"
	SchemaPhaseContracting    SchemaPhase = "Contracting"
	SchemaPhaseComplete       SchemaPhase = "Complete"
)

// RevisionSchema is the schema range one revision runs on.
type RevisionSchema struct {
	// revision is the revision's hash.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Revision string `json:"revision"`
	// min is the oldest schema version it runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Min string `json:"min,omitempty"`
	// max is the newest schema version it runs on; empty: no newest.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Max string `json:"max,omitempty"`
	// assumed is true when the revision declares no range: it is assumed to run on min and every
	// newer schema.
	// +optional
	Assumed bool `json:"assumed,omitempty"`
	// shards are the shards it serves, in spec order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Shards []string `json:"shards,omitempty"`
}

// ContractStatus reports the contract migration.
type ContractStatus struct {
	// version is spec.schema.contract.version as last observed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version,omitempty"`
	// job is the current (or last) contract Job.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Job string `json:"job,omitempty"`
	// attempt is job's attempt number, from 1.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// eligibleTime is the earliest time the contract may start: the rollback window's end.
	// +optional
	EligibleTime *metav1.Time `json:"eligibleTime,omitempty"`
	// startTime is when job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the database was confirmed at version after job.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// ShardStep is where a shard is in the promotion of the update revision.
type ShardStep string

const (
	// ShardStepPending: not started; the shard serves what it served.
	ShardStepPending ShardStep = "Pending"
	// ShardStepProgressing: the update revision's ReplicaSet is scaling up and old ones down.
	ShardStepProgressing ShardStep = "Progressing"
	// ShardStepBaking: fully promoted and available; waiting bakeSeconds before the next shard.
	ShardStepBaking ShardStep = "Baking"
	// ShardStepPromoted: the update revision serves the whole shard.
	ShardStepPromoted ShardStep = "Promoted"
	// ShardStepFailed: the step missed its progress deadline.
	ShardStepFailed ShardStep = "Failed"
	// ShardStepRollingBack: returning to the stable revision after a failure.
	ShardStepRollingBack ShardStep = "RollingBack"
	// ShardStepRolledBack: back on the stable revision after a failure.
	ShardStepRolledBack ShardStep = "RolledBack"
)

// ShardScalingStatus reports an autoscaled shard's size (spec.shards[].autoscaling).
type ShardScalingStatus struct {
	// routingShard is the name of the shard's RoutingShard, the autoscaler's scale target.
	// +required
	RoutingShard string `json:"routingShard"`
	// desiredReplicas is what the scaler asks for (the RoutingShard's spec.replicas); absent until
	// the RoutingShard exists.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
	// scaledBy names what set desiredReplicas last, as the API server recorded it (the field
	// manager of the RoutingShard's spec.replicas, e.g. "kube-controller-manager" for a
	// HorizontalPodAutoscaler), or "schemagate" while it is still the starting size.
	// +optional
	ScaledBy string `json:"scaledBy,omitempty"`
	// held says, when set, why the shard runs more than desiredReplicas: a scale-down waits until
	// the shard's promotion has baked.
	// +optional
	Held string `json:"held,omitempty"`
}

// ShardStatus reports one shard.
type ShardStatus struct {
	// name is the shard's name.
	// +required
	Name string `json:"name"`
	// revision is the revision serving the shard: the one with the most available replicas.
	// +optional
	Revision string `json:"revision,omitempty"`
	// replicas is the shard's desired replicas: spec.shards[].replicas, or, for an autoscaled
	// shard, what its scaler asks for (scaling), held at the size a promotion started with until
	// the shard has baked.
	// +required
	Replicas int32 `json:"replicas"`
	// scaling says who sets an autoscaled shard's size, and whether a promotion holds it.
	// +optional
	Scaling *ShardScalingStatus `json:"scaling,omitempty"`
	// updatedReplicas are pods of status.updateRevision (ReplicaSet status.replicas).
	// +required
	Updated int32 `json:"updatedReplicas"`
	// readyReplicas are ready pods of any revision in the shard.
	// +required
	Ready int32 `json:"readyReplicas"`
	// availableReplicas are available pods of any revision in the shard.
	// +required
	Available int32 `json:"availableReplicas"`
	// step is the shard's step in the promotion of status.updateRevision.
	// +required
	Step ShardStep `json:"step"`
	// stepRevision is the revision step refers to.
	// +optional
	StepRevision string `json:"stepRevision,omitempty"`
	// stepStartTime is when step began; the bake is measured from it.
	// +optional
	StepStartTime *metav1.Time `json:"stepStartTime,omitempty"`
	// progressStartTime is when the shard began progressing towards stepRevision; the progress
	// deadline is measured from it. A shard that stops being fully available while it bakes goes
	// back to Progressing without a fresh deadline, so a revision that flaps (ready, then crashing
	// under load) still fails within its progress deadline.
	// +optional
	ProgressStartTime *metav1.Time `json:"progressStartTime,omitempty"`
	// cluster reports the shard's cluster (spec.shards[].cluster), when it has one.
	// +optional
	Cluster *ShardClusterStatus `json:"cluster,omitempty"`
	// checks report spec.strategy.checks for this shard and stepRevision, once they ran: one entry
	// per check and moment (when).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +listMapKey=when
	Checks []ShardCheckStatus `json:"checks,omitempty"`
}

// ClusterState is how a shard's cluster answers.
type ClusterState string

const (
	// ClusterReachable: the spoke answered within the probe timeout and its cache is in sync.
	ClusterReachable ClusterState = "Reachable"
	// ClusterConnecting: the spoke's client is being set up or its cache is not yet in sync.
	ClusterConnecting ClusterState = "Connecting"
	// ClusterUnreachable: the spoke did not answer (partition, API server down).
	ClusterUnreachable ClusterState = "Unreachable"
	// ClusterCredentialsRefused: the spoke answered 401 or 403, or its Secret is missing or holds
	// no usable credentials.
	ClusterCredentialsRefused ClusterState = "CredentialsRefused"
	// ClusterManagedElsewhere: the spoke's anchor names another hub; nothing is written there
	// until a person asks for a takeover (schemagate.io/takeover).
	ClusterManagedElsewhere ClusterState = "ManagedElsewhere"
)

// ShardClusterStatus reports the cluster a shard runs in. While state is not Reachable the
// shard's step, counts and revision stay as they were last seen, and nothing in it is counted
// anew, rolled, rolled back or scaled.
type ShardClusterStatus struct {
	// name is spec.shards[].cluster.name.
	// +required
	Name string `json:"name"`
	// state is Reachable, Connecting, Unreachable, CredentialsRefused or ManagedElsewhere.
	// +required
	State ClusterState `json:"state"`
	// message says why, naming the Secret or the error.
	// +optional
	Message string `json:"message,omitempty"`
	// lastContactTime is when the spoke last answered schemagate.
	// +optional
	LastContactTime *metav1.Time `json:"lastContactTime,omitempty"`
	// unreachableSince is when the state stopped being Reachable; unset while Reachable.
	// +optional
	UnreachableSince *metav1.Time `json:"unreachableSince,omitempty"`
}

// Condition types of a RoutingService. Ready, Reconciling and Stalled follow the kstatus
// conventions that Flux, Helm and kubectl wait read; SchemaReady and Available are domain conditions.
const (
	// ConditionReady is True when the spec's generation is fully promoted in every shard and available.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller works towards the spec (migrating, promoting).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a human: migration failed, progress deadline exceeded.
	ConditionStalled = "Stalled"
	// ConditionSchemaReady is True when the required schema version is confirmed (spec.schema.evidence).
	ConditionSchemaReady = "SchemaReady"
	// ConditionAvailable is True when every shard has at least replicas - maxUnavailable available pods.
	ConditionAvailable = "Available"
	// ConditionRollbackSafe is True while every revision a rollback would return to runs on the
	// database's reported version; False once the last safe rollback point has passed (a
	// contract ran, the database is ahead), with the versions in its message.
	ConditionRollbackSafe = "RollbackSafe"
	// ConditionContractReady is set when spec.schema.contract is set: False with the reason the
	// contract waits for (WaitingForShards, OlderPodsRemain, RollbackWindow, Paused,
	// MigrationRunning, AwaitingApproval, in that order), ContractFailed or InvalidCheck (the spec
	// cannot roll out, so no contract Job starts), True once it may run
	// (ReadyToRun), runs (Contracting) or has run (ContractComplete).
	ConditionContractReady = "ContractReady"
	// ConditionClustersReachable is set when a shard names a cluster: True while every shard's
	// cluster answers; False with the reason of the first that does not (ClusterUnreachable,
	// CredentialsRefused, ClusterConnecting, ManagedByAnotherHub), naming it.
	ConditionClustersReachable = "ClustersReachable"
)

// Condition reasons. Each is a CamelCase constant, as Kubernetes conventions ask.
const (
	ReasonRolloutComplete            = "RolloutComplete"
	ReasonMigrating                  = "Migrating"
	ReasonMigrationPending           = "MigrationPending"
	ReasonMigrationFailed            = "MigrationFailed"
	ReasonMigrationDeadline          = "MigrationDeadlineExceeded"
	ReasonSchemaConfirmed            = "SchemaConfirmed"
	ReasonShardProgressing           = "ShardProgressing"
	ReasonShardBaking                = "ShardBaking"
	ReasonProgressDeadlineExceeded   = "ProgressDeadlineExceeded"
	ReasonRollingBack                = "RollingBack"
	ReasonPaused                     = "Paused"
	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	ReasonWaitingForSchema           = "WaitingForSchema"
	ReasonAborted                    = "Aborted"
)

// RolloutFailure records why a revision's rollout stopped.
type RolloutFailure struct {
	// revision is the revision that failed.
	// +required
	Revision string `json:"revision"`
	// reason is ProgressDeadlineExceeded or Aborted.
	// +required
	Reason string `json:"reason"`
	// message says what happened, for humans.
	// +required
	Message string `json:"message"`
	// shard is the shard whose step failed, if any.
	// +optional
	Shard string `json:"shard,omitempty"`
	// time is when the rollout failed.
	// +required
	Time metav1.Time `json:"time"`
}

// AnnotationAbort, set to any new value (kubectl annotate --overwrite rsvc/NAME
// schemagate.io/abort=$(date +%s)), aborts the rollout in progress: the update revision is treated
// as failed and rolled back to the stable revision, whatever failurePolicy says. With nothing in
// progress it changes nothing. It is an annotation, not a spec field, so Argo CD
// and Flux self-heal leave it alone, and the controller never clears it: it records the value it
// handled in status.lastHandledAbort and on the RoutingService's ReplicaSets
// (schemagate.io/handled-abort), so a lost or restored status never makes it act again.
const AnnotationAbort = "schemagate.io/abort"

// AnnotationRetry, set to any new value, retries what failed: a failed (or timed-out) migration
// runs again as a new Job, attempt n+1 (the failed Job is kept for its logs),
// or a revision whose shard missed its progress deadline is tried again from that shard; an
// aborted rollout resumes from the first shard it has not promoted. With nothing failed it changes
// nothing. Handled once per value (status.lastHandledRetry, and on the ReplicaSets:
// schemagate.io/handled-retry).
const AnnotationRetry = "schemagate.io/retry"

// AnnotationPromote, set to any new value, ends the current shard's bake now, so the next shard
// starts. With no shard baking it changes nothing; it acts on the shard baking when it is read,
// never on the next one. Handled once per value (status.lastHandledPromote, and on the
// ReplicaSets: schemagate.io/handled-promote).
const AnnotationPromote = "schemagate.io/promote"

// AnnotationApproveContract, set to any new value, approves the contract migration of a
// RoutingService whose spec.schema.contract.requireApproval is true; it acts once every other
// rule of the contract holds. Handled once per value (schemagate.io/handled-approve-contract on
// the ReplicaSets).
const AnnotationApproveContract = "schemagate.io/approve-contract"

// AnnotationTakeover, set to the identity of another hub (as a spoke's anchor records it, and
// status.shards[].cluster.message shows), lets this hub take over the spokes that hub managed:
// the disaster-recovery case of a second hub. Without it a hub never writes a spoke another hub
// manages.
const AnnotationTakeover = "schemagate.io/takeover"

// AnnotationAllowInsecureTLS, set to "true" on a cluster Secret (spec.shards[].cluster), lets
// schemagate use credentials that skip verifying the cluster's server certificate (a kubeconfig's
// insecure-skip-tls-verify, an Argo CD Secret's tlsClientConfig.insecure): its token then goes to
// a server nobody verified. Without it such a Secret is refused (CredentialsRefused); with it
// ClustersReachable says which cluster is not verified.
const AnnotationAllowInsecureTLS = "schemagate.io/allow-insecure-tls"

// AnnotationClustersUsed is written by schemagate: the clusters (and namespaces there) the
// RoutingService's shards have run in, so that a shard removed from spec.shards, or moved to
// another cluster, is cleaned up where it ran once the rollout is complete everywhere else
// (docs/clusters.md). It is read as untrusted input: bounded, and an entry that does not parse
// is ignored.
const AnnotationClustersUsed = "schemagate.io/clusters-used"

// FinalizerClusters is set on a RoutingService with a shard in another cluster: its deletion
// removes the spokes' ReplicaSets (through their anchors) where the spokes can be reached, and
// reports the rest; it never holds the deletion longer than the manager's --spoke-cleanup-timeout.
const FinalizerClusters = "schemagate.io/clusters"

// RoutingServiceStatus is the observed state of a RoutingService.
type RoutingServiceStatus struct {
	// observedGeneration is the metadata.generation this status was computed for. It defaults to 0
	// (the API server fills it in before schemagate has written any status), so tools that read
	// kstatus (Flux, Helm 4) see a new RoutingService as InProgress, not Current.
	// +optional
	// +kubebuilder:default=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// stableRevision is the last revision fully promoted in every shard: the last-known-good that
	// a rollback returns to.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`

	// updateRevision is the revision of the current spec (a hash of the template, the schema
	// version and the shards' nodeSelectors).
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`

	// failure describes the failed or aborted rollout of updateRevision, if any. A failed revision
	// is not tried again until the spec changes.
	// +optional
	Failure *RolloutFailure `json:"failure,omitempty"`

	// lastHandledAbort is the value of the schemagate.io/abort annotation last acted on, so an
	// abort is carried out once however often it is read.
	// +optional
	LastHandledAbort string `json:"lastHandledAbort,omitempty"`

	// lastHandledRetry is the value of the schemagate.io/retry annotation last acted on.
	// +optional
	LastHandledRetry string `json:"lastHandledRetry,omitempty"`

	// lastHandledPromote is the value of the schemagate.io/promote annotation last acted on.
	// +optional
	LastHandledPromote string `json:"lastHandledPromote,omitempty"`

	// schema reports the schema gate.
	// +optional
	Schema SchemaStatus `json:"schema,omitempty"`

	// shards reports each shard, in spec order.
	// +optional
	// +listType=map
	// +listMapKey=name
	Shards []ShardStatus `json:"shards,omitempty"`

	// promotedShards is "<promoted>/<total>" for the update revision, for printer columns.
	// +optional
	PromotedShards string `json:"promotedShards,omitempty"`

	// conditions are Ready, Reconciling, Stalled, SchemaReady, Available and RollbackSafe (and
	// ContractReady with spec.schema.contract), each with the generation it describes in
	// observedGeneration.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RoutingService runs a routing binary in region shards, migrating its database schema first and
// promoting each new revision one shard at a time.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rsvc,categories=schemagate
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Confirmed",type=string,JSONPath=`.status.schema.confirmedVersion`,description="Schema version the database is confirmed to be at"
// +kubebuilder:printcolumn:name="Required",type=string,JSONPath=`.spec.schema.version`,description="Schema version the spec's revision needs"
// +kubebuilder:printcolumn:name="Shards",type=string,JSONPath=`.status.promotedShards`,description="Shards promoted/total"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Stalled",type=string,JSONPath=`.status.conditions[?(@.type=="Stalled")].status`,priority=1,description="Stalled: a person is needed"
// +kubebuilder:printcolumn:name="Update",type=string,JSONPath=`.status.updateRevision`,priority=1,description="Revision of the current spec"
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stableRevision`,priority=1,description="Last revision promoted in every shard"
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.schema.phase`,priority=1,description="Schema lifecycle phase: Expanding, RollingOut, RollbackWindow, Contracting, Complete"
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.spec.schema.runWithShard) ? oldSelf.spec.schema.runWithShard : '-') == (has(self.spec.schema.runWithShard) ? self.spec.schema.runWithShard : '-') || !has(oldSelf.status) || !has(oldSelf.status.schema) || ((!has(oldSelf.status.schema.migrationJob) || has(oldSelf.status.schema.completionTime)) && (!has(oldSelf.status.schema.contract) || !has(oldSelf.status.schema.contract.job) || has(oldSelf.status.schema.contract.completionTime)))",message="spec.schema.runWithShard, and the cluster of the shard it names, cannot change while a migration or contract Job runs (status.schema.migrationJob or status.schema.contract.job has no completionTime): a check or a retry in the new place would run beside it; change it once that Job has finished",fieldPath=".spec.schema.runWithShard"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.schema.runWithShard) || (oldSelf.spec.shards.filter(s, s.name == self.spec.schema.runWithShard).map(s, has(s.cluster) ? s.cluster.name : '-') == self.spec.shards.filter(s, s.name == self.spec.schema.runWithShard).map(s, has(s.cluster) ? s.cluster.name : '-') && oldSelf.spec.shards.filter(s, s.name == self.spec.schema.runWithShard).map(s, has(s.cluster) && has(s.cluster.namespace) ? s.cluster.namespace : '-') == self.spec.shards.filter(s, s.name == self.spec.schema.runWithShard).map(s, has(s.cluster) && has(s.cluster.namespace) ? s.cluster.namespace : '-')) || !has(oldSelf.status) || !has(oldSelf.status.schema) || ((!has(oldSelf.status.schema.migrationJob) || has(oldSelf.status.schema.completionTime)) && (!has(oldSelf.status.schema.contract) || !has(oldSelf.status.schema.contract.job) || has(oldSelf.status.schema.contract.completionTime)))",message="spec.schema.runWithShard, and the cluster of the shard it names, cannot change while a migration or contract Job runs (status.schema.migrationJob or status.schema.contract.job has no completionTime): a check or a retry in the new place would run beside it; change it once that Job has finished",fieldPath=".spec.schema.runWithShard"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="metadata.name must be at most 40 characters (it prefixes ReplicaSet and Job names)"
type RoutingService struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata; metadata.name is at most 40 characters.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec RoutingServiceSpec `json:"spec"`
	// status is the observed state, written by the controller.
	// +optional
	// +kubebuilder:default={}
	Status RoutingServiceStatus `json:"status,omitempty"`
}

// RoutingServiceList is a list of RoutingService.
// +kubebuilder:object:root=true
type RoutingServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RoutingService `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RoutingService{}, &RoutingServiceList{})
}
