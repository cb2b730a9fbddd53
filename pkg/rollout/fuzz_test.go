package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/controls"
	"github.com/schemagate/schemagate/pkg/schemareport"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// FuzzCompute: status is untrusted input (scenario S-19), and so are the ReplicaSets, Jobs, Pods
// and annotations the planner reads. On any of them Compute must not panic and must not open the
// gate. Run longer with `make fuzz`, or
//
//	go test ./pkg/rollout/ -run '^$' -fuzz '^FuzzCompute$' -fuzztime 3m
//
// Inputs:
//   - status: a RoutingServiceStatus as JSON, in which "@U", "@O1" and "@O2" stand for the update
//     revision and two older revisions (old1: app:v0, old2: the fixture's app:v1 on schema 1); when
//     it is not JSON of a status, its bytes drive a generator (fuzzStatus) instead;
//   - cluster: bytes that drive a generator (fuzzCluster): the spec's variations and annotations,
//     0-3 ReplicaSets per shard (the three of the spec, "mars" and ""), 0-3 migration Jobs, 0-3
//     of their Pods and a name Conflict;
//   - clock: the clock's offset from 2026-11-30T12:00:00Z, in seconds (±3 h), with milliseconds.
//
// Every generator field is one byte, read in declaration order (a slice: a count byte, modulo 4,
// then its elements); missing bytes read as 0, so empty inputs are the fixture with nothing in
// the cluster. The seed corpus is testdata/fuzz/FuzzCompute (see TestFuzzComputeSeedCorpus).
//
// Properties, checked on the plan and again on a second Compute from the first plan's status:
//   - I1: no action creates a ReplicaSet unless the oldest schema of the spec's range
//     (spec.schema.compatibility.min, else spec.schema.version) is confirmed, and none scales a
//     ReplicaSet up whose RequiredSchema (for the update revision: that oldest schema) is above
//     the highest confirmed version, whatever its hand-edited range annotations say (they never
//     widen). Confirmed means by a Job the RoutingService controls (metav1.IsControlledBy), whose
//     Complete condition is True and whose name is MigrationJobName(name, its schema-version
//     label, its attempt label);
//   - the expand gate: no migration Job for V is created, unless allowBreakingMigration, while a
//     ReplicaSet of another revision than the update revision serves (asks for or has pods) and
//     cannot run on V: V below its RequiredSchema, or above a valid schema-max annotation (one
//     that is not a version leaves only its RequiredSchema);
//   - rollback safety: no ReplicaSet of another revision is scaled up whose valid schema-max
//     annotation is below the version the database reports (status.schema.reportedVersion);
//   - SchemaReady is True only when such a Job confirms a version >= spec.schema.version, and the
//     stored status never changes SchemaReady's status (the same cluster with an empty status
//     gives the same answer);
//   - status.schema.confirmedVersion is never above what those Jobs confirm;
//   - status.observedGeneration and every condition's observedGeneration are metadata.generation;
//   - no migration or check Job is created while a Job the RoutingService controls and labels
//     app.kubernetes.io/component=migration (what the reconciler lists), evidence or not, has
//     active or terminating pods: two migrations never run at once (S-15), and a check never
//     reads a database half-way through a migration (shard checks, which test the service, may);
//   - only ReplicaSets the RoutingService controls (or adopts in the same plan) are scaled,
//     deleted or marked served; only Jobs it controls are suspended; every action prints;
//   - Compute does not modify its input.
func FuzzCompute(f *testing.F) {
	f.Add([]byte(nil), []byte(nil), int64(0))
	f.Add([]byte(`{"shards":[{"name":"us-east","step":"Progressing","stepRevision":"@U"}]}`),
		fuzzClusterSeed(func(c *fuzzCluster) { c.Jobs = []fuzzJob{{}} }), int64(0))
	f.Add([]byte(`{"shards":[{"name":"us-east","step":"Baking","stepRevision":"@U","checks":[{"name":"ratio","when":"Bake","phase":"Running","revision":"@U","count":1,"failed":1}]}]}`),
		fuzzClusterSeed(func(c *fuzzCluster) { c.Measured, c.Answers = 1+4, []uint8{1, 2, 4} }), int64(0))
	f.Add([]byte(nil), fuzzClusterSeed(func(c *fuzzCluster) { c.Measured, c.Answers = 3+64, []uint8{3, 3, 0} }), int64(0))
	f.Add([]byte(nil), fuzzClusterSeed(func(c *fuzzCluster) { c.Measured, c.Condition = 1, 1 }), int64(0))
	// The pod-health gate: us-east bakes the update revision and one of its pods was OOM-killed.
	f.Add([]byte(`{"shards":[{"name":"us-east","step":"Baking","stepRevision":"@U"}]}`), fuzzClusterSeed(func(c *fuzzCluster) {
		c.Shards[0] = []fuzzRS{{Replicas: 3, StatusReplicas: 3, Available: 3, Ready: 3}}
		c.RoutingPods = []fuzzRoutingPod{{Restarts: 1, Last: 1, Finished: 4}, {Restarts: 2, State: 1, Last: 2, Finished: 5}}
		c.PodHealth = 3
	}), int64(0))
	// A check at PodReady: us-east steps the update revision, one new pod waits for its check, one
	// failed it, one claims a pass from the future.
	f.Add([]byte(`{"shards":[{"name":"us-east","step":"Progressing","stepRevision":"@U"}]}`), fuzzClusterSeed(func(c *fuzzCluster) {
		c.Shards[0] = []fuzzRS{{Replicas: 3, StatusReplicas: 3, Available: 1, Ready: 1}}
		c.RoutingPods = []fuzzRoutingPod{{Init: 2}, {Init: 2 + 16, Finished: 3}, {Init: 2 + 8*2, Finished: 7}}
		c.PodHealth = 128
		c.Measured, c.Answers = 1, []uint8{1, 2, 3}
	}), int64(0))
	f.Fuzz(func(t *testing.T, status, cluster []byte, clock int64) {
		o := fuzzObserved(status, cluster, clock)
		before := deepCopyObserved(o)
		plan := Compute(o)
		if !reflect.DeepEqual(before, o) {
			t.Fatalf("Compute modified its input")
		}
		checkFuzzPlan(t, "first Compute", o, plan)
		if len(plan.Measurements) > 0 {
			// The reconciler measures and decides again: whatever the measurements say, the
			// second plan keeps the invariants and asks for nothing more.
			measured := deepCopyObserved(o)
			measured.Measurements = fuzzMeasurements(cluster, plan.Measurements)
			again := Compute(measured)
			checkFuzzPlan(t, "Compute with measurements", measured, again)
			if len(again.Measurements) > 0 {
				t.Fatalf("measurements asked again after they were given: %+v", again.Measurements)
			}
		}

		// The stored status never decides the gate: the same cluster with an empty status.
		empty := o
		empty.RoutingService = o.RoutingService.DeepCopy()
		empty.RoutingService.Status = routingv1alpha1.RoutingServiceStatus{}
		fromEmpty := Compute(empty)
		if a, b := plan.Status.Schema.ConfirmedVersion, fromEmpty.Status.Schema.ConfirmedVersion; a != b {
			t.Fatalf("confirmedVersion is %q from the stored status and %q from an empty one: the stored status changed the evidence", a, b)
		}
		// SchemaReady may differ only where a stored True is held while lost evidence is
		// re-established (S-23): never the other way.
		if a, b := conditionStatus(plan.Status, routingv1alpha1.ConditionSchemaReady), conditionStatus(fromEmpty.Status, routingv1alpha1.ConditionSchemaReady); a != b &&
			!(a == metav1.ConditionTrue && conditionStatus(o.RoutingService.Status, routingv1alpha1.ConditionSchemaReady) == metav1.ConditionTrue) {
			t.Fatalf("SchemaReady is %q from the stored status and %q from an empty one: the stored status changed the gate", a, b)
		}

		// A second reconcile reads the status the first wrote, with the same cluster.
		second := deepCopyObserved(o)
		second.RoutingService.Status = *plan.Status.DeepCopy()
		checkFuzzPlan(t, "second Compute", second, Compute(second))
	})
}

// fuzzMeasurements answers reqs with the phases of the fuzzed cluster's Answers.
func fuzzMeasurements(clusterIn []byte, reqs []MeasurementRequest) []TakenMeasurement {
	var c fuzzCluster
	decodeFuzz(clusterIn, &c)
	phases := []routingv1alpha1.MeasurementPhase{routingv1alpha1.MeasurementSuccessful, routingv1alpha1.MeasurementFailed,
		routingv1alpha1.MeasurementInconclusive, routingv1alpha1.MeasurementError, "", "Bogus"}
	var out []TakenMeasurement
	for i, req := range reqs {
		var a uint8
		if len(c.Answers) > 0 {
			a = c.Answers[i%len(c.Answers)]
		}
		out = append(out, TakenMeasurement{MeasurementKey: req.MeasurementKey, Fatal: a >= 4 && a%2 == 0,
			Result: routingv1alpha1.MeasurementResult{Phase: pick(a, phases), Value: strings.Repeat("9", int(a)), Message: strings.Repeat("é", int(a)*3)}})
	}
	return out
}

