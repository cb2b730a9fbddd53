package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// S-43: a region the manager cannot see still counts. These are issue 40's item-9 tests of the
// kind "no ReplicaSets seen is not nothing serving": each failed on main at ad93a96.

// restart is what a manager restart or a new leader looks like to the planner: every spoke is
// Connecting (no client yet), so no shard in another cluster shows a ReplicaSet.
func (w *world) restart() {
	for shard, v := range w.clusters {
		v.State, v.Message = routingv1alpha1.ClusterConnecting, "no client for this cluster yet"
		w.clusters[shard] = v
	}
}

// clusteredOn is clustered with v1's range declared as c.
func clusteredOn(t *testing.T, c *routingv1alpha1.SchemaCompatibility) *world {
	w := newWorld(t)
	w.rsvc.Spec.Schema.Compatibility = c
	w.clusters = map[string]ClusterView{}
	for i := range w.rsvc.Spec.Shards {
		name := w.rsvc.Spec.Shards[i].Name
		w.rsvc.Spec.Shards[i].Cluster = &routingv1alpha1.ShardCluster{Name: "c-" + name}
		w.clusters[name] = ClusterView{Name: "c-" + name, State: routingv1alpha1.ClusterReachable, LastContact: w.now}
	}
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.log = nil
	return w
}

// A restart while a binary-first rollout is between shards: v1 ([1, 1]) still serves eu-west and
// ap-south, v2 ([1, 2]) serves us-east. With every spoke Connecting nothing is seen serving, and
// the migration to 2 must not start: v1 could not run on it. Once the spokes answer, the rollout
// goes on and the migration follows the last shard, as before the restart.
func TestRestartDuringBinaryFirstStartsNoMigration(t *testing.T) {
	w := clusteredOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = compat("1", "2")
	w.run(200, func() bool {
		ss := w.stepOf("us-east")
		return ss != nil && ss.Step == routingv1alpha1.ShardStepPromoted && ss.StepRevision == w.rsvc.Status.UpdateRevision
	})
	if n := w.migrationJobsFor("2"); n != 0 {
		t.Fatalf("the binary-first migration started before the shards rolled: %d Jobs", n)
	}
	w.restart()
	for i := 0; i < 30; i++ {
		w.step(time.Second)
	}
	if n := w.migrationJobsFor("2"); n != 0 {
		t.Fatalf("a restart (every spoke Connecting) started the migration to 2 while v1 serves eu-west and ap-south: %d Jobs; log:\n%s", n, strings.Join(w.log, "\n"))
	}
	if w.rsvc.Status.Schema.Phase != routingv1alpha1.SchemaPhaseRollingOut {
		t.Fatalf("phase %s while the spokes connect, want RollingOut as before the restart", w.rsvc.Status.Schema.Phase)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c == nil || !strings.Contains(c.Message, "c-eu-west") || !strings.Contains(c.Message, "Connecting") {
		t.Fatalf("SchemaReady must say which cluster cannot be seen: %+v", c)
	}
	for shard := range w.clusters {
		w.restore(shard)
	}
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) && w.confirmed == "2" })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the spokes answered: %s", got)
	}
}

