package rollout

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// A create the API server refuses (here: a quota on ReplicaSets, with a long message holding
// invalid UTF-8) is in status as Stalled=True WriteRefused with the server's message, bounded and
// valid; nothing serving changes; and the shard's progress deadline still ends the step, as if the
// ReplicaSet had been created and never became available.
func TestRefusedCreateIsAConditionAndTheDeadlineStillRuns(t *testing.T) {
	w := steady(t)
	long := "exceeded quota: rs-quota, requested: count/replicasets.apps=1, used: count/replicasets.apps=3, limited: count/replicasets.apps=3 \xff" + strings.Repeat("x", 4096)
	w.refuse = func(a Action) *Refusal {
		if a.Kind == CreateReplicaSet {
			return &Refusal{Verb: "create", Kind: "ReplicaSet", Name: a.ReplicaSet.Name, Message: long}
		}
		return nil
	}
	w.update("app:v2", "1", "migrate:ok")
	for i := 0; i < 5; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	c := w.condition(routingv1alpha1.ConditionStalled)
	if c == nil || c.Status != "True" || c.Reason != routingv1alpha1.ReasonWriteRefused {
		t.Fatalf("a refused create must be Stalled=True WriteRefused, got %+v", c)
	}
	if !strings.Contains(c.Message, "exceeded quota: rs-quota") || !strings.Contains(c.Message, "create ReplicaSet rs-a-us-east-") {
		t.Fatalf("the condition must quote the server's message and name the object: %q", c.Message)
	}
	if len(c.Message) > 1024 || !utf8.ValidString(c.Message) {
		t.Fatalf("the quoted message must be bounded and valid UTF-8: %d bytes, valid %v", len(c.Message), utf8.ValidString(c.Message))
	}
	if !w.sawEvent(routingv1alpha1.ReasonWriteRefused) {
		t.Fatal("no WriteRefused Event")
	}
	n := 0
	for _, e := range w.events {
		if e.Reason == routingv1alpha1.ReasonWriteRefused {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d WriteRefused Events for one unchanged refusal, want 1", n)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("nothing serving may change: %s", got)
	}
	// The progress deadline (60 s) still applies to the step the refusal holds.
	for i := 0; i < 90 && !w.stalledWith(routingv1alpha1.ReasonProgressDeadlineExceeded); i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if !w.stalledWith(routingv1alpha1.ReasonProgressDeadlineExceeded) {
		t.Fatalf("the progress deadline must still end the step: Stalled %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("nothing serving may change: %s", got)
	}
	// The quota is raised: the rollout goes on with the next spec, no stale refusal left.
	w.refuse = nil
	w.update("app:v3", "1", "migrate:ok")
	if r := w.settle(400); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("after the refusal ended: %s", r)
	}
}

// A shard whose PodDisruptionBudget the API server refused gets no rolling step (its budget comes
// first), while the shards before it promote; and the refusal never holds back a rollback or a
// replica change.
func TestRefusedBudgetHoldsOnlyThatShardsSteps(t *testing.T) {
	w := steady(t)
	w.refusals = []Refusal{{Verb: "create", Kind: "PodDisruptionBudget", Name: "rs-a-eu-west", Shard: "eu-west",
		Message: `poddisruptionbudgets.policy "rs-a-eu-west" is forbidden: exceeded quota: pdb-quota`}}
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		return w.stalledWith(routingv1alpha1.ReasonWriteRefused) && w.rsvc.Status.PromotedShards == "1/3"
	})
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("eu-west's steps must wait for its budget, us-east's not: %s", got)
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "exceeded quota: pdb-quota") || !strings.Contains(c.Message, "eu-west") {
		t.Fatalf("the condition must name the shard and quote the server: %q", c.Message)
	}
	// A replica change in the held shard applies at once.
	w.rsvc.Spec.Shards[1].Replicas = 4
	w.rsvc.Generation++
	w.run(20, func() bool { return strings.Contains(w.shardImages(), "eu-west=app:v1:4") })
	// An abort rolls us-east back, though eu-west's budget is still refused.
	w.refusals = append(w.refusals, Refusal{Verb: "create", Kind: "PodDisruptionBudget", Name: "rs-a-us-east", Shard: "us-east", Message: "forbidden"})
	w.annotate(routingv1alpha1.AnnotationAbort, "1")
	w.run(60, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:4 ap-south=app:v1:3" })
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:4 ap-south=app:v1:3" {
		t.Fatalf("a rollback must not wait for budgets: %s", got)
	}
}