// checkFuzzPlan checks FuzzCompute's properties on plan, computed from o.
func checkFuzzPlan(t *testing.T, which string, o Observed, plan Plan) {
	t.Helper()
	for _, ss := range plan.Status.Shards {
		for _, c := range ss.Checks {
			if len(c.Measurements) > routingv1alpha1.MaxMeasurementsKept || !utf8.ValidString(c.Message) {
				t.Fatalf("%s: shard %s check %s: %d measurements kept, message valid UTF-8: %v", which, ss.Name, c.Name, len(c.Measurements), utf8.ValidString(c.Message))
			}
			for _, m := range c.Measurements {
				if len(m.Value) > 64 || len(m.Message) > 1024 || !utf8.ValidString(m.Message) {
					t.Fatalf("%s: shard %s check %s: a measurement beyond the CRD's bounds: %+v", which, ss.Name, c.Name, m)
				}
			}
		}
	}
	rsvc := o.RoutingService
	confirmed := fuzzConfirmed(rsvc, o.Jobs, o.Pods)
	oldest := rsvc.Spec.Schema.Version
	if c := rsvc.Spec.Schema.Compatibility; c != nil && c.Min != "" {
		oldest = c.Min
	}
	update := Revision(&rsvc.Spec)
	adopted := map[*appsv1.ReplicaSet]bool{}
	for i, a := range plan.Actions {
		_ = a.String()
		switch a.Kind {
		case CreateReplicaSet:
			if !schemaversion.AtLeast(confirmed, oldest) {
				t.Fatalf("%s: I1: action %d %s: the oldest schema of the spec's range, %q, is not confirmed (confirmed %q)", which, i, a, oldest, confirmed)
			}
		case ScaleReplicaSet:
			need := RequiredSchema(a.ReplicaSet)
			if a.ReplicaSet.Labels[LabelRevision] == update && schemaversion.Valid(oldest) && schemaversion.AtLeast(need, oldest) {
				need = oldest
			}
			if a.Replicas > replicasOf(a.ReplicaSet) && need != "" && !schemaversion.AtLeast(confirmed, need) {
				t.Fatalf("%s: I1: action %d %s scales up a ReplicaSet requiring schema %q (confirmed %q)", which, i, a, need, confirmed)
			}
			if max, ok := a.ReplicaSet.Annotations["schemagate.io/schema-max"]; ok && a.Replicas > replicasOf(a.ReplicaSet) && a.ReplicaSet.Labels[LabelRevision] != update &&
				schemaversion.Valid(max) && plan.Status.Schema.ReportedVersion != "" && !schemaversion.AtLeast(max, plan.Status.Schema.ReportedVersion) {
				t.Fatalf("%s: action %d %s scales up a revision whose newest schema %s is below the reported %s: a rollback to a revision that cannot run", which, i, a, max, plan.Status.Schema.ReportedVersion)
			}
		case CreateJob:
			if a.Job.Labels[LabelComponent] == ComponentMigration && !rsvc.Spec.Schema.AllowBreakingMigration {
				v := a.Job.Labels[LabelSchemaVersion]
				for _, rs := range o.ReplicaSets {
					if !metav1.IsControlledBy(rs, rsvc) || rs.DeletionTimestamp != nil || rs.Labels[LabelComponent] != ComponentRouting ||
						rs.Labels[LabelRevision] == update || (replicasOf(rs) == 0 && rs.Status.Replicas == 0) {
						continue
					}
					need := RequiredSchema(rs)
					max, hasMax := rs.Annotations["schemagate.io/schema-max"]
					if hasMax && !schemaversion.Valid(max) {
						max = need
					}
					if !schemaversion.AtLeast(v, need) || (hasMax && !schemaversion.AtLeast(max, v)) {
						t.Fatalf("%s: action %d %s: a migration to %s while %s (requires %q, max %q) serves", which, i, a, v, rs.Name, need, max)
					}
				}
			}
			if a.Job.Labels[LabelComponent] == ComponentShardCheck {
				// A shard check tests the service, not the database: it may run beside anything.
				break
			}
			for _, j := range o.Jobs {
				// Any migration Job the RoutingService controls, evidence or not. The reconciler
				// lists migration Jobs by their component label (controllers/routingservice_observe.go):
				// a Job without it is never observed.
				if metav1.IsControlledBy(j, rsvc) && j.Labels[LabelComponent] == ComponentMigration && (j.Status.Active > 0 || ptr.Deref(j.Status.Terminating, 0) > 0) {
					t.Fatalf("%s: action %d %s while migration Job %s has pods (active %d, terminating %d): two migrations at once",
						which, i, a, j.Name, j.Status.Active, ptr.Deref(j.Status.Terminating, 0))
				}
			}
		case SuspendJob, StopJob, AnnotateJob:
			if !metav1.IsControlledBy(a.Job, rsvc) {
				t.Fatalf("%s: action %d %s: the Job is not controlled by the RoutingService", which, i, a)
			}
		case AdoptReplicaSet:
			adopted[a.ReplicaSet] = true
		case CreateRecord:
			if a.Record.Name != RevisionRecordName(rsvc.Name, Revision(&rsvc.Spec)) || verifyRecord(a.Record, Revision(&rsvc.Spec)) == nil {
				t.Fatalf("%s: action %d %s: not the update revision's verified record", which, i, a)
			}
		case DeleteRecord:
			if !metav1.IsControlledBy(a.Record, rsvc) {
				t.Fatalf("%s: action %d %s: the record is not controlled by the RoutingService", which, i, a)
			}
		case AdoptRecord:
			if metav1.GetControllerOf(a.Record) != nil || verifyRecord(a.Record, a.Record.Labels[LabelRevision]) == nil {
				t.Fatalf("%s: action %d %s: adopts a record that has a controller or does not verify", which, i, a)
			}
		}
		if a.Kind == ScaleReplicaSet && a.Replicas > replicasOf(a.ReplicaSet) {
			// History: an adopted ReplicaSet is scaled up only as the update revision or when a
			// verified record vouches for it.
			_, marked := a.ReplicaSet.Annotations[annotationAdopted]
			if (marked || !metav1.IsControlledBy(a.ReplicaSet, rsvc)) && !fuzzIsUpdate(rsvc, a.ReplicaSet) && !fuzzVouched(o, a.ReplicaSet) {
				t.Fatalf("%s: action %d %s scales up an adopted ReplicaSet no verified record vouches for", which, i, a)
			}
		}
		if a.Kind == RecordControls {
			for k, v := range a.Annotations {
				switch k {
				case annotationFailure:
					// The failure that decided a rollback (failrecord.go): bounded, readable
					// back, and only on the update revision's ReplicaSets, or cleared.
					if len(v) > maxFailureRecord || (v != "" && decodedFailure(v) == nil) || (v != "" && a.ReplicaSet.Labels[LabelRevision] != Revision(&rsvc.Spec)) {
						t.Fatalf("%s: action %d %s: failure record %q is unbounded, unreadable or on another revision", which, i, a, v)
					}
				case annotationContracted:
					if !validVersion(v) {
						t.Fatalf("%s: action %d %s: contract record %q is not a version", which, i, a, v)
					}
				default:
					if len(v) > controls.MaxRecords*(len("sha256-")+32+1) || !strings.HasPrefix(k, "schemagate.io/handled-") {
						t.Fatalf("%s: action %d %s: record %s=%q is unbounded or not a record", which, i, a, k, v)
					}
				}
			}
		}
		switch a.Kind {
		case ScaleReplicaSet, DeleteReplicaSet, MarkServed, RecordControls:
			if !metav1.IsControlledBy(a.ReplicaSet, rsvc) && !adopted[a.ReplicaSet] {
				t.Fatalf("%s: action %d %s: the ReplicaSet is not controlled by the RoutingService", which, i, a)
			}
		}
	}
	st := plan.Status
	if revs := st.Schema.Revisions; len(revs) > maxRevisionSchemas {
		t.Fatalf("%s: %d status.schema.revisions, beyond the CRD's bound", which, len(revs))
	}
	for _, r := range st.Schema.Revisions {
		if len(r.Revision) > 63 || len(r.Min) > 63 || len(r.Max) > 63 || len(r.Shards) > 64 {
			t.Fatalf("%s: status.schema.revisions entry beyond the CRD's bounds: %+v", which, r)
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, routingv1alpha1.ConditionSchemaReady); c != nil && c.Status == metav1.ConditionTrue &&
		!schemaversion.AtLeast(confirmed, rsvc.Spec.Schema.Version) && conditionStatus(rsvc.Status, routingv1alpha1.ConditionSchemaReady) != metav1.ConditionTrue {
		t.Fatalf("%s: SchemaReady=True (%s) but schema %q is not confirmed by a migration Job (confirmed %q)", which, c.Message, rsvc.Spec.Schema.Version, confirmed)
	}
	// A confirmation whose Job has since been deleted is still reported (the stored one, never a
	// higher one); the I1 checks above show the gate does not read it.
	if v := st.Schema.ConfirmedVersion; v != "" && !schemaversion.AtLeast(confirmed, v) && v != rsvc.Status.Schema.ConfirmedVersion {
		t.Fatalf("%s: status.schema.confirmedVersion %q, but migration Jobs confirm %q", which, v, confirmed)
	}
	if st.ObservedGeneration != rsvc.Generation {
		t.Fatalf("%s: status.observedGeneration %d, generation %d", which, st.ObservedGeneration, rsvc.Generation)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != rsvc.Generation {
			t.Fatalf("%s: condition %s has observedGeneration %d, generation %d", which, c.Type, c.ObservedGeneration, rsvc.Generation)
		}
	}
}

// fuzzConfirmed is the highest schema version anything that counts as evidence could confirm
// (see FuzzCompute), computed independently of the planner: a Job the RoutingService controls,
// named for its labels (MigrationJobName, or CheckJobName for a check), confirms its version by
// its Complete condition under evidence JobSuccess (migrations only), and any version a schema
// report of a pod it controls states without dirty. The planner confirms the latest such reading,
// so never more than this.
func fuzzConfirmed(rsvc *routingv1alpha1.RoutingService, jobs []*batchv1.Job, pods []*corev1.Pod) string {
	confirmed := ""
	raise := func(v string) {
		if schemaversion.Valid(v) && schemaversion.AtLeast(v, confirmed) {
			confirmed = v
		}
	}
	for _, j := range jobs {
		attempt, err := strconv.ParseInt(j.Labels[LabelAttempt], 10, 32)
		version := j.Labels[LabelSchemaVersion]
		name := MigrationJobName
		if j.Labels[LabelComponent] == ComponentCheck {
			name = CheckJobName
		}
		if err != nil || !metav1.IsControlledBy(j, rsvc) || j.Name != name(rsvc.Name, version, int32(attempt)) {
			continue
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue && j.Labels[LabelComponent] == ComponentMigration &&
				rsvc.Spec.Schema.Evidence == routingv1alpha1.SchemaEvidenceJobSuccess {
				raise(version)
			}
		}
		if msg, ok := j.Annotations[AnnotationSchemaReport]; ok && j.Labels[LabelComponent] == ComponentMigration {
			if r, err := schemareport.Parse([]byte(msg)); err == nil && !r.Dirty {
				raise(r.Version)
			}
		}
		for _, pod := range pods {
			if !metav1.IsControlledBy(pod, j) {
				continue
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil {
					if r, err := schemareport.Parse([]byte(t.Message)); err == nil && !r.Dirty {
						raise(r.Version)
					}
				}
			}
		}
	}
	return confirmed
}

func conditionStatus(st routingv1alpha1.RoutingServiceStatus, conditionType string) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(st.Conditions, conditionType); c != nil {
		return c.Status
	}
	return ""
}

