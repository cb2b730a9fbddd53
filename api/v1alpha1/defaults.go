package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Defaults of the optional spec fields. These constants are the one definition of each default in
// Go; the +kubebuilder:default markers in routingservice_types.go must state the same values
// (TestCRDDefaultsMatchGoConstants checks the generated CRD against them). The API server applies
// the CRD defaults on create and update, so a stored RoutingService has every field set; the
// accessors below apply the same defaults to objects that never went through the API server
// (objects built in Go, unit-test fixtures).
// Defaults of spec.schema.probe (the CRD's defaults say the same; TestCRDDefaultsMatchGoConstants).
const (
	DefaultProbeMode                  = ProbeModeEnforce
	DefaultProbeOnFailure             = ProbeFailureProceed
	DefaultProbeDatabaseEnv           = "DATABASE_URL"
	DefaultProbeActiveDeadlineSeconds = int64(300)
)

const (
	// DefaultMaxSurge is spec.strategy.maxSurge's default: a percentage of the shard's replicas.
	DefaultMaxSurge = "25%"
	// DefaultMaxUnavailable is spec.strategy.maxUnavailable's default, in pods.
	DefaultMaxUnavailable int32 = 0
	// DefaultMinReadySeconds is spec.strategy.minReadySeconds's default, in seconds.
	DefaultMinReadySeconds int32 = 0
	// DefaultBakeSeconds is spec.strategy.bakeSeconds's default, in seconds.
	DefaultBakeSeconds int32 = 60
	// DefaultProgressDeadlineSeconds is spec.strategy.progressDeadlineSeconds's default, in seconds.
	DefaultProgressDeadlineSeconds int32 = 600
	// DefaultFailurePolicy is spec.strategy.failurePolicy's default.
	DefaultFailurePolicy = FailurePolicyRollback
	// DefaultUnreachablePolicy is spec.strategy.unreachablePolicy's default.
	DefaultUnreachablePolicy = UnreachableHold
	// DefaultUnreachableDeadlineSeconds is spec.strategy.unreachableDeadlineSeconds's default, in
	// seconds.
	DefaultUnreachableDeadlineSeconds int32 = 600
	// DefaultPodHealthMode is spec.strategy.podHealth.mode's default: the gate is on.
	DefaultPodHealthMode = PodHealthEnforce
	// DefaultPodHealthMaxRestarts is spec.strategy.podHealth.maxRestarts's default, in restarts of
	// one container: any restart fails the shard.
	DefaultPodHealthMaxRestarts int32 = 0
	// DefaultClusterSecretKey is the data key of a Cluster API kubeconfig Secret
	// (<cluster>-kubeconfig), spec.shards[].cluster.secretRef.key's default.
	DefaultClusterSecretKey = "value"
	// DefaultRevisionHistoryLimit is spec.strategy.revisionHistoryLimit's default, in ReplicaSets
	// per shard.
	DefaultRevisionHistoryLimit int32 = 2
	// DefaultJobHistoryLimit is spec.strategy.jobHistoryLimit's default, in finished Jobs of each
	// kind (migration, schema check, shard check).
	DefaultJobHistoryLimit int32 = 3
	// DefaultDisruptionBudgetEnabled is spec.disruptionBudget.enabled's default: every shard gets
	// a PodDisruptionBudget.
	DefaultDisruptionBudgetEnabled = true
	// MinDisruptionBudgetMaxUnavailable is the floor of the maxUnavailable schemagate derives for a
	// shard's PodDisruptionBudget when spec.disruptionBudget.maxUnavailable is omitted, in pods:
	// a budget allowing 0 disruptions blocks every node drain.
	MinDisruptionBudgetMaxUnavailable int32 = 1
	// DefaultMigrationBackoffLimit is spec.schema.migration.backoffLimit's default, in retries.
	DefaultMigrationBackoffLimit int32 = 2
	// DefaultMigrationActiveDeadlineSeconds is spec.schema.migration.activeDeadlineSeconds's
	// default, in seconds.
	DefaultMigrationActiveDeadlineSeconds int64 = 600
	// DefaultContractRollbackWindowSeconds is spec.schema.contract.rollbackWindowSeconds's
	// default, in seconds: ten minutes after the last shard was promoted, a rollback to the older
	// revision stays possible.
	DefaultContractRollbackWindowSeconds int32 = 600
	// DefaultJobCheckBackoffLimit is spec.strategy.checks[].job.backoffLimit's default, in retries.
	DefaultJobCheckBackoffLimit int32 = 0
	// DefaultJobCheckActiveDeadlineSeconds is spec.strategy.checks[].job.activeDeadlineSeconds's
	// default, in seconds.
	DefaultJobCheckActiveDeadlineSeconds int64 = 300
	// DefaultCheckWhen is spec.strategy.checks[].when's default: during the bake.
	DefaultCheckWhen = CheckWhenBake
	// DefaultSchemaEvidence is spec.schema.evidence's default.
	DefaultSchemaEvidence = SchemaEvidenceReport
	// DefaultCheckBackoffLimit is spec.schema.check.backoffLimit's default, in retries.
	DefaultCheckBackoffLimit int32 = 1
	// DefaultCheckActiveDeadlineSeconds is spec.schema.check.activeDeadlineSeconds's default, in
	// seconds.
	DefaultCheckActiveDeadlineSeconds int64 = 120
)

