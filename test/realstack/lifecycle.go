package realstack

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The route target's type change (examples/edge-router): v1 reads each route's target as a URL
// from the text column upstream; v2 reads a JSON document. Its migrations come in two sets of the
// router's own golang-migrate files, chosen with `migrate --migrations=<set>`:
//
//   - SetNaive: migration 2 retypes upstream to jsonb in place. v1 stays Ready on it and answers
//     404 for every domain; v2 reads upstream as JSON. v1 runs on [1, 1], v2 on [2, 2].
//   - SetExpandContract: migration 2 (expand) adds the jsonb column target, backfills it and keeps
//     both in step with a trigger; migration 3 (contract) drops upstream. v1 runs on [1, 2], v2
//     (reading target) on [2, 3].
const (
	SetNaive          = "naive"
	SetExpandContract = "expand-contract"
)

// TextRouter is v1 of the type change: targets read as URLs from upstream (schema 1).
func TextRouter(revision, database string, extra ...string) corev1.Container {
	return RouterContainer(revision, 1, database, extra...)
}

// JSONRouter is v2 of the type change: targets read as JSON documents from column (upstream after
// the naive migration, target after the expand), on schema 2 or later.
func JSONRouter(revision, column, database string, extra ...string) corev1.Container {
	return RouterContainer(revision, 2, database, append([]string{"--target-format=json", "--target-column=" + column}, extra...)...)
}

// MigrationJob is the migration Job of the given set: `edge-router migrate --migrations=set`
// (plus extra flags) under `schemagate-schema run`, which writes the schema report.
func MigrationJob(database, set string, extra ...string) routingv1alpha1.MigrationSpec {
	spec := OnProcessNodes(corev1.Container{Name: "migrate", Image: SchemaImage,
		Args: migrateArgs(append([]string{"--migrations=" + set}, extra...)...),
		Env:  []corev1.EnvVar{{Name: "DATABASE_URL", Value: database}}})
	spec.RestartPolicy = corev1.RestartPolicyNever
	return routingv1alpha1.MigrationSpec{Template: corev1.PodTemplateSpec{Spec: spec},
		BackoffLimit: ptr.To(int32(0)), ActiveDeadlineSeconds: ptr.To(int64(120))}
}

// TypeChangeV1 is name in namespace serving TextRouter v1 in every region (replicas pods each),
// with schema 1 migrated by set's migration 1 and declaring compat (nil: no range, today's
// assumed [1, ∞)).
func TypeChangeV1(name, namespace, database, set string, replicas int32, compat *routingv1alpha1.SchemaCompatibility) *routingv1alpha1.RoutingService {
	r := RoutingService(name, namespace, database, replicas)
	r.Spec.Template.Spec.Containers = []corev1.Container{TextRouter("v1", database)}
	r.Spec.Schema.Migration = MigrationJob(database, set)
	r.Spec.Schema.Compatibility = compat
	return r
}

// ToTextV1 is a spec reverted to v1 (as a Git revert would): TextRouter on schema 1 with compat.
// The migration stays as it was (a revert to schema 1 runs none: the database is at or above it).
func ToTextV1(database string, compat *routingv1alpha1.SchemaCompatibility) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{TextRouter("v1", database)}
		r.Spec.Schema.Version = "1"
		r.Spec.Schema.Compatibility = compat
		r.Spec.Schema.Contract = nil
	}
}

// ToNaiveV2 is the type change done in place: v2 reads upstream as JSON, and its migration is
// the naive set's migration 2 (delay first). compat is v2's declared range (nil: none).
func ToNaiveV2(database string, delay time.Duration, compat *routingv1alpha1.SchemaCompatibility) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{JSONRouter("v2", "upstream", database)}
		r.Spec.Schema.Version = "2"
		r.Spec.Schema.Compatibility = compat
		r.Spec.Schema.Migration = MigrationJob(database, SetNaive, "--delay="+delay.String())
	}
}

// ToExpandContractV2 is the type change as a lifecycle: v2 reads target as JSON and runs on
// [2, 3]; the expand is migration 2 of the expand-contract set, the contract its migration 3,
// run once the rollback window (window) has passed. extra are more serve flags of v2 (a failure
// to inject).
func ToExpandContractV2(database string, window time.Duration, extra ...string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers = []corev1.Container{JSONRouter("v2", "target", database, extra...)}
		r.Spec.Schema.Version = "2"
		r.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "2", Max: "3"}
		r.Spec.Schema.Migration = MigrationJob(database, SetExpandContract)
		r.Spec.Schema.Contract = &routingv1alpha1.ContractSpec{Version: "3", Migration: MigrationJob(database, SetExpandContract),
			RollbackWindowSeconds: ptr.To(int32(window / time.Second))}
	}
}

// Range is a SchemaCompatibility from min to max ("" for none).
func Range(minVersion, maxVersion string) *routingv1alpha1.SchemaCompatibility {
	return &routingv1alpha1.SchemaCompatibility{Min: minVersion, Max: maxVersion}
}
