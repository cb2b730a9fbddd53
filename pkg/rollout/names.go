package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/rand"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Labels schemagate puts on the ReplicaSets, Jobs and pod templates it creates. The manager's
// cache selects on LabelManagedBy, so its memory grows with schemagate's objects only.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByValue     = "schemagate"
	LabelComponent     = "app.kubernetes.io/component"
	ComponentRouting   = "routing"
	ComponentMigration = "migration"
	// ComponentCheck labels check Jobs and their pods (spec.schema.check).
	ComponentCheck = "check"
	// ComponentShardCheck labels the Jobs of spec.strategy.checks and their pods.
	ComponentShardCheck = "shard-check"
	// LabelCheck is the name of the shard check a Job runs; LabelCheckWhen, when it runs (Bake,
	// BeforeStart).
	LabelCheck     = "schemagate.io/check"
	LabelCheckWhen = "schemagate.io/check-when"
	// LabelCheckAttempt is the attempt of a shard check's Job: 1 for the first run of a check in
	// a shard on a revision, one more for each retry or later return of that revision.
	LabelCheckAttempt  = "schemagate.io/check-attempt"
	LabelName          = "schemagate.io/name"
	LabelShard         = "schemagate.io/shard"
	LabelRevision      = "schemagate.io/revision"
	LabelSchemaVersion = "schemagate.io/schema-version"
	LabelAttempt       = "schemagate.io/migration-attempt"

	// EnvSchemaVersion is set in every migration container to spec.schema.version.
	EnvSchemaVersion = "SCHEMAGATE_SCHEMA_VERSION"
)

// ReplicaSetName is <routingservice>-<shard>-<revision>, at most 40+1+20+1+10 = 72 characters.
func ReplicaSetName(rsvcName, shard, revision string) string {
	return fmt.Sprintf("%s-%s-%s", rsvcName, shard, revision)
}

// MigrationJobName is <routingservice>-schema-<hash of version>-<attempt>, at most 63 characters
// (a Job's name becomes a label value). The name is deterministic, so a second create of the same
// (version, attempt) gets AlreadyExists instead of a second migration (scenario S-10).
func MigrationJobName(rsvcName, version string, attempt int32) string {
	return fmt.Sprintf("%s-schema-%s-%d", rsvcName, shortHash(version)[:8], attempt)
}

// CheckJobName is <routingservice>-check-<hash of version>-<n>, at most 62 characters: the n-th
// check Job for a required version. Deterministic like MigrationJobName, so a manager restarted
// mid-check finds its check Job instead of starting a second one.
func CheckJobName(rsvcName, version string, n int32) string {
	return fmt.Sprintf("%s-check-%s-%d", rsvcName, shortHash(version)[:8], n)
}

// ShardCheckJobName is <routingservice>-verify-<hash of shard, check and revision>-<attempt>, at
// most 40+8+10+1+4 = 63 characters (attempt at most MaxShardCheckAttempt): one Job per shard,
// check, revision, moment and attempt, deterministic so that a restarted manager finds the Job
// instead of starting a second one, and a new attempt (a retry, the revision applied again) never
// reads the result of an earlier one. Attempt 0 is the name an earlier schemagate gave the only
// attempt (no suffix); schemagate creates attempts from 1.
func ShardCheckJobName(rsvcName, shard, check, revision string, when routingv1alpha1.CheckWhen, attempt int32) string {
	key := []string{shard, check, revision}
	if when != routingv1alpha1.CheckWhenBake {
		key = append(key, string(when))
	}
	name := fmt.Sprintf("%s-verify-%s", rsvcName, shortHash(key))
	if attempt > 0 {
		name = fmt.Sprintf("%s-%d", name, attempt)
	}
	return name
}

// MaxShardCheckAttempt bounds the attempt of a shard check's Job, so its name stays a label value
// (at most 63 characters).
const MaxShardCheckAttempt = 9999

func shortHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Marshalling API types cannot fail; a panic here is a programming error.
		panic(err)
	}
	sum := sha256.Sum256(b)
	// Ten characters from an alphabet without vowels, as Kubernetes' pod-template-hash uses.
	return rand.SafeEncodeString(hex.EncodeToString(sum[:5]))
}