// MaxSurgeOrDefault returns maxSurge, or DefaultMaxSurge (25%) when it is not set.
func (s *RolloutStrategy) MaxSurgeOrDefault() intstr.IntOrString {
	return ptr.Deref(s.MaxSurge, intstr.FromString(DefaultMaxSurge))
}

// MaxUnavailableOrDefault returns maxUnavailable, or DefaultMaxUnavailable (0) when it is not set.
func (s *RolloutStrategy) MaxUnavailableOrDefault() intstr.IntOrString {
	return ptr.Deref(s.MaxUnavailable, intstr.FromInt32(DefaultMaxUnavailable))
}

// MinReadySecondsOrDefault returns minReadySeconds, or DefaultMinReadySeconds (0) when it is not set.
func (s *RolloutStrategy) MinReadySecondsOrDefault() int32 {
	return ptr.Deref(s.MinReadySeconds, DefaultMinReadySeconds)
}

// BakeSecondsOrDefault returns bakeSeconds, or DefaultBakeSeconds (60) when it is not set.
func (s *RolloutStrategy) BakeSecondsOrDefault() int32 {
	return ptr.Deref(s.BakeSeconds, DefaultBakeSeconds)
}

// Bake returns bakeSeconds (default 60 s) as a duration.
func (s *RolloutStrategy) Bake() time.Duration {
	return time.Duration(s.BakeSecondsOrDefault()) * time.Second
}

// ProgressDeadlineSecondsOrDefault returns progressDeadlineSeconds, or
// DefaultProgressDeadlineSeconds (600) when it is not set.
func (s *RolloutStrategy) ProgressDeadlineSecondsOrDefault() int32 {
	return ptr.Deref(s.ProgressDeadlineSeconds, DefaultProgressDeadlineSeconds)
}

// ProgressDeadline returns progressDeadlineSeconds (default 600 s) as a duration.
func (s *RolloutStrategy) ProgressDeadline() time.Duration {
	return time.Duration(s.ProgressDeadlineSecondsOrDefault()) * time.Second
}

// FailurePolicyOrDefault returns failurePolicy, or DefaultFailurePolicy (Rollback) when it is empty.
func (s *RolloutStrategy) FailurePolicyOrDefault() FailurePolicy {
	if s.FailurePolicy == "" {
		return DefaultFailurePolicy
	}
	return s.FailurePolicy
}

// RevisionHistoryLimitOrDefault returns revisionHistoryLimit, or DefaultRevisionHistoryLimit (2)
// when it is not set.
func (s *RolloutStrategy) RevisionHistoryLimitOrDefault() int32 {
	return ptr.Deref(s.RevisionHistoryLimit, DefaultRevisionHistoryLimit)
}

// JobHistoryLimitOrDefault returns jobHistoryLimit, or DefaultJobHistoryLimit (3) when it is not
// set, and at least 1 whatever is stored (the CRD's minimum).
func (s *RolloutStrategy) JobHistoryLimitOrDefault() int32 {
	return max(1, ptr.Deref(s.JobHistoryLimit, DefaultJobHistoryLimit))
}

// EnabledOrDefault returns enabled, or DefaultDisruptionBudgetEnabled (true) when it is not set.
func (d *DisruptionBudgetSpec) EnabledOrDefault() bool {
	return ptr.Deref(d.Enabled, DefaultDisruptionBudgetEnabled)
}

// BackoffLimitOrDefault returns backoffLimit, or DefaultMigrationBackoffLimit (2) when it is not set.
func (m *MigrationSpec) BackoffLimitOrDefault() int32 {
	return ptr.Deref(m.BackoffLimit, DefaultMigrationBackoffLimit)
}

// ActiveDeadlineSecondsOrDefault returns activeDeadlineSeconds, or
// DefaultMigrationActiveDeadlineSeconds (600) when it is not set.
func (m *MigrationSpec) ActiveDeadlineSecondsOrDefault() int64 {
	return ptr.Deref(m.ActiveDeadlineSeconds, DefaultMigrationActiveDeadlineSeconds)
}

// ModeOrDefault returns mode, or Enforce when probe or its mode is not set.
func (p *ProbeSpec) ModeOrDefault() ProbeMode {
	if p == nil || p.Mode == "" {
		return DefaultProbeMode
	}
	return p.Mode
}

