package rollout

import (
	"strings"
	"testing"
	"time"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// clustered is the fixture with every shard in its own cluster, all reachable, steady on v1.
func clustered(t *testing.T) *world {
	w := clusteredOn(t, nil)
	if c := w.condition(routingv1alpha1.ConditionClustersReachable); c == nil || c.Status != "True" {
		t.Fatalf("ClustersReachable = %+v, want True", c)
	}
	w.log = nil
	return w
}

func (w *world) cut(shard string, state routingv1alpha1.ClusterState) {
	v := w.clusters[shard]
	v.State, v.Message = state, "dial tcp: connection refused"
	w.clusters[shard] = v
}

func (w *world) restore(shard string) {
	v := w.clusters[shard]
	v.State, v.Message, v.LastContact = routingv1alpha1.ClusterReachable, "", w.now
	w.clusters[shard] = v
}

// actionsOn lists the logged actions that name a ReplicaSet of shard.
func (w *world) actionsOn(shard string) []string {
	var out []string
	for _, l := range w.log {
		if strings.Contains(l, "rs-a-"+shard+"-") {
			out = append(out, l)
		}
	}
	return out
}

// stepOf is the step status.shards says shard is at.
func (w *world) stepOf(shard string) *routingv1alpha1.ShardStatus {
	for i := range w.rsvc.Status.Shards {
		if w.rsvc.Status.Shards[i].Name == shard {
			return &w.rsvc.Status.Shards[i]
		}
	}
	return nil
}

// S-37: an unreachable cluster is not an empty cluster. eu-west's cluster goes away mid-step: no
// action names eu-west's ReplicaSets, ap-south does not start, Ready is False with the cluster
// named; past unreachableDeadlineSeconds Stalled says so and still nothing changes. When it
// returns, the step goes on, and the time away is not charged to its progress deadline (60 s).
func TestUnreachableClusterHoldsItsShardAndTheRollout(t *testing.T) {
	w := clustered(t)
	w.rsvc.Spec.Strategy.UnreachableDeadlineSeconds = new(int32(300))
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		ss := w.stepOf("eu-west")
		return ss != nil && ss.Step == routingv1alpha1.ShardStepProgressing
	})
	w.cut("eu-west", routingv1alpha1.ClusterUnreachable)
	w.log = nil
	for i := 0; i < 400; i++ { // 400 s: past the progress deadline and the unreachable deadline
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.actionsOn("eu-west"); len(got) > 0 {
		t.Fatalf("actions on the unreachable shard: %v", got)
	}
	if got := w.actionsOn("ap-south"); len(got) > 0 {
		t.Fatalf("the shard after the unreachable one started: %v", got)
	}
	ss := w.stepOf("eu-west")
	if ss.Cluster == nil || ss.Cluster.State != routingv1alpha1.ClusterUnreachable || ss.Cluster.UnreachableSince == nil || ss.Step != routingv1alpha1.ShardStepProgressing {
		t.Fatalf("eu-west status %+v (cluster %+v)", ss, ss.Cluster)
	}
	if c := w.condition(routingv1alpha1.ConditionClustersReachable); c.Status != "False" || c.Reason != routingv1alpha1.ReasonClusterUnreachable || !strings.Contains(c.Message, "c-eu-west") {
		t.Fatalf("ClustersReachable = %+v", c)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Status != "True" || c.Reason != routingv1alpha1.ReasonClusterUnreachable {
		t.Fatalf("Stalled = %+v, want True/ClusterUnreachable past unreachableDeadlineSeconds", c)
	}
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("an unreachable shard must never fail the rollout: %+v", w.rsvc.Status.Failure)
	}
	w.restore("eu-west")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("the time away was charged to the progress deadline: %+v", w.rsvc.Status.Failure)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the cluster returned: %s", got)
	}
}