func deepCopyObserved(o Observed) Observed {
	out := o
	out.RoutingService = o.RoutingService.DeepCopy()
	out.ReplicaSets, out.Jobs, out.Pods = nil, nil, nil
	for _, rs := range o.ReplicaSets {
		out.ReplicaSets = append(out.ReplicaSets, rs.DeepCopy())
	}
	for _, j := range o.Jobs {
		out.Jobs = append(out.Jobs, j.DeepCopy())
	}
	for _, p := range o.Pods {
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	out.ControllerRevisions = nil
	for _, cr := range o.ControllerRevisions {
		out.ControllerRevisions = append(out.ControllerRevisions, cr.DeepCopy())
	}
	out.Conflicts = append([]Conflict(nil), o.Conflicts...)
	return out
}

// The generators. Each field is one byte choosing from a list (modulo its length); index 0 is
// the fixture's value or the most ordinary one.

// fuzzCluster shapes the RoutingService's spec and annotations and the cluster.
type fuzzCluster struct {
	Paused         bool
	Image          uint8 // fuzzImages
	Version        uint8 // spec.schema.version: fuzzVersions
	MigrationImage uint8 // migrate:ok, migrate:fixed (a changed migration template)
	Generation     uint8 // metadata.generation: 1 + n%4
	Retry          uint8 // annotations: fuzzTokens
	Abort          uint8
	Promote        uint8
	FailurePolicy  uint8 // Rollback, Halt, ""
	MaxSurge       uint8 // fuzzSurges
	MaxUnavailable uint8 // fuzzUnavailables
	ShardReplicas  [3]uint8
	// Shards are the ReplicaSets labelled for shards us-east, eu-west, ap-south, mars (not in the
	// spec) and "".
	Shards      [5][]fuzzRS
	Jobs        []fuzzJob
	Pods        []fuzzPod
	Conflict    uint8 // none, the migration Job's name (attempt 1, 2), us-east's or eu-west's ReplicaSet
	Evidence    uint8 // spec.schema.evidence: "", Report, JobSuccess
	Check       uint8 // spec.schema.check: none, set, set with afterMigration, set with beforeEachShard
	ShardChecks uint8 // spec.strategy.checks: none, "smoke", "smoke" in dryRun, "smoke" before start and in the bake
	// Measured adds a prometheus check "ratio" (n%4: none, in the bake, dryRun, before start and
	// in the bake) with count, limits and interval from its bits; Answers are the phases the
	// reconciler's measurements return, in order (a value ≥ 4 is fatal).
	Measured uint8
	Answers  []uint8
	// JobHistoryLimit sets spec.strategy.jobHistoryLimit: 0 leaves it unset (default 3), n > 0
	// sets 1 + (n-1)%4.
	JobHistoryLimit uint8
	// Handled[i] sets the handled-control records of the i-th ReplicaSet (in the order they are
	// built): its bits 0-1, 2-3 and 4-5 pick the abort, retry and promote records from
	// fuzzRecords (0: none).
	Handled []uint8
	// Condition is the "ratio" check's successCondition: one that compiles, one that does not,
	// one that yields no bool, or one with an unknown variable (refused before any shard moves).
	Condition uint8
	// Adopted marks the i-th ReplicaSet (bit i, the first 8) schemagate.io/adopted.
	Adopted uint8
	// Records are the ControllerRevisions labelled for the RoutingService (revision records).
	Records []fuzzRecord
	// Compat sets spec.schema.compatibility: none, [version, version], [1, version], [1, no
	// newest], [0, 2], or none with allowBreakingMigration.
	Compat uint8
	// Ranges[i] hand-edits the range annotations of the i-th ReplicaSet (in the order they are
	// built): none, min 0, max 1, max 9, min "x", max "" (not a version), none at all, min 3 with
	// max 2, a max of 70 digits (beyond the CRD's bound for status).
	Ranges []uint8
	// RoutingPods are routing pods of the ReplicaSets built (by index, in the order they are
	// built), with restarts and terminations as a kubelet, or a hostile writer, reports them:
	// the pod-health gate's input (podhealth.go).
	RoutingPods []fuzzRoutingPod
	// PodHealth sets spec.strategy.podHealth: unset, Off, or Enforce with maxRestarts (n-2)%3
	// (a negative stored value among them).
	PodHealth uint8
	// Earlier adds a shard's earlier place (Observed.EarlierPlaces): none, or eu-west's in cluster
	// "old" (Reachable, Unreachable or CredentialsRefused by bits 2-3) with a copy of one of the
	// ReplicaSets built (bits 4-7 pick it; none past them) and routing pods of an old revision.
	Earlier uint8
}

// fuzzRoutingPod is a routing pod of one of the ReplicaSets built.
type fuzzRoutingPod struct {
	RS       uint8 // the ReplicaSet (modulo those built); its controller by UID, or another UID
	Owner    uint8 // controlled by it, another UID, no owner
	Restarts uint8 // restartCount: fuzzRestarts
	Last     uint8 // last termination: none, OOMKilled 137, Error 1, Completed 0, a reason of 64 KiB
	Finished uint8 // its finishedAt: zero, or fuzzAges from now (an hour ahead among them)
	State    uint8 // running, CrashLoopBackOff, terminated OOMKilled now, no state, 100 statuses
	Init     uint8 // odd: the status is an init container's (a native sidecar's); Init/2 > 0: the gate of a check at PodReady, its conditions and IP
}

// fuzzRestarts are restart counts a pod status may carry.
var fuzzRestarts = []int32{0, 1, 2, 5, -1, 1 << 30}

// fuzzRecord is a revision record (history.go) a cluster may hold.
type fuzzRecord struct {
	Revision uint8 // label: fuzzRevs.pick
	Data     uint8 // the spec of its revision, that spec with another image, junk, nothing, another image under its own revision
	Owner    uint8 // ours, none, another RoutingService of the same name, ours being deleted
	Name     uint8 // RevisionRecordName(name, label), another name
}

// fuzzRecords are record annotation values a cluster may hold: the tokens, lists, junk, a value
// far beyond what is read, a record of a long token.
var fuzzRecords = []string{"t1", "t0 t1 t2", strings.Repeat("x ", 2000) + "t2"}

type fuzzRS struct {
	Revision       uint8 // label: update, old2, old1, legacy (the update's template under another name), ""
	Template       uint8 // as schemagate builds it for its revision, another image
	Owner          uint8 // ours, another RoutingService of the same name, none, ours being deleted, ours without controller: true
	Name           uint8 // ReplicaSetName(name, shard, revision label), another name
	Replicas       uint8 // spec.replicas 0-5, nil
	StatusReplicas uint8 // 0-6
	Available      uint8 // 0-6
	Ready          uint8 // 0-6
	Generation     uint8 // generation 1-3; observedGeneration lags by Stale%2
	Stale          uint8
	ServedAt       uint8 // schemagate.io/served-at (an older schemagate's): none, an hour ago, not a time, in an hour, now, ""
	RequiresSchema uint8 // as built, "1", "2", "2.0", "x", "", absent, "3"
	Created        uint8 // fuzzAges
	ServedOrder    uint8 // schemagate.io/served-order: none, fuzzServedOrders
}

type fuzzJob struct {
	Version      uint8 // schema-version label: fuzzJobVersions
	Attempt      uint8 // attempt label: fuzzAttempts
	Name         uint8 // MigrationJobName(labels), with the canonical version, with attempt+1, forged
	Component    uint8 // migration, routing, none, check (named CheckJobName), shard check of us-east
	Condition    uint8 // none, Complete, Failed, Complete=False, Complete+Failed, Failed+Complete=False, SuccessCriteriaMet
	Active       uint8 // 0-2
	Terminating  uint8 // nil, 0, 1
	Suspend      uint8 // nil, false, true
	Owner        uint8 // ours, another RoutingService of the same name, none, ours without controller: true
	Created      uint8 // fuzzAges
	Deadline     uint8 // as built (120 s), nil, 1 s, 86400 s
	TemplateHash uint8 // as built, another, none
	Times        uint8 // none, start and completion, completion only, start only
}

type fuzzPod struct {
	Job     uint8 // whose labels (modulo the Jobs)
	Labels  uint8 // the Job's, another name, another attempt
	State   uint8 // running, unschedulable, image pull back-off, exited 1, last exit 137, creating, no statuses, init waiting
	Message uint8 // fuzzMessages
	Created uint8 // fuzzAges
	Owner   uint8 // labels only, controlled by its Job
	Phase   uint8 // none, Succeeded, Failed, Running
}

// fuzzStatus generates a status when the status input is not JSON.
type fuzzStatus struct {
	ObservedGeneration uint8
	Stable, Update     uint8 // fuzzRevisions
	Failure            bool
	FailureRevision    uint8
	FailureReason      uint8 // "", ProgressDeadlineExceeded, Aborted, MigrationFailed, Weird
	FailureShard       uint8 // fuzzShardNames
	FailureTime        uint8 // fuzzTimes
	LastAbort          uint8 // fuzzTokens
	LastRetry          uint8
	LastPromote        uint8
	Required           uint8 // fuzzJobVersions
	Confirmed          uint8
	MigrationJob       uint8 // "", the attempt-1 name, forged
	Attempt            uint8
	StartTime          uint8 // fuzzTimes
	CompletionTime     uint8
	Shards             []fuzzShardStatus
	Conditions         []fuzzCondition
}

type fuzzShardStatus struct {
	Name          uint8 // fuzzShardNames
	Step          uint8 // fuzzSteps
	StepRevision  uint8 // fuzzRevisions
	StepStartTime uint8 // fuzzTimes
	Replicas      uint8
	Revision      uint8 // fuzzRevisions
}

type fuzzCondition struct {
	Type       uint8 // the five, Foo, ""
	Status     uint8 // True, False, Unknown, ""
	Reason     uint8
	Generation uint8 // observedGeneration 0-3
	Time       uint8 // fuzzTimes
}

var (
	fuzzBase         = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	fuzzImages       = []string{"app:v1", "app:v2", "app:broken"}
	fuzzVersions     = []string{"1", "2", "2.0", "3", "x"}
	fuzzJobVersions  = []string{"1", "2", "2.0", "x", "3", ""}
	fuzzAttempts     = []string{"1", "2", "3", "0", "01", "-1", "x"}
	fuzzTokens       = []string{"", "t1", "t2"}
	fuzzShardNames   = []string{"us-east", "eu-west", "ap-south", "mars", ""}
	fuzzAges         = []time.Duration{-time.Hour, -10 * time.Minute, -time.Minute, 0, time.Hour, -30 * time.Second, -365 * 24 * time.Hour}
	fuzzSurges       = []*intstr.IntOrString{nil, ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromString("50%")), ptr.To(intstr.FromString("200%")), ptr.To(intstr.FromString("x"))}
	fuzzUnavailables = []*intstr.IntOrString{nil, ptr.To(intstr.FromInt32(0)), ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromString("100%")), ptr.To(intstr.FromInt32(5)), ptr.To(intstr.FromString("33%"))}
	fuzzSteps        = []routingv1alpha1.ShardStep{routingv1alpha1.ShardStepPending, routingv1alpha1.ShardStepProgressing, routingv1alpha1.ShardStepBaking,
		routingv1alpha1.ShardStepPromoted, routingv1alpha1.ShardStepFailed, routingv1alpha1.ShardStepRollingBack, routingv1alpha1.ShardStepRolledBack, "", "Bogus"}
	fuzzServedOrders = []string{"1", "2", "3", "0", "-1", "", "x", "1000000000000", "1000000000001", "99999999999999999999", " 2"}
	fuzzMessages     = []string{"", "boom", "%s %d %!x(MISSING) {{.}}", "\x00\xff\xfe invalid utf-8", string(bytes.Repeat([]byte("long "), 2000)),
		`{"schemagate":"schema-report/v1","version":"2","dirty":false,"tool":"t","time":"2026-11-30T11:00:00Z"}`,
		`{"schemagate":"schema-report/v1","version":"1","dirty":false,"time":"2026-11-30T11:00:00Z"}`,
		`{"schemagate":"schema-report/v1","version":"3","dirty":true,"time":"2026-11-30T11:00:00Z"}`,
		`{"schemagate":"schema-report/v1","version":"99","time":"2026-11-30T11:00:00Z"}`,
		`{"schemagate":"schema-report/v2","version":"2","time":"2026-11-30T11:00:00Z"}`}
)