// OnFailureOrDefault returns onFailure, or Proceed when probe or its onFailure is not set.
func (p *ProbeSpec) OnFailureOrDefault() ProbeFailurePolicy {
	if p == nil || p.OnFailure == "" {
		return DefaultProbeOnFailure
	}
	return p.OnFailure
}

// DatabaseEnvOrDefault returns databaseEnv, or DATABASE_URL when it is not set.
func (p *ProbeSpec) DatabaseEnvOrDefault() string {
	if p == nil || p.DatabaseEnv == "" {
		return DefaultProbeDatabaseEnv
	}
	return p.DatabaseEnv
}

// ActiveDeadlineSecondsOrDefault returns activeDeadlineSeconds, or 300 when it is not set.
func (p *ProbeSpec) ActiveDeadlineSecondsOrDefault() int64 {
	if p == nil || p.ActiveDeadlineSeconds == nil {
		return DefaultProbeActiveDeadlineSeconds
	}
	return *p.ActiveDeadlineSeconds
}

// EvidenceOrDefault returns evidence, or DefaultSchemaEvidence (Report) when it is empty.
func (s *SchemaSpec) EvidenceOrDefault() SchemaEvidence {
	if s.Evidence == "" {
		return DefaultSchemaEvidence
	}
	return s.Evidence
}

// BackoffLimitOrDefault returns backoffLimit, or DefaultCheckBackoffLimit (1) when it is not set.
func (c *SchemaCheckSpec) BackoffLimitOrDefault() int32 {
	return ptr.Deref(c.BackoffLimit, DefaultCheckBackoffLimit)
}

// ActiveDeadlineSecondsOrDefault returns activeDeadlineSeconds, or
// DefaultCheckActiveDeadlineSeconds (120) when it is not set.
func (c *SchemaCheckSpec) ActiveDeadlineSecondsOrDefault() int64 {
	return ptr.Deref(c.ActiveDeadlineSeconds, DefaultCheckActiveDeadlineSeconds)
}

// BackoffLimitOrDefault returns backoffLimit, or DefaultJobCheckBackoffLimit (0) when it is not set.
func (c *JobCheck) BackoffLimitOrDefault() int32 {
	return ptr.Deref(c.BackoffLimit, DefaultJobCheckBackoffLimit)
}

// ActiveDeadlineSecondsOrDefault returns activeDeadlineSeconds, or
// DefaultJobCheckActiveDeadlineSeconds (300) when it is not set.
func (c *JobCheck) ActiveDeadlineSecondsOrDefault() int64 {
	return ptr.Deref(c.ActiveDeadlineSeconds, DefaultJobCheckActiveDeadlineSeconds)
}

// Defaults of an http or prometheus check's measurement (spec.strategy.checks[]).
const (
	// DefaultMeasurementIntervalSeconds is intervalSeconds' default, in seconds.
	DefaultMeasurementIntervalSeconds int32 = 10
	// DefaultMeasurementCount is count's default, in measurements.
	DefaultMeasurementCount int32 = 1
	// DefaultMeasurementInitialDelaySeconds is initialDelaySeconds' default, in seconds.
	DefaultMeasurementInitialDelaySeconds int32 = 0
	// DefaultFailureLimit is failureLimit's default, in failed measurements.
	DefaultFailureLimit int32 = 0
	// DefaultInconclusiveLimit is inconclusiveLimit's default, in inconclusive measurements.
	DefaultInconclusiveLimit int32 = 0
	// DefaultMinSuccessful is minSuccessful's default, in successful measurements: no data is
	// never a pass.
	DefaultMinSuccessful int32 = 1
	// DefaultConsecutiveErrorLimit is consecutiveErrorLimit's default (Argo Rollouts' too).
	DefaultConsecutiveErrorLimit int32 = 4
	// DefaultMeasurementTimeoutSeconds is timeoutSeconds' default, in seconds.
	DefaultMeasurementTimeoutSeconds int32 = 10
	// MaxMeasurementTimeoutSeconds bounds timeoutSeconds whatever is stored, in seconds.
	MaxMeasurementTimeoutSeconds int32 = 60
	// MaxMeasurementsKept is how many measurements status.shards[].checks[] keeps.
	MaxMeasurementsKept = 10
)

// The getters below return the field or its default, clamped to the CRD's bounds: a stored object
// that escaped validation (written before a bound existed, restored from a backup) cannot make
// the planner measure in a loop or never.

// Interval returns intervalSeconds (default 10, at least 1) as a duration.
func (m *Measurement) Interval() time.Duration {
	return time.Duration(max(1, ptr.Deref(m.IntervalSeconds, DefaultMeasurementIntervalSeconds))) * time.Second
}

