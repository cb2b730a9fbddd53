package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemarange"
)

// The schema lifecycle (issue 21): ranges, the expand gate, binary-first rollouts, rollback
// safety and a database that is ahead. Each test drives the simulated cluster of sim_test.go,
// whose I1 check is the range rule: a ReplicaSet asks for pods only on a schema inside its range.

func compat(min, max string) *routingv1alpha1.SchemaCompatibility {
	return &routingv1alpha1.SchemaCompatibility{Min: min, Max: max}
}

// steadyOn brings the fixture to Ready on v1 / schema 1, its revision declaring range c.
func steadyOn(t *testing.T, c *routingv1alpha1.SchemaCompatibility) *world {
	w := newWorld(t)
	w.rsvc.Spec.Schema.Compatibility = c
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.log = nil
	return w
}

func (w *world) migrationJobsFor(version string) int {
	n := 0
	for _, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == version {
			n++
		}
	}
	return n
}

func rsWith(annotations map[string]string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}}
}

// Hand-edited range annotations may only narrow [required, no newest).
func TestReplicaSetRangeAnnotationsOnlyNarrow(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        schemarange.Range
	}{
		{"made by an older schemagate", map[string]string{annotationSchemaVersion: "2"}, schemarange.Range{Min: "2", Assumed: true}},
		{"declared", map[string]string{annotationSchemaVersion: "2", annotationSchemaMin: "1", annotationSchemaMax: "3"}, schemarange.Range{Min: "2", Max: "3"}},
		{"min raised", map[string]string{annotationSchemaVersion: "2", annotationSchemaMin: "3"}, schemarange.Range{Min: "3"}},
		{"min below required is ignored", map[string]string{annotationSchemaVersion: "5", annotationSchemaMin: "0"}, schemarange.Range{Min: "5"}},
		{"max lowered", map[string]string{annotationSchemaVersion: "2", annotationSchemaMax: "2"}, schemarange.Range{Min: "2", Max: "2"}},
		{"max below required runs on nothing", map[string]string{annotationSchemaVersion: "2", annotationSchemaMax: "1"}, schemarange.Range{Min: "2", Max: "1"}},
		{"min not a version", map[string]string{annotationSchemaVersion: "2", annotationSchemaMin: "x", annotationSchemaMax: "9"}, schemarange.Range{Min: "2", Max: "2"}},
		{"max not a version", map[string]string{annotationSchemaVersion: "2", annotationSchemaMax: "∞"}, schemarange.Range{Min: "2", Max: "2"}},
		{"assumed flag kept", map[string]string{annotationSchemaVersion: "2", annotationSchemaMin: "2", annotationSchemaRangeAssumed: "true"}, schemarange.Range{Min: "2", Assumed: true}},
		{"no required version", map[string]string{annotationSchemaMin: "1"}, schemarange.Range{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rangeOfReplicaSet(rsWith(tc.annotations)); got != tc.want {
				t.Fatalf("range %+v, want %+v", got, tc.want)
			}
		})
	}
	if (schemarange.Range{}).Contains("1") || (schemarange.Range{Min: "2", Max: "1"}).Contains("2") {
		t.Fatal("an unknown or empty range must contain nothing")
	}
}