// fuzzTime: nil, 5 s ago, 100 s ago, in an hour, the zero time, a year ago.
func fuzzTime(b uint8) *metav1.Time {
	switch b % 6 {
	case 0:
		return nil
	case 1:
		return &metav1.Time{Time: fuzzBase.Add(-5 * time.Second)}
	case 2:
		return &metav1.Time{Time: fuzzBase.Add(-100 * time.Second)}
	case 3:
		return &metav1.Time{Time: fuzzBase.Add(time.Hour)}
	case 4:
		return &metav1.Time{}
	default:
		return &metav1.Time{Time: fuzzBase.Add(-365 * 24 * time.Hour)}
	}
}

func pick[T any](b uint8, xs []T) T { return xs[int(b)%len(xs)] }

// fuzzRevs are the revisions the generators use: the update revision and two older ones.
type fuzzRevs struct{ update, old1, old2 string }

func (r fuzzRevs) pick(b uint8) string {
	return pick(b, []string{r.update, r.old2, r.old1, "", "zzzzzzzzzz"})
}

var (
	fuzzRevisionCache sync.Map // "image|version" → revision
)

func fuzzSpecWith(image, version string) *routingv1alpha1.RoutingService {
	r := fixture()
	r.Spec.Template.Spec.Containers[0].Image = image
	r.Spec.Schema.Version = version
	return r
}

func fuzzRevision(image, version string) string {
	key := image + "|" + version
	if v, ok := fuzzRevisionCache.Load(key); ok {
		return v.(string)
	}
	r := fuzzSpecWith(image, version)
	rev := Revision(&r.Spec)
	fuzzRevisionCache.Store(key, rev)
	return rev
}

// fuzzObserved builds the planner's input from FuzzCompute's.
func fuzzObserved(statusIn, clusterIn []byte, clock int64) Observed {
	var c fuzzCluster
	decodeFuzz(clusterIn, &c)
	rsvc := fixture()
	rsvc.Spec.Paused = c.Paused
	rsvc.Spec.Template.Spec.Containers[0].Image = pick(c.Image, fuzzImages)
	rsvc.Spec.Schema.Version = pick(c.Version, fuzzVersions)
	rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = pick(c.MigrationImage, []string{"migrate:ok", "migrate:fixed"})
	rsvc.Generation = 1 + int64(c.Generation%4)
	if c.JobHistoryLimit > 0 {
		rsvc.Spec.Strategy.JobHistoryLimit = ptr.To(int32(1 + (c.JobHistoryLimit-1)%4))
	}
	if c.ShardChecks%4 > 0 {
		rsvc.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "smoke", DryRun: c.ShardChecks%4 == 2, Job: &routingv1alpha1.JobCheck{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "verify", Image: "verify:ok"}}}}}}}
		if c.ShardChecks%4 == 3 {
			rsvc.Spec.Strategy.Checks[0].When = []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenBeforeStart, routingv1alpha1.CheckWhenBake}
		}
	}
	if c.Measured%4 > 0 {
		m := routingv1alpha1.ShardCheck{Name: "ratio", DryRun: c.Measured%4 == 2,
			Prometheus: &routingv1alpha1.PrometheusCheck{Address: "http://127.0.0.1:9090", Query: "sum(x)", SuccessCondition: pick(c.Condition, []string{"result < 0.01", "result <", "result + 1.0", "value < 1.0"})},
			Measurement: routingv1alpha1.Measurement{Count: ptr.To(int32(c.Measured>>2%4) - 1), FailureLimit: ptr.To(int32(c.Measured >> 4 % 2)),
				InconclusiveLimit: ptr.To(int32(c.Measured >> 5 % 2)), IntervalSeconds: ptr.To(int32(c.Measured>>6) - 1)}}
		if c.Measured%4 == 3 {
			m.When = []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenBeforeStart, routingv1alpha1.CheckWhenBake}
		}
		rsvc.Spec.Strategy.Checks = append(rsvc.Spec.Strategy.Checks, m)
	}
	rsvc.Spec.Schema.Evidence = pick(c.Evidence, []routingv1alpha1.SchemaEvidence{"", routingv1alpha1.SchemaEvidenceReport, routingv1alpha1.SchemaEvidenceJobSuccess})
	if c.Check%4 > 0 {
		rsvc.Spec.Schema.Check = &routingv1alpha1.SchemaCheckSpec{AfterMigration: c.Check%4 == 2, BeforeEachShard: c.Check%4 == 3,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "check", Image: "check:ok"}}}}}
	}
	rsvc.Spec.Strategy.FailurePolicy = pick(c.FailurePolicy, []routingv1alpha1.FailurePolicy{routingv1alpha1.FailurePolicyRollback, routingv1alpha1.FailurePolicyHalt, ""})
	rsvc.Spec.Strategy.MaxSurge = pick(c.MaxSurge, fuzzSurges)
	rsvc.Spec.Strategy.MaxUnavailable = pick(c.MaxUnavailable, fuzzUnavailables)
	for i := range rsvc.Spec.Shards {
		rsvc.Spec.Shards[i].Replicas = pick(c.ShardReplicas[i], []int32{3, 0, 1, 5})
	}
	annotations := map[string]string{}
	for key, b := range map[string]uint8{routingv1alpha1.AnnotationRetry: c.Retry, routingv1alpha1.AnnotationAbort: c.Abort, routingv1alpha1.AnnotationPromote: c.Promote} {
		if token := pick(b, fuzzTokens); token != "" {
			annotations[key] = token
		}
	}
	if len(annotations) > 0 {
		rsvc.Annotations = annotations
	}

	switch v := rsvc.Spec.Schema.Version; c.Compat % 6 {
	case 1:
		rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: v}
	case 2:
		rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "1", Max: v}
	case 3:
		rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "1"}
	case 4:
		rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "0", Max: "2"}
	case 5:
		rsvc.Spec.Schema.AllowBreakingMigration = true
	}
	if c.PodHealth >= 128 {
		// A check at PodReady (dryRun with bit 6): the ReplicaSets built after this carry its gate.
		rsvc.Spec.Strategy.Checks = append(rsvc.Spec.Strategy.Checks, routingv1alpha1.ShardCheck{Name: "resolves", DryRun: c.PodHealth&64 != 0,
			When: []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenPodReady}, HTTP: &routingv1alpha1.HTTPCheck{URL: "http://{{podIP}}:8080/lookup"},
			Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(2)), FailureLimit: ptr.To(int32(c.PodHealth>>3) % 3)}})
	}
	revs := fuzzRevs{update: Revision(&rsvc.Spec), old1: fuzzRevision("app:v0", "1"), old2: fuzzRevision("app:v1", "1")}
	rsvc.Status = fuzzStatusFrom(statusIn, revs, rsvc)

	seconds, millis := clock%(3*3600), (clock/(3*3600))%1000
	o := Observed{RoutingService: rsvc, Now: fuzzBase.Add(time.Duration(seconds)*time.Second + time.Duration(millis)*time.Millisecond)}

	other := rsvc.DeepCopy()
	other.UID = types.UID("uid-other")
	for s, rss := range c.Shards {
		shardName := fuzzShardNames[s]
		shard := routingv1alpha1.ShardSpec{Name: shardName, Replicas: 3}
		if s < len(rsvc.Spec.Shards) {
			shard = rsvc.Spec.Shards[s]
		}
		for i, f := range rss {
			o.ReplicaSets = append(o.ReplicaSets, fuzzReplicaSet(rsvc, other, shard, f, revs, fmt.Sprintf("%d-%d", s, i)))
		}
	}
	for i, h := range c.Handled {
		if i >= len(o.ReplicaSets) {
			break
		}
		for k, key := range []string{"schemagate.io/handled-abort", "schemagate.io/handled-retry", "schemagate.io/handled-promote"} {
			if n := int(h>>(2*k)) % 4; n > 0 {
				o.ReplicaSets[i].Annotations[key] = fuzzRecords[n-1]
			}
		}
	}
	for i := range o.ReplicaSets {
		if i < 8 && c.Adopted&(1<<i) != 0 {
			MarkAdopted(o.ReplicaSets[i])
		}
	}
	for i, f := range c.Records {
		o.ControllerRevisions = append(o.ControllerRevisions, fuzzRevisionRecord(rsvc, other, f, revs, i))
	}
	for i, r := range c.Ranges {
		if i >= len(o.ReplicaSets) {
			break
		}
		a := o.ReplicaSets[i].Annotations
		switch r % 9 {
		case 1:
			a["schemagate.io/schema-min"] = "0"
		case 2:
			a["schemagate.io/schema-max"] = "1"
		case 3:
			a["schemagate.io/schema-max"] = "9"
		case 4:
			a["schemagate.io/schema-min"] = "x"
		case 5:
			a["schemagate.io/schema-max"] = ""
		case 6:
			delete(a, "schemagate.io/schema-min")
			delete(a, "schemagate.io/schema-max")
			delete(a, "schemagate.io/schema-range-assumed")
		case 7:
			a["schemagate.io/schema-min"], a["schemagate.io/schema-max"] = "3", "2"
		case 8:
			a["schemagate.io/schema-max"] = strings.Repeat("9", 70)
		}
	}
	for i, f := range c.Jobs {
		o.Jobs = append(o.Jobs, fuzzMigrationJob(rsvc, other, f, i))
	}
	for i, f := range c.Pods {
		o.Pods = append(o.Pods, fuzzMigrationPod(rsvc, o.Jobs, f, i))
	}
	switch {
	case c.PodHealth%5 == 1:
		rsvc.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{Mode: routingv1alpha1.PodHealthOff}
	case c.PodHealth%5 > 1:
		rsvc.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{Mode: routingv1alpha1.PodHealthEnforce, MaxRestarts: ptr.To(int32(c.PodHealth%5) - 3)}
	}
	for i, f := range c.RoutingPods {
		if len(o.ReplicaSets) > 0 && i < 16 {
			o.Pods = append(o.Pods, fuzzRoutingPodOf(o.ReplicaSets[int(f.RS)%len(o.ReplicaSets)], f, i, o.Now))
		}
	}
	if c.Earlier%4 > 0 {
		e := EarlierPlace{Shard: "eu-west", Cluster: ClusterView{Name: "old", State: []routingv1alpha1.ClusterState{routingv1alpha1.ClusterReachable,
			routingv1alpha1.ClusterUnreachable, routingv1alpha1.ClusterCredentialsRefused, routingv1alpha1.ClusterReachable}[c.Earlier>>2%4]},
			RoutingPods: map[string]int32{revs.old1: int32(c.Earlier % 4)}}
		if i := int(c.Earlier >> 4); i < len(o.ReplicaSets) {
			e.ReplicaSets = []*appsv1.ReplicaSet{o.ReplicaSets[i].DeepCopy()}
		}
		o.EarlierPlaces = []EarlierPlace{e}
	}
	switch c.Conflict % 5 {
	case 1:
		o.Conflicts = []Conflict{{Kind: "Job", Name: MigrationJobName(rsvc.Name, schemaversion.Canonical(rsvc.Spec.Schema.Version), 1), Holder: "it exists with no controller"}}
	case 2:
		o.Conflicts = []Conflict{{Kind: "Job", Name: MigrationJobName(rsvc.Name, schemaversion.Canonical(rsvc.Spec.Schema.Version), 2), Holder: "it is being deleted"}}
	case 3:
		o.Conflicts = []Conflict{{Kind: "ReplicaSet", Name: ReplicaSetName(rsvc.Name, "us-east", revs.update), Holder: "it is controlled by Deployment x"}}
	case 4:
		o.Conflicts = []Conflict{{Kind: "ReplicaSet", Name: ReplicaSetName(rsvc.Name, "eu-west", revs.update), Holder: "it exists with no controller"}}
	}
	return o
}