// unreachablePolicy Skip: the shards after an unreachable one go on; it keeps what it serves and
// is rolled when it returns; Ready is never True meanwhile.
func TestUnreachablePolicySkipGoesOnAndRollsTheShardOnReturn(t *testing.T) {
	w := clustered(t)
	w.rsvc.Spec.Strategy.UnreachablePolicy = routingv1alpha1.UnreachableSkip
	w.cut("eu-west", routingv1alpha1.ClusterCredentialsRefused)
	w.update("app:v2", "1", "migrate:ok")
	w.run(300, func() bool {
		ss := w.stepOf("ap-south")
		return ss != nil && ss.Step == routingv1alpha1.ShardStepPromoted && ss.StepRevision == w.rsvc.Status.UpdateRevision
	})
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v2:3" {
		t.Fatalf("with eu-west skipped: %s", got)
	}
	for i := 0; i < 30; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
		if c := w.condition(routingv1alpha1.ConditionReady); c.Status == "True" {
			t.Fatalf("Ready True while a shard's cluster refuses its credentials: %+v", c)
		}
	}
	if c := w.condition(routingv1alpha1.ConditionClustersReachable); c.Reason != routingv1alpha1.ReasonCredentialsRefused {
		t.Fatalf("ClustersReachable = %+v", c)
	}
	if w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision {
		t.Fatal("v2 became stable with a shard never promoted")
	}
	w.restore("eu-west")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after eu-west returned: %s", got)
	}
}

// A shard whose cluster has no client yet (Connecting, or no entry at all) is frozen like an
// unreachable one: a first rollout creates nothing there.
func TestShardWithoutClusterClientCreatesNothing(t *testing.T) {
	w := newWorld(t)
	w.rsvc.Spec.Shards[0].Cluster = &routingv1alpha1.ShardCluster{Name: "c-us-east"}
	w.clusters = map[string]ClusterView{} // no entry for us-east
	for i := 0; i < 60; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.shardImages(); got != "" {
		t.Fatalf("pods asked for with us-east's cluster not connected: %s", got)
	}
	if c := w.condition(routingv1alpha1.ConditionClustersReachable); c == nil || c.Reason != routingv1alpha1.ReasonClusterConnecting {
		t.Fatalf("ClustersReachable = %+v", c)
	}
}

// A replica change asks nothing of a shard whose cluster does not answer (its ReplicaSets as last
// seen may be stale); it applies once the cluster returns. Cleanup and served-order marks wait too.
func TestNoStageWritesAnUnreachableShard(t *testing.T) {
	w := clustered(t)
	w.cut("eu-west", routingv1alpha1.ClusterUnreachable)
	w.rsvc.Spec.Shards[1].Replicas = 5
	w.rsvc.Generation++
	w.skipI2 = true // the shard is short of its new replicas because nothing may reach it
	for i := 0; i < 60; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.actionsOn("eu-west"); len(got) > 0 {
		t.Fatalf("actions on the unreachable shard: %v", got)
	}
	w.restore("eu-west")
	w.run(100, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.skipI2 = false
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:5 ap-south=app:v1:3" {
		t.Fatalf("after eu-west returned: %s", got)
	}
}

// A shard whose cluster does not answer is shown as it was last seen, not as empty: the reconciler
// has no fresh list of its ReplicaSets, so its counts, revision and step stay what they were (a
// promoted shard is not sent back to Pending to bake again), and Available does not call it short.
// When it answers again its counts are read afresh.
func TestUnreachableShardKeepsItsLastKnownStatus(t *testing.T) {
	w := clustered(t)
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		ss := w.stepOf("eu-west")
		return ss != nil && ss.Step == routingv1alpha1.ShardStepProgressing
	})
	before := *w.stepOf("us-east")
	if before.Step != routingv1alpha1.ShardStepPromoted || before.Available != 3 {
		t.Fatalf("us-east before the cut: %+v", before)
	}
	w.cut("us-east", routingv1alpha1.ClusterUnreachable)
	for i := 0; i < 30; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
		ss := w.stepOf("us-east")
		if ss.Step != routingv1alpha1.ShardStepPromoted || ss.StepRevision != before.StepRevision || ss.Available != before.Available ||
			ss.Ready != before.Ready || ss.Updated != before.Updated || ss.Revision != before.Revision {
			t.Fatalf("after %d s unreachable us-east reads %+v, was %+v", i, ss, before)
		}
		if c := w.condition(routingv1alpha1.ConditionAvailable); c.Status != "True" {
			t.Fatalf("Available = %+v while us-east is only unreachable", c)
		}
	}
	w.restore("us-east")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after us-east returned: %s", got)
	}
}