func TestSpecRangeDefaultsAndRefusals(t *testing.T) {
	spec := func(v string, c *routingv1alpha1.SchemaCompatibility) *routingv1alpha1.SchemaSpec {
		return &routingv1alpha1.SchemaSpec{Version: v, Compatibility: c}
	}
	for _, tc := range []struct {
		name string
		s    *routingv1alpha1.SchemaSpec
		want schemarange.Range
		err  bool
	}{
		{"unset: lenient and assumed", spec("2", nil), schemarange.Range{Min: "2", Assumed: true}, false},
		{"min defaults to version", spec("2", compat("", "3")), schemarange.Range{Min: "2", Max: "3"}, false},
		{"declared", spec("2", compat("1", "2")), schemarange.Range{Min: "1", Max: "2"}, false},
		{"numbers, not strings", spec("10", compat("9", "10")), schemarange.Range{Min: "9", Max: "10"}, false},
		{"min above version", spec("2", compat("3", "")), schemarange.Range{}, true},
		{"max below version", spec("10", compat("", "9")), schemarange.Range{}, true},
		{"not a version", spec("2", compat("1.x", "")), schemarange.Range{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := schemarange.FromSpec(tc.s)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("FromSpec = %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestNewReplicaSetRecordsTheRange(t *testing.T) {
	rsvc := fixture()
	rs := NewReplicaSet(rsvc, rsvc.Spec.Shards[0], "r", 1)
	if rs.Annotations[annotationSchemaMin] != "1" || rs.Annotations[annotationSchemaRangeAssumed] != "true" || rs.Annotations[annotationSchemaMax] != "" {
		t.Fatalf("undeclared range recorded as %v", rs.Annotations)
	}
	rsvc.Spec.Schema.Compatibility = compat("", "2")
	rs = NewReplicaSet(rsvc, rsvc.Spec.Shards[0], "r", 1)
	if rs.Annotations[annotationSchemaMin] != "1" || rs.Annotations[annotationSchemaMax] != "2" || rs.Annotations[annotationSchemaRangeAssumed] != "" ||
		RequiredSchema(rs) != "1" {
		t.Fatalf("declared range recorded as %v", rs.Annotations)
	}
}

// A declared range is part of the revision; an undeclared one changes no revision (the golden
// revisions of revision_test.go pin that).
func TestRevisionIncludesTheRangeOnlyWhenDeclared(t *testing.T) {
	spec := fixture().Spec
	before := Revision(&spec)
	spec.Schema.Compatibility = compat("", "2")
	declared := Revision(&spec)
	spec.Schema.Compatibility = compat("", "3")
	if declared == before || Revision(&spec) == declared {
		t.Fatalf("revisions %s, %s, %s: a declared range must name its own revision", before, declared, Revision(&spec))
	}
}

// Expand gate: v1 runs on schema 1 only; a migration to 2 that v2 cannot run without is refused
// before its Job exists, naming v1, its range and its shards.
func TestExpandGateRefusesAMigrationAServingRevisionCannotRunOn(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	v1 := w.rsvc.Status.StableRevision
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	c := w.condition(routingv1alpha1.ConditionStalled)
	if c.Reason != routingv1alpha1.ReasonIncompatibleRevision || !strings.Contains(c.Message, "revision "+v1+" (runs on [1, 1]) serves us-east, eu-west, ap-south") {
		t.Fatalf("Stalled = %s: %s", c.Reason, c.Message)
	}
	if s := w.condition(routingv1alpha1.ConditionSchemaReady); s.Status != metav1.ConditionFalse || s.Reason != routingv1alpha1.ReasonIncompatibleRevision {
		t.Fatalf("SchemaReady = %+v", s)
	}
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if n := w.migrationJobsFor("2"); n != 0 {
		t.Fatalf("%d migration Jobs for schema 2 exist; the refused migration must never be created", n)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("v1 must keep serving: %s", got)
	}
	if w.rsvc.Status.Schema.Phase != routingv1alpha1.SchemaPhaseExpanding {
		t.Fatalf("phase %s, want Expanding", w.rsvc.Status.Schema.Phase)
	}
}

// A revision without a declared range is assumed to run on every newer schema: the gate lets the
// migration run as before, and status says the range is assumed.
func TestExpandGateLetsAnAssumedRangeMigrate(t *testing.T) {
	w := steadyOn(t, nil)
	if rs := w.rsvc.Status.Schema.Revisions; len(rs) != 1 || !rs[0].Assumed || rs[0].Min != "1" || rs[0].Max != "" || len(rs[0].Shards) != 3 {
		t.Fatalf("status.schema.revisions %+v, want v1 on [1, no newest) assumed in 3 shards", rs)
	}
	if w.rsvc.Status.Schema.Phase != routingv1alpha1.SchemaPhaseComplete {
		t.Fatalf("phase %s, want Complete", w.rsvc.Status.Schema.Phase)
	}
	w.update("app:v2", "2", "migrate:ok")
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after rollout: %s", got)
	}
}

// allowBreakingMigration: planned downtime, chosen by a person: the migration starts, with a
// Warning Event and the broken revision in the status message.
func TestAllowBreakingMigrationStartsWithAWarning(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.skipI1 = true // v1 serves on schema 2 until replaced: the downtime the person chose
	w.update("app:v2", "2", "migrate:hang")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.rsvc.Spec.Schema.AllowBreakingMigration = true
	w.reconcile()
	if n := w.migrationJobsFor("2"); n != 1 {
		t.Fatalf("%d migration Jobs for schema 2, want 1", n)
	}
	if !w.sawEvent(EventBreakingMigration) {
		t.Fatalf("no %s Event; log:\n%s", EventBreakingMigration, strings.Join(w.log, "\n"))
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); !strings.Contains(c.Message, "allowBreakingMigration") || !strings.Contains(c.Message, "runs on [1, 1]") {
		t.Fatalf("SchemaReady message %q must say the migration breaks v1", c.Message)
	}
}

// Binary-first: v2 runs on [1, 2], so it rolls on schema 1 while v1 (on [1, 1]) serves; the
// migration to 2 starts only once no v1 pod is asked for in any shard and v1 is no rollback target.
func TestBinaryFirstRollsShardsThenMigrates(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	sawRollingOut := false
	for i := 0; i < 400 && !(w.isTrue(routingv1alpha1.ConditionReady) && w.confirmed == "2"); i++ {
		plan := w.reconcile()
		if w.rsvc.Status.Schema.Phase == routingv1alpha1.SchemaPhaseRollingOut && w.migrationJobsFor("2") == 0 {
			sawRollingOut = true
		}
		for _, a := range plan.Actions {
			if a.Kind != CreateJob || a.Job.Labels[LabelSchemaVersion] != "2" {
				continue
			}
			for _, rs := range w.rss {
				if RequiredSchema(rs) == "1" && (*rs.Spec.Replicas > 0 || rs.Status.Replicas > 0) {
					t.Fatalf("the migration to 2 starts while %s (v1) still has pods", rs.Name)
				}
			}
		}
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if !w.isTrue(routingv1alpha1.ConditionReady) || w.confirmed != "2" {
		t.Fatalf("not done: confirmed %q; log:\n%s", w.confirmed, strings.Join(w.log, "\n"))
	}
	if !sawRollingOut {
		t.Fatal("status.schema.phase never said RollingOut before the migration")
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after rollout: %s", got)
	}
	// Now v1 cannot run on the database: a rollback to it is no longer safe, and says so.
	if c := w.condition(routingv1alpha1.ConditionRollbackSafe); c == nil || c.Status != metav1.ConditionFalse || c.Reason != routingv1alpha1.ReasonRollbackUnsafe {
		t.Fatalf("RollbackSafe = %+v, want False RollbackUnsafe", c)
	}

	// A spec reverted to v1 is refused: the shards hold on v2, naming both versions.
	w.update("app:v1", "1", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("", "1")
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	c := w.condition(routingv1alpha1.ConditionStalled)
	if c.Reason != routingv1alpha1.ReasonRollbackRefused || !strings.Contains(c.Message, "schema 2") || !strings.Contains(c.Message, "[1, 1]") {
		t.Fatalf("Stalled = %s: %s", c.Reason, c.Message)
	}
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(10 * time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("the refused revert must leave v2 serving: %s", got)
	}
}

// Rollback safety: once a migration moved the database past v1's range, a failed v2 shard is not
// rolled back to v1 (RollbackRefused); RollbackSafe said so before anything failed.
func TestRollbackToARevisionThatCannotRunIsRefused(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.skipI1 = true // the breaking migration leaves v1 serving on schema 2 (planned downtime)
	if c := w.condition(routingv1alpha1.ConditionRollbackSafe); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("RollbackSafe = %+v, want True", c)
	}
	w.update("app:broken", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.rsvc.Spec.Schema.AllowBreakingMigration = true
	unsafeBeforeFailure := false
	w.run(300, func() bool {
		if c := w.condition(routingv1alpha1.ConditionRollbackSafe); c != nil && c.Status == metav1.ConditionFalse && w.rsvc.Status.Failure == nil {
			unsafeBeforeFailure = true
		}
		return w.stalledWith(routingv1alpha1.ReasonRollbackRefused)
	})
	if !unsafeBeforeFailure {
		t.Fatal("RollbackSafe was never False before the failure")
	}
	c := w.condition(routingv1alpha1.ConditionStalled)
	if !strings.Contains(c.Message, "schema 2") || !strings.Contains(c.Message, "shard us-east") || !strings.Contains(c.Message, "[1, 1]") {
		t.Fatalf("Stalled message %q must name the database's version, the shard and v1's range", c.Message)
	}
	held := w.shardImages()
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(10 * time.Second)
	}
	if got := w.shardImages(); got != held || !strings.Contains(got, "us-east=app:broken:") {
		t.Fatalf("us-east must hold as it was refused (%s), not return to v1: %s", held, got)
	}
	// Rolling forward still works.
	w.update("app:v3", "2", "migrate:ok")
	w.rsvc.Spec.Schema.AllowBreakingMigration = false
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v3:3 eu-west=app:v3:3 ap-south=app:v3:3" {
		t.Fatalf("after rolling forward: %s", got)
	}
}

// Database ahead: someone moved the database past v1's newest schema; a check reports it. Nothing
// scales up on v1 (not even a raised replica count), nothing serving is scaled down, and
// DatabaseAhead says so.
func TestDatabaseAheadScalesNothingUp(t *testing.T) {
	w := newWorld(t)
	withCheck(w, false)
	w.rsvc.Spec.Schema.Compatibility = compat("", "1")
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.skipI1 = true // the database moved under v1's feet, outside schemagate
	w.confirmed = "2"
	for name, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration {
			w.deleteJob(name)
		}
	}
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonDatabaseAhead) })
	w.skipI2 = true // replicas raised while nothing may scale up
	w.setReplicas("us-east", 5)
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(10 * time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("nothing may scale up (or down) on v1: %s", got)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonDatabaseAhead || !strings.Contains(c.Message, "schema 2") {
		t.Fatalf("Stalled = %s: %s", c.Reason, c.Message)
	}
}