func fuzzReplicaSet(rsvc, other *routingv1alpha1.RoutingService, shard routingv1alpha1.ShardSpec, f fuzzRS, revs fuzzRevs, id string) *appsv1.ReplicaSet {
	from, rev := rsvc, revs.update
	switch f.Revision % 5 {
	case 1:
		from, rev = fuzzSpecWith("app:v1", "1"), revs.old2
	case 2:
		from, rev = fuzzSpecWith("app:v0", "1"), revs.old1
	case 3:
		rev = "legacyrev0"
	case 4:
		from, rev = fuzzSpecWith("app:v0", "1"), ""
	}
	var replicas *int32
	if n := f.Replicas % 7; n < 6 {
		replicas = ptr.To(int32(n))
	}
	rs := NewReplicaSet(from, shard, rev, 0)
	rs.Spec.Replicas = replicas
	rs.UID = types.UID("rs-" + id)
	if f.Template%2 == 1 {
		rs.Spec.Template.Spec.Containers[0].Image = "app:evil"
	}
	if f.Name%2 == 1 {
		rs.Name = ReplicaSetName(rsvc.Name, shard.Name, "other"+id)
	}
	switch f.Owner % 5 {
	case 1:
		rs.OwnerReferences = []metav1.OwnerReference{ControllerRef(other)}
	case 2:
		rs.OwnerReferences = nil
	case 3:
		rs.DeletionTimestamp = &metav1.Time{Time: fuzzBase}
	case 4:
		rs.OwnerReferences[0].Controller = nil
	}
	rs.Generation = 1 + int64(f.Generation%3)
	rs.Status = appsv1.ReplicaSetStatus{
		Replicas:           int32(f.StatusReplicas % 7),
		AvailableReplicas:  int32(f.Available % 7),
		ReadyReplicas:      int32(f.Ready % 7),
		ObservedGeneration: rs.Generation - int64(f.Stale%2),
	}
	// Literal keys: the annotations are what a cluster may hold, whatever this schemagate reads.
	if f.ServedAt%6 != 0 {
		rs.Annotations["schemagate.io/served-at"] = []string{fuzzBase.Add(-time.Hour).Format(time.RFC3339), "yesterday",
			fuzzBase.Add(time.Hour).Format(time.RFC3339), fuzzBase.Format(time.RFC3339), ""}[f.ServedAt%6-1]
	}
	if n := int(f.ServedOrder) % (len(fuzzServedOrders) + 1); n > 0 {
		rs.Annotations["schemagate.io/served-order"] = fuzzServedOrders[n-1]
	}
	switch f.RequiresSchema % 8 {
	case 1, 2, 3, 4, 5:
		rs.Annotations[annotationSchemaVersion] = []string{"1", "2", "2.0", "x", ""}[f.RequiresSchema%8-1]
	case 6:
		delete(rs.Annotations, annotationSchemaVersion)
	case 7:
		rs.Annotations[annotationSchemaVersion] = "3"
	}
	rs.CreationTimestamp = metav1.Time{Time: fuzzBase.Add(pick(f.Created, fuzzAges))}
	return rs
}

func fuzzRevisionRecord(rsvc, other *routingv1alpha1.RoutingService, f fuzzRecord, revs fuzzRevs, i int) *appsv1.ControllerRevision {
	rev := revs.pick(f.Revision)
	from := rsvc
	switch rev {
	case revs.old2:
		from = fuzzSpecWith("app:v1", "1")
	case revs.old1:
		from = fuzzSpecWith("app:v0", "1")
	}
	from = from.DeepCopy()
	from.Name, from.Namespace, from.UID = rsvc.Name, rsvc.Namespace, rsvc.UID
	switch f.Data % 5 {
	case 1, 4:
		from.Spec.Template.Spec.Containers[0].Image = "app:evil"
		if f.Data%5 == 4 {
			rev = Revision(&from.Spec)
		}
	}
	cr := NewRevisionRecord(from, rev, int64(i))
	switch f.Data % 5 {
	case 2:
		cr.Data.Raw = []byte(`{"template":`)
	case 3:
		cr.Data.Raw = nil
	}
	cr.UID = types.UID(fmt.Sprintf("cr-%d", i))
	switch f.Owner % 4 {
	case 1:
		cr.OwnerReferences = nil
	case 2:
		cr.OwnerReferences = []metav1.OwnerReference{ControllerRef(other)}
	case 3:
		cr.DeletionTimestamp = &metav1.Time{Time: fuzzBase}
	}
	if f.Name%2 == 1 {
		cr.Name = fmt.Sprintf("%s-other%d", rsvc.Name, i)
	}
	return cr
}

// fuzzVouched reports whether a verified record in o vouches for rs (history.go's rule, computed
// again here): named and labelled for rs's revision, controlled by the RoutingService or by
// nothing, not being deleted, hashing to its revision, giving rs's template for its shard and the
// schema rs requires.
func fuzzVouched(o Observed, rs *appsv1.ReplicaSet) bool {
	rsvc, rev := o.RoutingService, rs.Labels[LabelRevision]
	for _, cr := range o.ControllerRevisions {
		if cr.Name != RevisionRecordName(rsvc.Name, rev) || cr.Labels[LabelRevision] != rev || cr.Labels[LabelName] != rsvc.Name ||
			cr.Labels[LabelComponent] != ComponentHistory || cr.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOf(cr); ref != nil && ref.UID != rsvc.UID {
			continue
		}
		spec := verifyRecord(cr, rev)
		if spec == nil || !schemaversion.Equal(spec.Schema.Version, RequiredSchema(rs)) {
			continue
		}
		for _, shard := range spec.Shards {
			recorded := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Name: rsvc.Name, Namespace: rsvc.Namespace}, Spec: *spec}
			if ok, _ := TemplateMatches(NewReplicaSet(recorded, shard, rev, 0).Spec.Template, rs.Spec.Template); ok && shard.Name == rs.Labels[LabelShard] {
				return true
			}
		}
	}
	return false
}

// fuzzIsUpdate reports whether rs runs the update revision's template for its shard and its
// schema (matchTemplates checks those against the spec itself).
func fuzzIsUpdate(rsvc *routingv1alpha1.RoutingService, rs *appsv1.ReplicaSet) bool {
	for _, shard := range rsvc.Spec.Shards {
		if shard.Name == rs.Labels[LabelShard] {
			ok, _ := TemplateMatches(NewReplicaSet(rsvc, shard, rs.Labels[LabelRevision], 0).Spec.Template, rs.Spec.Template)
			return ok && schemaversion.Equal(RequiredSchema(rs), rsvc.Spec.Schema.Version)
		}
	}
	return false
}

func fuzzMigrationJob(rsvc, other *routingv1alpha1.RoutingService, f fuzzJob, i int) *batchv1.Job {
	version, attemptLabel := pick(f.Version, fuzzJobVersions), pick(f.Attempt, fuzzAttempts)
	attempt, err := strconv.Atoi(attemptLabel)
	if err != nil {
		attempt = 1
	}
	j := NewMigrationJob(rsvc, version, int32(attempt))
	j.Labels[LabelAttempt] = attemptLabel
	j.UID = types.UID(fmt.Sprintf("job-%d", i))
	switch f.Name % 4 {
	case 1:
		j.Name = MigrationJobName(rsvc.Name, schemaversion.Canonical(version), int32(attempt))
	case 2:
		j.Name = MigrationJobName(rsvc.Name, version, int32(attempt+1))
	case 3:
		j.Name = fmt.Sprintf("%s-schema-forged-%d", rsvc.Name, i)
	}
	switch f.Component % 5 {
	case 4:
		// A shard check of us-east ("smoke") for the update revision.
		update := Revision(&rsvc.Spec)
		j.Labels = map[string]string{LabelManagedBy: ManagedByValue, LabelComponent: ComponentShardCheck, LabelName: rsvc.Name,
			LabelShard: "us-east", LabelCheck: "smoke", LabelRevision: update, LabelCheckWhen: string(routingv1alpha1.CheckWhenBake), LabelCheckAttempt: attemptLabel}
		j.Name = ShardCheckJobName(rsvc.Name, "us-east", "smoke", update, routingv1alpha1.CheckWhenBake, int32(attempt))
	case 1:
		j.Labels[LabelComponent] = ComponentRouting
	case 2:
		delete(j.Labels, LabelComponent)
	case 3:
		j.Labels[LabelComponent] = ComponentCheck
		if f.Name%4 < 2 {
			j.Name = CheckJobName(rsvc.Name, version, int32(attempt))
		}
		j.Annotations = map[string]string{annotationAfterAttempt: attemptLabel}
	}
	at := metav1.Time{Time: fuzzBase.Add(-time.Minute)}
	complete := func(s corev1.ConditionStatus) batchv1.JobCondition {
		return batchv1.JobCondition{Type: batchv1.JobComplete, Status: s, LastTransitionTime: at}
	}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: pick(f.Condition, []string{"BackoffLimitExceeded", "DeadlineExceeded", ""}),
		Message: pick(f.Condition, fuzzMessages)}
	switch f.Condition % 7 {
	case 1:
		j.Status.Conditions = []batchv1.JobCondition{complete(corev1.ConditionTrue)}
	case 2:
		j.Status.Conditions = []batchv1.JobCondition{failed}
	case 3:
		j.Status.Conditions = []batchv1.JobCondition{complete(corev1.ConditionFalse)}
	case 4:
		j.Status.Conditions = []batchv1.JobCondition{complete(corev1.ConditionTrue), failed}
	case 5:
		j.Status.Conditions = []batchv1.JobCondition{failed, complete(corev1.ConditionFalse)}
	case 6:
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
	}
	j.Status.Active = int32(f.Active % 3)
	switch f.Terminating % 3 {
	case 1:
		j.Status.Terminating = ptr.To(int32(0))
	case 2:
		j.Status.Terminating = ptr.To(int32(1))
	}
	switch f.Suspend % 3 {
	case 1:
		j.Spec.Suspend = ptr.To(false)
	case 2:
		j.Spec.Suspend = ptr.To(true)
		if f.Times%2 == 1 {
			// Suspended by a queue: the Job controller's Suspended condition.
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobSuspended, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.Time{Time: fuzzBase.Add(pick(f.Created, fuzzAges))}})
		}
	}
	if f.Name%3 == 2 {
		// A schema report recorded on the Job (by schemagate after its migration container
		// terminated, or by hand).
		j.Annotations[AnnotationSchemaReport] = pick(f.Condition, fuzzMessages)
	}
	switch f.Owner % 4 {
	case 1:
		j.OwnerReferences = []metav1.OwnerReference{ControllerRef(other)}
	case 2:
		j.OwnerReferences = nil
	case 3:
		j.OwnerReferences[0].Controller = nil
	}
	j.CreationTimestamp = metav1.Time{Time: fuzzBase.Add(pick(f.Created, fuzzAges))}
	switch f.Deadline % 4 {
	case 1:
		j.Spec.ActiveDeadlineSeconds = nil
	case 2:
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(1))
	case 3:
		j.Spec.ActiveDeadlineSeconds = ptr.To(int64(86400))
	}
	switch f.TemplateHash % 3 {
	case 1:
		j.Annotations[annotationMigrationTemplate] = "zzzzzzzzzz"
	case 2:
		delete(j.Annotations, annotationMigrationTemplate)
	}
	start, done := &metav1.Time{Time: j.CreationTimestamp.Add(time.Second)}, &metav1.Time{Time: fuzzBase.Add(-time.Minute)}
	switch f.Times % 4 {
	case 1:
		j.Status.StartTime, j.Status.CompletionTime = start, done
	case 2:
		j.Status.CompletionTime = done
	case 3:
		j.Status.StartTime = start
	}
	return j
}