// CountOrDefault returns count (default 1, at least 1).
func (m *Measurement) CountOrDefault() int32 {
	return max(1, ptr.Deref(m.Count, DefaultMeasurementCount))
}

// InitialDelay returns initialDelaySeconds (default 0, at least 0) as a duration.
func (m *Measurement) InitialDelay() time.Duration {
	return time.Duration(max(0, ptr.Deref(m.InitialDelaySeconds, DefaultMeasurementInitialDelaySeconds))) * time.Second
}

// FailureLimitOrDefault returns failureLimit (default 0, at least 0).
func (m *Measurement) FailureLimitOrDefault() int32 {
	return max(0, ptr.Deref(m.FailureLimit, DefaultFailureLimit))
}

// InconclusiveLimitOrDefault returns inconclusiveLimit (default 0, at least 0).
func (m *Measurement) InconclusiveLimitOrDefault() int32 {
	return max(0, ptr.Deref(m.InconclusiveLimit, DefaultInconclusiveLimit))
}

// MinSuccessfulOrDefault returns minSuccessful (default 1), at least 1 and at most count.
func (m *Measurement) MinSuccessfulOrDefault() int32 {
	return min(max(1, ptr.Deref(m.MinSuccessful, DefaultMinSuccessful)), m.CountOrDefault())
}

// ConsecutiveErrorLimitOrDefault returns consecutiveErrorLimit (default 4, at least 0).
func (m *Measurement) ConsecutiveErrorLimitOrDefault() int32 {
	return max(0, ptr.Deref(m.ConsecutiveErrorLimit, DefaultConsecutiveErrorLimit))
}

// Timeout returns timeoutSeconds (default 10) clamped to [1, 60] seconds, as a duration.
func (m *Measurement) Timeout() time.Duration {
	return time.Duration(min(MaxMeasurementTimeoutSeconds, max(1, ptr.Deref(m.TimeoutSeconds, DefaultMeasurementTimeoutSeconds)))) * time.Second
}

// Measured reports whether the check is measured by the manager (http or prometheus) rather than
// run as a Job.
func (c *ShardCheck) Measured() bool { return c.Job == nil && (c.HTTP != nil || c.Prometheus != nil) }

// UnreachablePolicyOrDefault returns unreachablePolicy, or DefaultUnreachablePolicy (Hold).
func (s *RolloutStrategy) UnreachablePolicyOrDefault() UnreachablePolicy {
	if s.UnreachablePolicy == "" {
		return DefaultUnreachablePolicy
	}
	return s.UnreachablePolicy
}

// PodHealthEnforced reports whether the pod-health gate is on: podHealth.mode is not Off (an
// unset podHealth or mode is DefaultPodHealthMode, Enforce).
func (s *RolloutStrategy) PodHealthEnforced() bool {
	return s.PodHealth == nil || s.PodHealth.Mode != PodHealthOff
}

// MaxRestartsOrDefault returns podHealth.maxRestarts, or DefaultPodHealthMaxRestarts (0); a
// negative stored value (the CRD's minimum is 0) reads as 0.
func (s *RolloutStrategy) MaxRestartsOrDefault() int32 {
	if s.PodHealth == nil {
		return DefaultPodHealthMaxRestarts
	}
	return max(0, ptr.Deref(s.PodHealth.MaxRestarts, DefaultPodHealthMaxRestarts))
}

// UnreachableDeadline returns unreachableDeadlineSeconds (default 600 s) as a duration.
func (s *RolloutStrategy) UnreachableDeadline() time.Duration {
	return time.Duration(ptr.Deref(s.UnreachableDeadlineSeconds, DefaultUnreachableDeadlineSeconds)) * time.Second
}

// SecretName returns the name of the Secret holding the cluster's credentials: secretRef.name,
// or Cluster API's <name>-kubeconfig.
func (c *ShardCluster) SecretName() string {
	if c.SecretRef != nil && c.SecretRef.Name != "" {
		return c.SecretRef.Name
	}
	return c.Name + "-kubeconfig"
}

// SecretFormat returns secretRef.format, or Kubeconfig.
func (c *ShardCluster) SecretFormat() ClusterSecretFormat {
	if c.SecretRef != nil && c.SecretRef.Format != "" {
		return c.SecretRef.Format
	}
	return ClusterSecretKubeconfig
}

// SecretKey returns secretRef.key, or DefaultClusterSecretKey ("value").
func (c *ShardCluster) SecretKey() string {
	if c.SecretRef != nil && c.SecretRef.Key != "" {
		return c.SecretRef.Key
	}
	return DefaultClusterSecretKey
}

// NamespaceOr returns namespace, or def (the RoutingService's namespace) when it is unset.
func (c *ShardCluster) NamespaceOr(def string) string {
	if c.Namespace != "" {
		return c.Namespace
	}
	return def
}
