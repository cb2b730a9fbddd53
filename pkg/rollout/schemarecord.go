package rollout

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// What status.schema and SchemaReady keep saying about a migration attempt after its Job, or
// only its pods, is deleted (a ttlSecondsAfterFinished, a policy, a person). Status is untrusted
// input: what is carried over here is only ever reported, or holds back (a reason that stays, a
// retry that needs an annotation); the gate and mayRun read the cluster alone (confirmedNow).

// attemptEndReasons are the SchemaReady reasons that say how a migration attempt for the required
// version ended without confirming it.
var attemptEndReasons = map[string]bool{
	routingv1alpha1.ReasonMigrationFailed:     true,
	routingv1alpha1.ReasonMigrationDeadline:   true,
	routingv1alpha1.ReasonSchemaDirty:         true,
	routingv1alpha1.ReasonSchemaMismatch:      true,
	routingv1alpha1.ReasonInvalidSchemaReport: true,
}

// reportReasons are the end reasons that come from reading a schema report (or finding none that
// can be used); they can come from a check Job as well as from the attempt.
var reportReasons = map[string]bool{
	routingv1alpha1.ReasonSchemaDirty:         true,
	routingv1alpha1.ReasonSchemaMismatch:      true,
	routingv1alpha1.ReasonInvalidSchemaReport: true,
}

// notAfter is t, or now when t is in the future: a hand-edited or restored time cannot hold a
// wait until then (the same rule as for shard times, sanitizeStatus).
func notAfter(t *metav1.Time, now time.Time) *metav1.Time {
	if t != nil && t.After(now) {
		return &metav1.Time{Time: now}
	}
	return t
}

// storedSchema is status.schema as stored, with its times clamped to now (notAfter).
func (p *planner) storedSchema() routingv1alpha1.SchemaStatus {
	s := *p.rsvc.Status.Schema.DeepCopy()
	s.StartTime, s.CompletionTime = notAfter(s.StartTime, p.now), notAfter(s.CompletionTime, p.now)
	return s
}

// storedEnd returns the reason the stored status gives for how the migration attempt named job
// ended, when it names that attempt for the required version and its SchemaReady reason is one of
// attemptEndReasons.
func (p *planner) storedEnd(job string) (string, bool) {
	old := p.oldCondition(routingv1alpha1.ConditionSchemaReady)
	prev := p.rsvc.Status.Schema
	required := p.rsvc.Spec.Schema.Version
	if old == nil || !attemptEndReasons[old.Reason] || job == "" || prev.MigrationJob != job || prev.Attempt < 1 ||
		!schemaversion.Equal(prev.RequiredVersion, required) || job != MigrationJobName(p.rsvc.Name, schemaversion.Canonical(required), prev.Attempt) {
		return "", false
	}
	return old.Reason, true
}

// endedMessage says how attempt (Job job) to the required version ended, for reason, once the Job
// or its pods are gone (what): the report it left was read then and is not here to read again,
// so the message says what it said; it is not run again without a retry annotation.
func (p *planner) endedMessage(job string, attempt int32, reason, what string) string {
	required := p.rsvc.Spec.Schema.Version
	how, fix := "did not succeed", ""
	switch reason {
	case routingv1alpha1.ReasonMigrationFailed:
		how = "failed"
	case routingv1alpha1.ReasonMigrationDeadline:
		how = "did not finish within activeDeadlineSeconds"
	case routingv1alpha1.ReasonSchemaDirty:
		how, fix = "left the database dirty (its schema report said so): a migration failed half-way and only a person may clear it", "fix the database, then "
	case routingv1alpha1.ReasonSchemaMismatch:
		how = fmt.Sprintf("succeeded, but its schema report said the database is below schema %s: it did not migrate", required)
	case routingv1alpha1.ReasonInvalidSchemaReport:
		how = fmt.Sprintf("succeeded, but its schema report could not be used, so nothing confirmed schema %s", required)
	}
	return fmt.Sprintf("migration Job %s (attempt %d) to schema %s %s; %s since, and it is not run again automatically (%sannotate %s to run attempt %d); revision %s does not start",
		job, attempt, required, how, what, fix, routingv1alpha1.AnnotationRetry, attempt+1, p.update)
}

// keepConfirmedRecord keeps, while the evidence is being re-established (hold) or is reported
// lost (SchemaEvidenceLost), what status.schema said confirmed the schema: the version and the
// Job, though that Job is gone. It is kept only when the stored status said so with SchemaReady
// True (or already lost), the Job it names is not in the cluster, and the version is above what
// the cluster confirms now; it is reported, never read by the gate (mayRun reads confirmedNow).
func (p *planner) keepConfirmedRecord() {
	prev := p.rsvc.Status.Schema
	old := p.oldCondition(routingv1alpha1.ConditionSchemaReady)
	if old == nil || (old.Status != metav1.ConditionTrue && old.Reason != routingv1alpha1.ReasonSchemaEvidenceLost) ||
		!schemaversion.Valid(prev.ConfirmedVersion) || prev.ConfirmedBy == "" || len(prev.ConfirmedBy) > 253 ||
		!schemaversion.AtLeast(prev.ConfirmedVersion, p.status.Schema.ConfirmedVersion) {
		return
	}
	for _, j := range p.observed.Jobs {
		if j != nil && j.Name == prev.ConfirmedBy {
			return
		}
	}
	p.status.Schema.ConfirmedVersion, p.status.Schema.ConfirmedBy = prev.ConfirmedVersion, prev.ConfirmedBy
}

// keepMigrationRecord keeps, when a check Job confirms the required version and no migration Job
// for it is left, the migration attempt the stored status names (migrationJob, attempt and its
// times) when it is an attempt of a version the check's reading covers: the check says what the
// database is at, not which migration brought it there. Otherwise the attempt fields are cleared.
func (p *planner) keepMigrationRecord(ev *reading) {
	st := &p.status.Schema
	prev := p.storedSchema()
	if prev.Attempt >= 1 && prev.Attempt < 1<<20 && schemaversion.Valid(prev.RequiredVersion) && schemaversion.AtLeast(ev.version, prev.RequiredVersion) &&
		prev.MigrationJob == MigrationJobName(p.rsvc.Name, schemaversion.Canonical(prev.RequiredVersion), prev.Attempt) {
		st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime = prev.MigrationJob, prev.Attempt, prev.StartTime, prev.CompletionTime
		return
	}
	st.MigrationJob, st.Attempt, st.StartTime, st.CompletionTime = "", 0, nil, nil
}