func fuzzMigrationPod(rsvc *routingv1alpha1.RoutingService, jobs []*batchv1.Job, f fuzzPod, i int) *corev1.Pod {
	labels := map[string]string{LabelName: rsvc.Name, LabelSchemaVersion: "1", LabelAttempt: "1"}
	if len(jobs) > 0 {
		j := jobs[int(f.Job)%len(jobs)]
		labels[LabelSchemaVersion], labels[LabelAttempt] = j.Labels[LabelSchemaVersion], j.Labels[LabelAttempt]
	}
	switch f.Labels % 3 {
	case 1:
		labels[LabelName] = "rs-b"
	case 2:
		labels[LabelAttempt] = "9"
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("migrate-%d", i), Namespace: rsvc.Namespace, Labels: labels,
		CreationTimestamp: metav1.Time{Time: fuzzBase.Add(pick(f.Created, fuzzAges))}}}
	msg := pick(f.Message, fuzzMessages)
	cs := corev1.ContainerStatus{Name: "migrate"}
	switch f.State % 8 {
	case 0:
		cs.State.Running = &corev1.ContainerStateRunning{}
	case 1:
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: msg}}
	case 2:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}
	case 3:
		cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: msg}
	case 4:
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: msg}
	case 5:
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case 7:
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}}}}
	}
	if f.State%8 != 6 {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	}
	if f.Owner%2 == 1 && len(jobs) > 0 {
		j := jobs[int(f.Job)%len(jobs)]
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}
	}
	pod.Status.Phase = pick(f.Phase, []corev1.PodPhase{"", corev1.PodSucceeded, corev1.PodFailed, corev1.PodRunning})
	return pod
}

// fuzzRoutingPodOf builds routing pod i of rs from f (podhealth.go reads it).
func fuzzRoutingPodOf(rs *appsv1.ReplicaSet, f fuzzRoutingPod, i int, now time.Time) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%d", rs.Name, i), Namespace: rs.Namespace, Labels: rs.Spec.Template.Labels,
		UID: types.UID(fmt.Sprintf("pod-%d", i))}}
	switch f.Owner % 3 {
	case 0:
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	case 1:
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: "other", Controller: ptr.To(true)}}
	}
	cs := corev1.ContainerStatus{Name: "app", RestartCount: pick(f.Restarts, fuzzRestarts)}
	var finished metav1.Time
	if f.Finished%8 > 0 {
		finished = metav1.Time{Time: now.Add(pick(f.Finished-1, fuzzAges))}
	}
	switch f.Last % 5 {
	case 1:
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: finished}
	case 2:
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1, FinishedAt: finished}
	case 3:
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: finished}
	case 4:
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: strings.Repeat("\xffx", 1<<15), ExitCode: -1, FinishedAt: finished}
	}
	statuses := []corev1.ContainerStatus{cs}
	switch f.State % 5 {
	case 0:
		statuses[0].State.Running = &corev1.ContainerStateRunning{}
	case 1:
		statuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
	case 2:
		statuses[0].State.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: finished}
	case 4:
		for len(statuses) < 100 {
			statuses = append(statuses, cs)
		}
	}
	if f.Init%2 == 1 {
		pod.Status.InitContainerStatuses = statuses
	} else {
		pod.Status.ContainerStatuses = statuses
	}
	// The check at PodReady reads the readiness gate, ContainersReady and the pod IP, which a
	// hostile writer sets as it likes: times in the future, a gate False, True or unknown.
	if g := f.Init / 2; g > 0 {
		pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: routingv1alpha1.PodCheckGate}}
		pod.Status.PodIP = []string{"127.0.0.9", "", "not-an-ip", "::1"}[g%4]
		at := metav1.Time{Time: now.Add(pick(f.Finished, fuzzAges))}
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse}[g/4%2], LastTransitionTime: at})
		if gate := g / 8 % 4; gate > 0 {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: routingv1alpha1.PodCheckGate,
				Status: []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, "Unknown"}[gate-1], LastProbeTime: at, LastTransitionTime: at})
		}
	}
	return pod
}

// fuzzStatusFrom decodes the status input as JSON (with the revision placeholders), or generates
// a status from its bytes when it is not JSON of a status.
func fuzzStatusFrom(in []byte, revs fuzzRevs, rsvc *routingv1alpha1.RoutingService) routingv1alpha1.RoutingServiceStatus {
	if st, ok := fuzzStatusJSON(in, revs); ok {
		return st
	}
	var st routingv1alpha1.RoutingServiceStatus
	var g fuzzStatus
	decodeFuzz(in, &g)
	st.ObservedGeneration = int64(g.ObservedGeneration % 4)
	st.StableRevision, st.UpdateRevision = revs.pick(g.Stable), revs.pick(g.Update)
	if g.Failure {
		st.Failure = &routingv1alpha1.RolloutFailure{
			Revision: revs.pick(g.FailureRevision),
			Reason:   pick(g.FailureReason, []string{"", routingv1alpha1.ReasonProgressDeadlineExceeded, routingv1alpha1.ReasonAborted, routingv1alpha1.ReasonMigrationFailed, "Weird"}),
			Shard:    pick(g.FailureShard, fuzzShardNames),
			Message:  "restored",
		}
		if t := fuzzTime(g.FailureTime); t != nil {
			st.Failure.Time = *t
		}
	}
	st.LastHandledAbort, st.LastHandledRetry, st.LastHandledPromote = pick(g.LastAbort, fuzzTokens), pick(g.LastRetry, fuzzTokens), pick(g.LastPromote, fuzzTokens)
	st.Schema = routingv1alpha1.SchemaStatus{
		RequiredVersion:  pick(g.Required, fuzzJobVersions),
		ConfirmedVersion: pick(g.Confirmed, []string{"", "1", "2", "99", "x"}),
		MigrationJob:     pick(g.MigrationJob, []string{"", MigrationJobName(rsvc.Name, schemaversion.Canonical(rsvc.Spec.Schema.Version), 1), "forged"}),
		Attempt:          int32(g.Attempt%4) - 1,
		StartTime:        fuzzTime(g.StartTime),
		CompletionTime:   fuzzTime(g.CompletionTime),
	}
	for _, s := range g.Shards {
		st.Shards = append(st.Shards, routingv1alpha1.ShardStatus{
			Name:          pick(s.Name, fuzzShardNames),
			Step:          pick(s.Step, fuzzSteps),
			StepRevision:  revs.pick(s.StepRevision),
			StepStartTime: fuzzTime(s.StepStartTime),
			Replicas:      int32(s.Replicas % 6),
			Revision:      revs.pick(s.Revision),
		})
	}
	for _, c := range g.Conditions {
		cond := metav1.Condition{
			Type:               pick(c.Type, []string{routingv1alpha1.ConditionReady, routingv1alpha1.ConditionReconciling, routingv1alpha1.ConditionStalled, routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionAvailable, "Foo", ""}),
			Status:             pick(c.Status, []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown, ""}),
			Reason:             pick(c.Reason, []string{routingv1alpha1.ReasonSchemaConfirmed, routingv1alpha1.ReasonRolloutComplete, routingv1alpha1.ReasonMigrationFailed, ""}),
			ObservedGeneration: int64(c.Generation % 4),
			Message:            "restored",
		}
		if t := fuzzTime(c.Time); t != nil {
			cond.LastTransitionTime = *t
		}
		st.Conditions = append(st.Conditions, cond)
	}
	return st
}

// fuzzStatusJSON decodes in as a status in JSON, "@U", "@O1" and "@O2" replaced by revisions.
func fuzzStatusJSON(in []byte, revs fuzzRevs) (routingv1alpha1.RoutingServiceStatus, bool) {
	var st routingv1alpha1.RoutingServiceStatus
	doc := bytes.ReplaceAll(in, []byte("@U"), []byte(revs.update))
	doc = bytes.ReplaceAll(doc, []byte("@O1"), []byte(revs.old1))
	doc = bytes.ReplaceAll(doc, []byte("@O2"), []byte(revs.old2))
	if len(bytes.TrimSpace(in)) == 0 || json.Unmarshal(doc, &st) != nil {
		return routingv1alpha1.RoutingServiceStatus{}, false
	}
	return st, true
}

// decodeFuzz fills the generator struct v points to from b: one byte per uint8 or bool field, in
// declaration order; a slice is a count byte (modulo 4) and its elements; missing bytes are 0.
func decodeFuzz(b []byte, v any) {
	var fill func(reflect.Value)
	fill = func(v reflect.Value) {
		next := func() byte {
			if len(b) == 0 {
				return 0
			}
			c := b[0]
			b = b[1:]
			return c
		}
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				fill(v.Field(i))
			}
		case reflect.Array:
			for i := 0; i < v.Len(); i++ {
				fill(v.Index(i))
			}
		case reflect.Slice:
			n := int(next() % 4)
			v.Set(reflect.MakeSlice(v.Type(), n, n))
			for i := 0; i < n; i++ {
				fill(v.Index(i))
			}
		case reflect.Uint8:
			v.SetUint(uint64(next()))
		case reflect.Bool:
			v.SetBool(next()&1 == 1)
		default:
			panic("decodeFuzz: unsupported field kind " + v.Kind().String())
		}
	}
	fill(reflect.ValueOf(v).Elem())
}

// encodeFuzz is decodeFuzz's inverse, for writing seeds.
func encodeFuzz(v any) []byte {
	var out []byte
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Slice:
			if v.Len() > 3 {
				panic("encodeFuzz: a slice has at most 3 elements")
			}
			out = append(out, byte(v.Len()))
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Uint8:
			out = append(out, byte(v.Uint()))
		case reflect.Bool:
			if v.Bool() {
				out = append(out, 1)
			} else {
				out = append(out, 0)
			}
		default:
			panic("encodeFuzz: unsupported field kind " + v.Kind().String())
		}
	}
	walk(reflect.ValueOf(v).Elem())
	// Trailing zero bytes decode the same as missing ones.
	return bytes.TrimRight(out, "\x00")
}