// An invalid range that the API server could not refuse is refused by the manager: no Job.
func TestInvalidRangeIsRefused(t *testing.T) {
	w := newWorld(t)
	w.rsvc.Spec.Schema.Compatibility = compat("2", "")
	w.reconcile()
	if len(w.jobs) != 0 || len(w.rss) != 0 {
		t.Fatalf("an invalid range must start nothing: %d Jobs, %d ReplicaSets", len(w.jobs), len(w.rss))
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonInvalidSchemaRange || !strings.Contains(c.Message, "spec.schema.compatibility") {
		t.Fatalf("Stalled = %s: %s", c.Reason, c.Message)
	}
}

// Declaring a range makes a new revision whose ReplicaSets record it: the ReplicaSets of the same
// template that record another range are not taken over (their range would stay what they
// record), so every shard rolls to ReplicaSets that record the declared range.
func TestDeclaringARangeRollsReplicaSetsThatRecordIt(t *testing.T) {
	w := steadyOn(t, nil)
	w.rsvc.Spec.Schema.Compatibility = compat("", "2")
	w.rsvc.Generation++
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	for _, rs := range w.rss {
		if *rs.Spec.Replicas > 0 && rs.Annotations[annotationSchemaMax] != "2" {
			t.Fatalf("%s serves and records range %v", rs.Name, rs.Annotations)
		}
	}
	if revs := w.rsvc.Status.Schema.Revisions; len(revs) == 0 || revs[0].Max != "2" || revs[0].Assumed {
		t.Fatalf("status.schema.revisions %+v", revs)
	}
}

// Binary-first's last step has no watch event to wake it: the reconcile that makes the update
// revision stable asks to be called again, so that the migration then starts.
func TestBinaryFirstRequeuesWhenTheLastShardIsPromoted(t *testing.T) {
	w := steadyOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.events = nil
	for i := 0; i < 400; i++ {
		plan := w.reconcile()
		if w.sawEvent(EventRolloutComplete) {
			if plan.RequeueAfter == 0 || plan.RequeueAfter > 5*time.Second {
				t.Fatalf("the reconcile that completed the binary-first rollout asks to be called again after %s", plan.RequeueAfter)
			}
			return
		}
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	t.Fatal("the rollout never completed")
}

// Status never calls a rollback safe on an assumption: once the database is at 2, v1 (which
// declares no range, built for 1) is a rollback target that runs there only by the default, so
// RollbackSafe is Unknown (RollbackUnverified) naming it, while the rollout goes on as before.
// Had v1 declared [1, 2], the same moment is RollbackAvailable. On schema 1 (no migration yet, or
// an image-only change), v1 runs on the version it was built for: safe.
func TestRollbackIsUnverifiedOnAnAssumedRange(t *testing.T) {
	for _, c := range []struct {
		name   string
		v1     *routingv1alpha1.SchemaCompatibility
		status metav1.ConditionStatus
		reason string
	}{
		{"v1 assumed", nil, metav1.ConditionUnknown, routingv1alpha1.ReasonRollbackUnverified},
		{"v1 declares [1, 2]", compat("", "2"), metav1.ConditionTrue, routingv1alpha1.ReasonRollbackAvailable},
	} {
		w := steadyOn(t, c.v1)
		if rs := w.condition(routingv1alpha1.ConditionRollbackSafe); rs == nil || rs.Status != metav1.ConditionTrue {
			t.Fatalf("%s: steady on v1: RollbackSafe %+v", c.name, rs)
		}
		w.update("app:v2", "2", "migrate:ok")
		w.rsvc.Spec.Schema.Compatibility = nil
		w.run(200, func() bool {
			ss := w.stepOf("us-east")
			return ss != nil && ss.Step == routingv1alpha1.ShardStepBaking
		})
		rs := w.condition(routingv1alpha1.ConditionRollbackSafe)
		if rs == nil || rs.Status != c.status || rs.Reason != c.reason {
			t.Fatalf("%s: v2 baking in us-east on schema 2: RollbackSafe %+v, want %s %s", c.name, rs, c.status, c.reason)
		}
		if c.v1 == nil && !strings.Contains(rs.Message, "runs on [1, no newest) (assumed)") {
			t.Fatalf("%s: the message does not name v1's assumed range: %q", c.name, rs.Message)
		}
		warned := 0
		for _, e := range w.events {
			if e.Reason == EventAssumedSchemaRange && e.Warning {
				warned++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[c.v1 == nil]; warned != want {
			t.Fatalf("%s: %d %s Warning Events, want %d: %+v", c.name, warned, EventAssumedSchemaRange, want, w.events)
		}
	}
	w := steadyOn(t, nil)
	w.rsvc.Spec.Template.Spec.Containers[0].Image = "app:v2" // an image-only change: still schema 1
	w.run(200, func() bool {
		ss := w.stepOf("us-east")
		return ss != nil && ss.Step == routingv1alpha1.ShardStepBaking
	})
	if rs := w.condition(routingv1alpha1.ConditionRollbackSafe); rs == nil || rs.Status != metav1.ConditionTrue {
		t.Fatalf("an image-only change on schema 1: RollbackSafe %+v, want True", rs)
	}
}