func TestBoundText(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"a\xffb", 10, "a\uFFFDb"},
		{strings.Repeat("é", 10), 8, "éé…"},
		{strings.Repeat("x", 20), 10, "xxxxxxx…"},
	} {
		got := boundText(tc.in, tc.limit)
		if got != tc.want || len(got) > tc.limit || !utf8.ValidString(got) {
			t.Errorf("boundText(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// A migration Job the API server refuses to create (here: the owner-reference admission plugin
// before its discovery knows RoutingService, as TestInstall meets it) never started: the status
// keeps naming the last Job that did, so no later reconcile takes the missing Job for one that
// was lost (SchemaEvidenceLost). Once the server accepts it, attempt 1 runs and the rollout
// completes.
func TestRefusedMigrationJobIsNotRecordedAsStarted(t *testing.T) {
	w := steady(t)
	refused := 0
	var refusedName string
	w.refuse = func(a Action) *Refusal {
		if a.Kind == CreateJob && a.Job.Labels[LabelComponent] == ComponentMigration {
			refused++
			refusedName = a.Job.Name
			return &Refusal{Verb: "create", Kind: "Job", Name: a.Job.Name,
				Message: `jobs.batch "` + a.Job.Name + `" is forbidden: cannot set blockOwnerDeletion in this case because cannot find RESTMapping`}
		}
		return nil
	}
	before := w.rsvc.Status.Schema
	w.update("app:v2", "2", "migrate:ok")
	for i := 0; i < 40; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if refused < 2 {
		t.Fatalf("the refused create was tried %d times in 40 s, want it tried again", refused)
	}
	if st := w.rsvc.Status.Schema; st.MigrationJob == refusedName || st.MigrationJob != before.MigrationJob || st.Attempt != before.Attempt || !st.StartTime.Equal(before.StartTime) {
		t.Fatalf("a refused migration Job %s is recorded as started: job %q, attempt %d, start %v (before: %q, %d, %v)",
			refusedName, st.MigrationJob, st.Attempt, st.StartTime, before.MigrationJob, before.Attempt, before.StartTime)
	}
	if !w.stalledWith(routingv1alpha1.ReasonWriteRefused) {
		t.Fatalf("Stalled %+v, want WriteRefused", w.condition(routingv1alpha1.ConditionStalled))
	}
	w.refuse = nil
	if r := w.settle(400); r != routingv1alpha1.ReasonRolloutComplete {
		t.Fatalf("after the refusal ended: %s", r)
	}
	if st := w.rsvc.Status.Schema; st.Attempt != 1 {
		t.Fatalf("the first Job created is attempt %d, want 1", st.Attempt)
	}
}

// The same for the contract: a contract Job the API server refuses is not recorded as started,
// the refusal is in status, and once the server accepts it attempt 1 runs to completion.
func TestRefusedContractJobIsNotRecordedAsStarted(t *testing.T) {
	w := expanded(t, "contract:ok")
	refused := 0
	w.refuse = func(a Action) *Refusal {
		if a.Kind == CreateJob && a.Job.Labels[LabelComponent] == ComponentContract {
			refused++
			return &Refusal{Verb: "create", Kind: "Job", Name: a.Job.Name, Message: `jobs.batch "` + a.Job.Name + `" is forbidden: exceeded quota`}
		}
		return nil
	}
	w.run(300, func() bool { return refused >= 3 })
	if cs := w.rsvc.Status.Schema.Contract; cs != nil && (cs.Job != "" || cs.Attempt != 0 || cs.StartTime != nil) {
		t.Fatalf("a refused contract Job is recorded as started: %+v", cs)
	}
	if !w.stalledWith(routingv1alpha1.ReasonWriteRefused) {
		t.Fatalf("Stalled %+v, want WriteRefused", w.condition(routingv1alpha1.ConditionStalled))
	}
	w.refuse = nil
	w.run(100, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractComplete })
	if jobs := w.contractJobs(); len(jobs) != 1 || w.jobs[ContractJobName("rs-a", "3", 1)] == nil {
		t.Fatalf("contract Jobs %v, want attempt 1 only", jobs)
	}
}