func fuzzClusterSeed(edit func(*fuzzCluster)) []byte {
	var c fuzzCluster
	edit(&c)
	return encodeFuzz(&c)
}

// fuzzSeed is one named input of the committed seed corpus.
type fuzzSeed struct {
	name    string
	status  string
	cluster func(*fuzzCluster)
	clock   int64
}

// Cluster pieces for the seeds.
var (
	// v1Confirmed: attempt 1 of schema 1, ours, Complete; v1Report: its pod, Succeeded, whose
	// schema report says version 1.
	v1Confirmed = fuzzJob{Condition: 1}
	v1Report    = fuzzPod{State: 3, Message: 6, Owner: 1, Phase: 1}
	// updateServing: the update revision's ReplicaSet serving its shard, 3/3 available, served.
	updateServing = fuzzRS{Replicas: 3, StatusReplicas: 3, Available: 3, Ready: 3, ServedOrder: 2}
	// oldServing: old2 (the fixture's app:v1 on schema 1) serving its shard, served before.
	oldServing = fuzzRS{Revision: 1, Replicas: 3, StatusReplicas: 3, Available: 3, Ready: 3, ServedOrder: 1}
)

// fuzzComputeSeeds are the committed seeds (testdata/fuzz/FuzzCompute/seed-*).
func fuzzComputeSeeds() []fuzzSeed {
	confirmed := func(c *fuzzCluster) { c.Jobs, c.Pods = []fuzzJob{v1Confirmed}, []fuzzPod{v1Report} }
	usEastServing := func(c *fuzzCluster) {
		confirmed(c)
		c.Shards[0] = []fuzzRS{updateServing}
	}
	allServing := func(c *fuzzCluster) {
		confirmed(c)
		for i := 0; i < 3; i++ {
			c.Shards[i] = []fuzzRS{updateServing}
		}
	}
	v2Update := func(c *fuzzCluster) {
		// app:v2 on schema 2 while app:v1 on schema 1 serves everywhere and only schema 1 is
		// confirmed.
		c.Image, c.Version = 1, 1
		c.Jobs, c.Pods = []fuzzJob{v1Confirmed}, []fuzzPod{v1Report}
		for i := 0; i < 3; i++ {
			c.Shards[i] = []fuzzRS{oldServing}
		}
	}
	return []fuzzSeed{
		// The expand gate: v1 serves every shard and its ReplicaSets say it runs on schema 1 only
		// (Ranges 2: max 1): the migration to 2 is refused. With Compat 2, v2 runs on [1, 2]:
		// binary-first, shards roll before the migration.
		{name: "expand-refused-by-a-serving-revision", status: `{"stableRevision":"@O2"}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Ranges = []uint8{2, 2, 2}
		}},
		{name: "binary-first", status: `{"stableRevision":"@O2"}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Compat, c.Ranges = 2, []uint8{2, 2, 2}
		}},
		// The known crasher (S-19): a step that needs a start time has none, with the gate open.
		{name: "progressing-without-start-time", status: `{"shards":[{"name":"us-east","step":"Progressing","stepRevision":"@U"}]}`, cluster: confirmed},
		{name: "baking-without-start-time", status: `{"shards":[{"name":"us-east","step":"Baking","stepRevision":"@U"}]}`, cluster: usEastServing},
		{name: "rollingback-without-start-time", status: `{"failure":{"revision":"@U","reason":"ProgressDeadlineExceeded","shard":"us-east","message":"m","time":"2026-11-30T11:00:00Z"},"shards":[{"name":"us-east","step":"RollingBack","stepRevision":"@U"}]}`,
			cluster: func(c *fuzzCluster) { usEastServing(c); c.Shards[0] = append(c.Shards[0], oldServing) }},
		{name: "baking-start-in-the-future", status: `{"shards":[{"name":"us-east","step":"Baking","stepRevision":"@U","stepStartTime":"2027-01-01T00:00:00Z"}]}`, cluster: usEastServing},
		{name: "unknown-step", status: `{"shards":[{"name":"us-east","step":"Rolling","stepRevision":"@U","stepStartTime":"2026-11-30T11:59:00Z"},{"name":"eu-west","step":"","stepRevision":"@U"}]}`, cluster: usEastServing},
		{name: "failure-of-unknown-revision", status: `{"stableRevision":"@O2","failure":{"revision":"nosuchrev0","reason":"ProgressDeadlineExceeded","shard":"us-east","message":"m"}}`, cluster: v2Update},
		{name: "failure-of-update-in-unknown-shard", status: `{"stableRevision":"@O2","failure":{"revision":"@U","reason":"ProgressDeadlineExceeded","shard":"mars","message":"m"},"shards":[{"name":"mars","step":"Failed","stepRevision":"@U"}]}`, cluster: v2Update},
		{name: "failure-without-reason", status: `{"failure":{"revision":"@U","shard":"us-east"}}`, cluster: usEastServing},
		{name: "shard-not-in-spec", status: `{"shards":[{"name":"mars","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"},{"name":"us-east","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"},{"name":"us-east","step":"Baking","stepRevision":"@U"}]}`,
			cluster: func(c *fuzzCluster) { allServing(c); c.Shards[3] = []fuzzRS{updateServing} }},
		{name: "forged-schema-status", status: `{"schema":{"requiredVersion":"2","confirmedVersion":"99","migrationJob":"rs-a-schema-forged-1","attempt":1},"conditions":[{"type":"SchemaReady","status":"True","reason":"SchemaConfirmed","message":"restored","lastTransitionTime":"2026-11-30T11:00:00Z","observedGeneration":1}],"shards":[{"name":"us-east","step":"Progressing","stepRevision":"@U","stepStartTime":"2026-11-30T11:59:00Z"}]}`, cluster: v2Update},
		// Conditions of a type schemagate does not set, and a duplicate, from another generation.
		{name: "stale-and-duplicate-conditions", status: `{"conditions":[{"type":"Progressing","status":"True","reason":"Old","message":"restored","lastTransitionTime":"2026-11-30T11:00:00Z","observedGeneration":0},{"type":"Ready","status":"True","reason":"RolloutComplete","message":"restored","lastTransitionTime":"2026-11-30T11:00:00Z","observedGeneration":1},{"type":"Ready","status":"False","reason":"Old","message":"restored","lastTransitionTime":"2026-11-30T11:00:00Z","observedGeneration":0}]}`,
			cluster: func(c *fuzzCluster) { allServing(c); c.Generation = 2 }},
		{name: "foreign-evidence", status: `{}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			// Schema 2 "confirmed" by a Job of another RoutingService of the same name, schema 3 by a
			// forged name; both keep the gate shut.
			c.Jobs = []fuzzJob{v1Confirmed, {Version: 1, Condition: 1, Owner: 1}, {Version: 4, Condition: 1, Name: 3}}
		}},
		// Schema 1's migration still runs, its Job's labels edited by hand (its name no longer
		// matches them, so it is no evidence): schema 2's migration must wait for its pods.
		{name: "running-migration-with-edited-labels", status: `{}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Jobs = append(c.Jobs, fuzzJob{Attempt: 1, Name: 2, Active: 1})
		}},
		{name: "steady", status: `{"stableRevision":"@U","updateRevision":"@U","observedGeneration":1,"shards":[{"name":"us-east","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"},{"name":"eu-west","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"},{"name":"ap-south","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"}]}`, cluster: allServing},
		// us-east rolls back from a failed update; an orphan of old1 with a forged served-order
		// above old2's sits beside old2: with its template edited and no record, with a genuine
		// record (an orphan of a real revision), and with a record whose data was edited.
		{name: "planted-orphan-rollback", status: `{"stableRevision":"@O2","failure":{"revision":"@U","reason":"ProgressDeadlineExceeded","shard":"us-east","message":"m","time":"2026-11-30T11:00:00Z"},"shards":[{"name":"us-east","step":"RollingBack","stepRevision":"@U","stepStartTime":"2026-11-30T11:59:00Z"}]}`,
			cluster: func(c *fuzzCluster) {
				v2Update(c)
				c.Version = 0 // app:v2 on schema 1, confirmed a minute ago
				c.Jobs, c.Pods = []fuzzJob{{Condition: 1, Created: 2}}, []fuzzPod{{State: 3, Message: 6, Owner: 1, Phase: 1, Created: 2}}
				c.Shards[0] = []fuzzRS{{Replicas: 3, StatusReplicas: 3}, {Revision: 1, ServedOrder: 1}, {Revision: 2, Template: 1, Owner: 2, ServedOrder: 3}}
			}},
		{name: "adopted-orphan-with-record", status: `{"stableRevision":"@O2","failure":{"revision":"@U","reason":"ProgressDeadlineExceeded","shard":"us-east","message":"m","time":"2026-11-30T11:00:00Z"},"shards":[{"name":"us-east","step":"RollingBack","stepRevision":"@U","stepStartTime":"2026-11-30T11:59:00Z"}]}`,
			cluster: func(c *fuzzCluster) {
				v2Update(c)
				c.Version = 0
				c.Jobs, c.Pods = []fuzzJob{{Condition: 1, Created: 2}}, []fuzzPod{{State: 3, Message: 6, Owner: 1, Phase: 1, Created: 2}}
				c.Shards[0] = []fuzzRS{{Replicas: 3, StatusReplicas: 3}, {Revision: 1, ServedOrder: 1}, {Revision: 2, ServedOrder: 3}}
				c.Adopted = 1 << 2
				c.Records = []fuzzRecord{{Revision: 2}, {Revision: 1, Data: 1, Owner: 1}, {Revision: 0, Data: 4}}
			}},
		{name: "orphans-and-annotations", status: `{"stableRevision":"@O2"}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Retry, c.Abort, c.Promote = 1, 1, 1
			c.Shards[0] = []fuzzRS{{Revision: 1, Owner: 2, Replicas: 3, StatusReplicas: 3, Available: 3, ServedAt: 2}, {Replicas: 1, StatusReplicas: 1, ServedAt: 3, ServedOrder: 9, RequiresSchema: 6}}
			c.Shards[1] = []fuzzRS{{Revision: 3, Replicas: 2, StatusReplicas: 2, Available: 2, RequiresSchema: 2}}
			c.Pods = []fuzzPod{{State: 3, Message: 2}, {State: 1}}
		}, clock: 5400},
		{name: "migration-failed-retry-while-paused", status: `{"lastHandledRetry":"t2"}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Paused, c.Retry = true, 1
			c.Jobs = append(c.Jobs, fuzzJob{Version: 1, Condition: 2, Active: 1, Terminating: 2})
			c.Pods = []fuzzPod{{Job: 1, State: 2, Message: 2}}
		}},
		// Schema 2's Job succeeded and its pod's report says 2; a forged pod (labels only) says 99.
		{name: "report-confirms", status: `{}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Jobs = append(c.Jobs, fuzzJob{Version: 1, Condition: 1})
			c.Pods = append(c.Pods, fuzzPod{Job: 1, State: 3, Message: 5, Owner: 1, Phase: 1}, fuzzPod{Job: 1, State: 3, Message: 8, Phase: 1})
		}},
		// Steady, SchemaReady True in the stored status, the confirming Job gone, a check Job
		// configured: the check runs and the conditions hold; no scale-up.
		{name: "evidence-lost-with-check", status: `{"stableRevision":"@U","updateRevision":"@U","observedGeneration":1,"schema":{"requiredVersion":"1","confirmedVersion":"1","migrationJob":"rs-a-schema-x-1","attempt":1},"conditions":[{"type":"SchemaReady","status":"True","reason":"SchemaConfirmed","message":"restored","lastTransitionTime":"2026-11-30T11:00:00Z","observedGeneration":1}],"shards":[{"name":"us-east","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"},{"name":"eu-west","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"},{"name":"ap-south","step":"Promoted","stepRevision":"@U","stepStartTime":"2026-11-30T11:00:00Z"}]}`,
			cluster: func(c *fuzzCluster) {
				allServing(c)
				c.Jobs, c.Pods = nil, nil
				c.Check, c.ShardReplicas[0] = 1, 3
			}},
		// A check Job decided (after attempt 1) and its pod's report says dirty.
		{name: "check-says-dirty", status: `{}`, cluster: func(c *fuzzCluster) {
			v2Update(c)
			c.Check = 2
			c.Jobs = append(c.Jobs, fuzzJob{Version: 1, Condition: 1, Component: 3}, fuzzJob{Version: 1, Condition: 1})
			c.Pods = append(c.Pods, fuzzPod{Job: 1, State: 3, Message: 7, Owner: 1, Phase: 1}, fuzzPod{Job: 2, State: 3, Message: 5, Owner: 1, Phase: 1})
		}},
		{name: "generator-status", status: "\x01\x02\x03\x01\x01\x04\x01\x03\x01\x02\x03\x01\x03\x01\x00\x03\x04\x03\x00\x01\x03\x01\x02\x08\x00\x04\x05\x03\x05\x01\x02\x04\x03", cluster: usEastServing, clock: -7200},
	}
}

// TestFuzzComputeSeedCorpus checks that every committed seed runs, and with
// SCHEMAGATE_WRITE_FUZZ_SEEDS=1 (re)writes them to testdata/fuzz/FuzzCompute.
func TestFuzzComputeSeedCorpus(t *testing.T) {
	write := os.Getenv("SCHEMAGATE_WRITE_FUZZ_SEEDS") == "1"
	dir := filepath.Join("testdata", "fuzz", "FuzzCompute")
	for _, s := range fuzzComputeSeeds() {
		cluster := fuzzClusterSeed(s.cluster)
		var c fuzzCluster
		decodeFuzz(cluster, &c)
		if again := encodeFuzz(&c); !bytes.Equal(again, cluster) {
			t.Fatalf("seed %s: the cluster bytes do not round-trip: %q, %q", s.name, cluster, again)
		}
		file := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\nint64(%d)\n", s.status, cluster, s.clock)
		path := filepath.Join(dir, "seed-"+s.name)
		if write {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if got, err := os.ReadFile(path); err != nil || string(got) != file {
			t.Errorf("%s is missing or stale: run SCHEMAGATE_WRITE_FUZZ_SEEDS=1 go test ./pkg/rollout/ -run TestFuzzComputeSeedCorpus", path)
		}
		if _, ok := fuzzStatusJSON([]byte(s.status), fuzzRevs{}); !ok && s.status != "" && s.status[0] == '{' {
			t.Errorf("seed %s: its status is not JSON of a status", s.name)
		}
	}
}

// FuzzContract: the contract never starts while an older revision could still come back. From a
// cluster where the contract is due (every shard promoted and baked on v2, no v1 pod, the window
// over), the input changes ReplicaSets, pods, annotations, status, Jobs and the clock, a pair of
// bytes per change (fuzzContractChange). Whenever a plan creates the contract Job, checked from
// the observed objects alone (never from status):
//   - every shard in the spec has a ReplicaSet of the update revision, this RoutingService's,
//     asking for and having all its replicas available;
//   - every other ReplicaSet asks for 0 pods and has none, and no routing pod, terminating or not,
//     belongs to anything but an update-revision ReplicaSet;
//   - no promoted-at annotation on an update-revision ReplicaSet is less than the window ago;
//   - no migration, check or shard-check Job of this RoutingService is live; not paused;
//
// and Compute never panics.
//
//	go test ./pkg/rollout/ -run '^$' -fuzz '^FuzzContract$' -fuzztime 1m
func FuzzContract(f *testing.F) {
	f.Add([]byte(nil))
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 3})
	f.Add([]byte{5, 100, 6, 200})
	f.Add([]byte{7, 1, 8, 0, 10, 2})
	f.Add([]byte{2, 4, 3, 5, 4, 1})
	var once sync.Once
	var base Observed
	f.Fuzz(func(t *testing.T, changes []byte) {
		once.Do(func() {
			w := contractDue(t)
			base = w.observed()
		})
		o := deepCopyObserved(base)
		o.TerminatingPods, o.RoutingPods = map[types.UID]int32{}, map[types.UID]int32{}
		for i := 0; i+1 < len(changes) && i < 32; i += 2 {
			fuzzContractChange(&o, changes[i], changes[i+1])
		}
		plan := Compute(o)
		for _, a := range plan.Actions {
			_ = a.String()
			if a.Kind == CreateJob && a.Job.Labels[LabelComponent] == ComponentContract {
				if why := contractForbidden(o); why != "" {
					t.Fatalf("contract Job %s created although %s", a.Job.Name, why)
				}
			}
		}
	})
}

// fuzzContractChange applies one change, op choosing what and b how.
func fuzzContractChange(o *Observed, op, b byte) {
	rss := o.ReplicaSets
	rs := rss[int(b)%len(rss)]
	rsvc := o.RoutingService
	at := o.Now.Add(time.Duration(int(b)-128) * time.Second)
	switch op % 14 {
	case 0:
		o.TerminatingPods[rs.UID]++
	case 1:
		o.RoutingPods[pick(b, []types.UID{rs.UID, "", "other"})]++
	case 2:
		rs.Spec.Replicas = ptr.To(int32(b % 4))
	case 3:
		rs.Status.Replicas = int32(b % 4)
	case 4:
		rs.Status.AvailableReplicas = int32(b % 4)
	case 5:
		o.Now = at
	case 6:
		if rs.Annotations == nil {
			rs.Annotations = map[string]string{}
		}
		rs.Annotations[annotationPromotedAt] = pick(b/3, []string{at.UTC().Format(time.RFC3339), "junk", "", strings.Repeat("9", 80)})
	case 7:
		if n := len(rsvc.Status.Shards); n > 0 {
			ss := &rsvc.Status.Shards[int(b)%n]
			ss.Step = pick(b/3, []routingv1alpha1.ShardStep{routingv1alpha1.ShardStepPromoted, routingv1alpha1.ShardStepBaking, routingv1alpha1.ShardStepPending, "Bogus"})
			ss.StepStartTime = &metav1.Time{Time: at.Add(-time.Hour)}
		}
	case 8:
		rsvc.Status.Schema.Contract = &routingv1alpha1.ContractStatus{Version: "3", EligibleTime: &metav1.Time{Time: at.Add(-time.Hour)}}
	case 9:
		o.Jobs = append(o.Jobs, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rs-a-x-%d", b), Namespace: "default",
			Labels:          map[string]string{LabelComponent: pick(b, []string{ComponentShardCheck, ComponentMigration, ComponentCheck}), LabelName: "rs-a"},
			OwnerReferences: []metav1.OwnerReference{ControllerRef(rsvc)}}, Status: batchv1.JobStatus{Active: int32(b % 2)}})
	case 10:
		o.ReplicaSets = append(rss[:int(b)%len(rss):int(b)%len(rss)], rss[int(b)%len(rss)+1:]...)
		if len(o.ReplicaSets) == 0 {
			o.ReplicaSets = rss[:1]
		}
	case 11:
		rsvc.Spec.Paused = b%2 == 1
	case 12:
		rsvc.Spec.Shards[int(b)%len(rsvc.Spec.Shards)].Replicas = int32(b % 5)
	case 13:
		if rs.Annotations == nil {
			rs.Annotations = map[string]string{}
		}
		rs.Annotations[pick(b, []string{annotationSchemaMin, annotationSchemaMax})] = pick(b/2, []string{"2", "3", "4", "x", ""})
	}
}

// contractForbidden says why, from the observed objects alone, no contract may start ("" when it
// may).
func contractForbidden(o Observed) string {
	rsvc := o.RoutingService
	update := Revision(&rsvc.Spec)
	window := time.Duration(rollbackWindowSeconds(rsvc.Spec.Schema.Contract)) * time.Second
	if rsvc.Spec.Paused {
		return "spec.paused is true"
	}
	current := map[types.UID]bool{}
	for _, shard := range rsvc.Spec.Shards {
		var found *appsv1.ReplicaSet
		for _, rs := range o.ReplicaSets {
			if rs.Labels[LabelShard] == shard.Name && rs.Labels[LabelRevision] == update && metav1.IsControlledBy(rs, rsvc) {
				found = rs
			}
		}
		if found == nil {
			if shard.Replicas > 0 {
				return fmt.Sprintf("shard %s has no ReplicaSet of the update revision", shard.Name)
			}
			continue
		}
		current[found.UID] = true
		if shard.Replicas > 0 && (replicasOf(found) != shard.Replicas || found.Status.AvailableReplicas < shard.Replicas) {
			return fmt.Sprintf("shard %s is not fully on the update revision", shard.Name)
		}
		if t, ok := promotedAt(found); ok && o.Now.Before(t.Add(window)) {
			return fmt.Sprintf("shard %s was promoted at %s, less than the window before %s", shard.Name, t, o.Now)
		}
	}
	for _, rs := range o.ReplicaSets {
		if !current[rs.UID] && (replicasOf(rs) > 0 || rs.Status.Replicas > 0) {
			return fmt.Sprintf("ReplicaSet %s of another revision has pods", rs.Name)
		}
	}
	for uid, n := range o.TerminatingPods {
		if n > 0 && !current[uid] {
			return "a terminating pod of another ReplicaSet exists"
		}
	}
	for uid, n := range o.RoutingPods {
		if n > 0 && !current[uid] {
			return "a routing pod of another ReplicaSet exists"
		}
	}
	for _, j := range o.Jobs {
		if c := j.Labels[LabelComponent]; metav1.IsControlledBy(j, rsvc) && c != ComponentContract && live(j) {
			return fmt.Sprintf("%s Job %s is live", c, j.Name)
		}
	}
	return ""
}

func decodedFailure(v string) *routingv1alpha1.RolloutFailure {
	f, _ := decodeFailure(v)
	return f
}