// A restart while the expansion is refused (v1 on [1, 1] serves every shard; v2 needs 2 and does
// not run on 1): with every spoke Connecting the refusal must not turn into a migration.
func TestRestartDuringARefusedExpansionStartsNoMigration(t *testing.T) {
	w := clusteredOn(t, compat("", "1"))
	w.update("app:v2", "2", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = nil
	w.run(20, func() bool { return w.isTrue(routingv1alpha1.ConditionStalled) })
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonIncompatibleRevision {
		t.Fatalf("Stalled = %s, want IncompatibleRevision before the restart", c.Reason)
	}
	w.restart()
	for i := 0; i < 30; i++ {
		w.step(time.Second)
	}
	if n := w.migrationJobsFor("2"); n != 0 {
		t.Fatalf("a restart (every spoke Connecting) started the refused migration to 2: %d Jobs; log:\n%s", n, strings.Join(w.log, "\n"))
	}
	c := w.condition(routingv1alpha1.ConditionSchemaReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != routingv1alpha1.ReasonClusterConnecting || !strings.Contains(c.Message, "cannot be seen") {
		t.Fatalf("SchemaReady = %+v, want False ClusterConnecting saying what cannot be seen", c)
	}
	for shard := range w.clusters {
		w.restore(shard)
	}
	w.run(20, func() bool { return w.stalledWith(routingv1alpha1.ReasonIncompatibleRevision) })
	if n := w.migrationJobsFor("2"); n != 0 {
		t.Fatalf("%d migration Jobs for 2 after the spokes answered; the migration stays refused", n)
	}
}

// A new RoutingService whose spokes do not answer yet: its first migration waits until they do
// (an adopted ReplicaSet, or one left by an earlier RoutingService of the name, may serve there).
func TestFirstMigrationWaitsForItsSpokes(t *testing.T) {
	w := newWorld(t)
	w.clusters = map[string]ClusterView{}
	for i := range w.rsvc.Spec.Shards {
		name := w.rsvc.Spec.Shards[i].Name
		w.rsvc.Spec.Shards[i].Cluster = &routingv1alpha1.ShardCluster{Name: "c-" + name}
		w.clusters[name] = ClusterView{Name: "c-" + name, State: routingv1alpha1.ClusterConnecting, Message: "no client for this cluster yet"}
	}
	w.reconcile()
	if n := w.migrationJobsFor("1"); n != 0 {
		t.Fatalf("the migration started while no spoke could be seen: %d Jobs", n)
	}
	for shard := range w.clusters {
		w.restore(shard)
	}
	w.run(200, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
}

// The revision record of a revision whose only ReplicaSet is in a cluster that does not answer is
// kept: "no ReplicaSet of revision v1 is left" cannot be read from a place that is not seen.
// eu-west takes v2 and is then cut off (unreachablePolicy Skip); v3 and v4 roll the other shards,
// and revisionHistoryLimit 0 deletes their v1 ReplicaSets: v1's only ReplicaSet is eu-west's, the
// one eu-west's rollback would return to.
func TestRecordOfARevisionHeldOnlyInAnUnseenPlaceIsKept(t *testing.T) {
	w := clusteredOn(t, nil)
	w.rsvc.Spec.Strategy.RevisionHistoryLimit = new(int32(0))
	w.rsvc.Spec.Strategy.UnreachablePolicy = routingv1alpha1.UnreachableSkip
	promoted := func(shard string) func() bool {
		return func() bool {
			ss := w.stepOf(shard)
			return ss != nil && ss.Step == routingv1alpha1.ShardStepPromoted && ss.StepRevision == Revision(&w.rsvc.Spec)
		}
	}
	// One second a round (untilStep): run() jumps to the plan's requeue, which past the cut is
	// the unreachable deadline, and a shard's pods need rounds to become available.
	until := func(done func() bool) { w.untilStep(300, done) }
	v1 := w.rsvc.Status.StableRevision
	w.update("app:v2", "1", "migrate:ok")
	until(promoted("eu-west"))
	w.cut("eu-west", routingv1alpha1.ClusterUnreachable)
	until(promoted("ap-south"))
	for _, image := range []string{"app:v3", "app:v4"} {
		w.update(image, "1", "migrate:ok")
		until(promoted("ap-south"))
	}
	for i := 0; i < 20; i++ {
		w.step(time.Second)
	}
	var held []string
	for _, rs := range w.rss {
		if rs.Labels[LabelRevision] == v1 {
			held = append(held, rs.Labels[LabelShard])
		}
	}
	if strings.Join(held, ",") != "eu-west" {
		t.Fatalf("the fixture is wrong: v1's ReplicaSets are in %v, want eu-west's alone", held)
	}
	if _, ok := w.records[RevisionRecordName(w.rsvc.Name, v1)]; !ok {
		t.Fatalf("the record of v1 (%s) was deleted while eu-west, which holds v1's ReplicaSet, could not be seen; log:\n%s", v1, strings.Join(w.log, "\n"))
	}
	w.restore("eu-west")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v4:3 eu-west=app:v4:3 ap-south=app:v4:3" {
		t.Fatalf("after eu-west answered: %s", got)
	}
}