// A failed revision in a cluster shard is rolled back there like in any shard: only the shard it
// touched changes, back to what served it, and the rollout stalls naming the rollback.
func TestClusterShardRollsBackOnlyWhatItTouched(t *testing.T) {
	w := clustered(t)
	w.update("app:broken", "1", "migrate:ok")
	w.run(300, func() bool {
		c := w.condition(routingv1alpha1.ConditionStalled)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "rolled back")
	})
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after the rollback: %s", got)
	}
	if got := append(w.actionsOn("eu-west"), w.actionsOn("ap-south")...); len(got) > 0 {
		t.Fatalf("shards the revision never touched were changed: %v", got)
	}
	if !w.sawEvent(EventShardRolledBack) {
		t.Fatalf("no ShardRolledBack: %v", w.log)
	}
}

// The schema Jobs run with eu-west (spec.schema.runWithShard), and its cluster is away when an
// update needing schema 2 arrives: its Jobs cannot be seen, so no migration Job is created (not a
// second one either), no ReplicaSet is touched, SchemaReady is False with the cluster's reason,
// and past unreachableDeadlineSeconds Stalled says so. When it returns the migration runs once
// and the rollout completes.
func TestSchemaJobsClusterAwayHoldsTheGate(t *testing.T) {
	w := clustered(t)
	w.rsvc.Spec.Schema.RunWithShard = "eu-west"
	w.rsvc.Spec.Strategy.UnreachableDeadlineSeconds = new(int32(120))
	jobsBefore := len(w.migrationJobs())
	w.cut("eu-west", routingv1alpha1.ClusterUnreachable)
	w.update("app:v2", "2", "migrate:ok")
	for i := 0; i < 200; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if len(w.log) > 0 {
		t.Fatalf("actions or events while the schema Jobs' cluster was away: %v", w.log)
	}
	if n := len(w.migrationJobs()); n != jobsBefore {
		t.Fatalf("%d migration Jobs, %d before: one was created while its cluster was away", n, jobsBefore)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Status != "False" || c.Reason != routingv1alpha1.ReasonClusterUnreachable || !strings.Contains(c.Message, "eu-west") {
		t.Fatalf("SchemaReady = %+v", c)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Status != "True" || c.Reason != routingv1alpha1.ReasonClusterUnreachable {
		t.Fatalf("Stalled = %+v, want True past unreachableDeadlineSeconds", c)
	}
	w.restore("eu-west")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if n := len(w.migrationJobs()); n != jobsBefore+1 {
		t.Fatalf("%d migration Jobs after the return, want %d (exactly one for schema 2)", n, jobsBefore+1)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the cluster returned: %s", got)
	}
}

// Steady, then the schema Jobs' cluster goes away: SchemaReady stays True (as for lost evidence),
// nothing is written, no Job is pruned; and mid-rollout (us-east progressing, schema confirmed)
// the time away is charged to no shard's progress deadline: no failure once it returns.
func TestSchemaJobsClusterAwayChangesNothingServing(t *testing.T) {
	w := clustered(t)
	w.rsvc.Spec.Schema.RunWithShard = "ap-south"
	w.rsvc.Spec.Strategy.UnreachableDeadlineSeconds = new(int32(900))
	w.cut("ap-south", routingv1alpha1.ClusterUnreachable)
	for i := 0; i < 30; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if len(w.log) > 0 {
		t.Fatalf("steady: actions or events while the schema Jobs' cluster was away: %v", w.log)
	}
	if c := w.condition(routingv1alpha1.ConditionSchemaReady); c.Status != "True" {
		t.Fatalf("steady: SchemaReady = %+v, want it kept True", c)
	}
	w.restore("ap-south")
	w.run(100, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })

	w.update("app:v2", "2", "migrate:ok")
	w.run(200, func() bool {
		ss := w.stepOf("us-east")
		return ss != nil && ss.Step == routingv1alpha1.ShardStepProgressing
	})
	w.cut("ap-south", routingv1alpha1.ClusterUnreachable)
	w.log = nil
	for i := 0; i < 300; i++ { // five times the progress deadline
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.actionsOn("eu-west"); len(got) > 0 {
		t.Fatalf("eu-west started while the schema Jobs' cluster was away: %v", got)
	}
	w.restore("ap-south")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("the time away was charged to a progress deadline: %+v", w.rsvc.Status.Failure)
	}
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the cluster returned: %s", got)
	}
}
