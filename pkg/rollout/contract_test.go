package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// contractSpec is a contract to version with a rollback window of window seconds, run by image.
func contractSpec(version, image string, window int32) *routingv1alpha1.ContractSpec {
	return &routingv1alpha1.ContractSpec{
		Version: version,
		Migration: routingv1alpha1.MigrationSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "contract", Image: image}}}},
			ActiveDeadlineSeconds: ptr.To(int64(120)),
		},
		RollbackWindowSeconds: ptr.To(window),
	}
}

// expanded is the lifecycle's start: steady on v1 / schema 1, then v2 needing schema 2 with a
// contract to 3 (window 60 s) applied, rolled until every shard is promoted.
func expanded(t *testing.T, contractImage string) *world {
	w := steady(t)
	w.rsvc.Spec.Schema.Contract = contractSpec("3", contractImage, 60)
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool {
		return w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision && w.isTrue(routingv1alpha1.ConditionReady)
	})
	return w
}

func (w *world) contractJobs() []string { return w.jobsOf(ComponentContract) }

func (w *world) contractReason() string { return w.reason(routingv1alpha1.ConditionContractReady) }

// lastPromotion is the latest promoted-at annotation on the update revision's ReplicaSets.
func (w *world) lastPromotion() time.Time {
	var last time.Time
	for _, rs := range w.rss {
		if rs.Labels[LabelRevision] != w.rsvc.Status.UpdateRevision {
			continue
		}
		at, ok := promotedAt(rs)
		if !ok {
			w.t.Fatalf("ReplicaSet %s of the update revision has no promoted-at annotation: %v", rs.Name, rs.Annotations)
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

// S-34: the contract waits for every shard, then for the rollback window, then runs once; the
// database reports 3, status says Complete, and nothing runs again.
func TestContractWaitsForShardsThenWindowThenRunsOnce(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Schema.Contract = contractSpec("3", "contract:ok", 60)
	w.update("app:v2", "2", "migrate:ok")
	sawShards := false
	w.run(300, func() bool {
		if len(w.contractJobs()) > 0 {
			t.Fatalf("contract Job created before every shard was promoted: %v", w.shardImages())
		}
		if w.contractReason() == routingv1alpha1.ReasonWaitingForShards {
			sawShards = true
		}
		return w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if !sawShards {
		t.Fatalf("ContractReady never said WaitingForShards during the rollout")
	}
	w.reconcile()
	if r := w.contractReason(); r != routingv1alpha1.ReasonRollbackWindow {
		t.Fatalf("after the last shard: ContractReady reason %q, want RollbackWindow", r)
	}
	if p := w.rsvc.Status.Schema.Phase; p != routingv1alpha1.SchemaPhaseRollbackWindow {
		t.Fatalf("phase %q, want RollbackWindow", p)
	}
	eligible := w.lastPromotion().Add(60 * time.Second)
	if c := w.rsvc.Status.Schema.Contract; c == nil || c.EligibleTime == nil || !c.EligibleTime.Time.Equal(eligible) {
		t.Fatalf("status.schema.contract = %+v, want eligibleTime %s", c, eligible)
	}
	if !w.sawEvent(EventContractWindow) {
		t.Fatalf("no %s Event", EventContractWindow)
	}
	w.run(300, func() bool {
		if len(w.contractJobs()) > 0 && w.now.Before(eligible) {
			t.Fatalf("contract Job created at %s, before the window ended at %s", w.now, eligible)
		}
		return w.contractReason() == routingv1alpha1.ReasonContractComplete
	})
	if jobs := w.contractJobs(); len(jobs) != 1 || jobs[0] != ContractJobName("rs-a", "3", 1) {
		t.Fatalf("contract Jobs %v, want exactly attempt 1", jobs)
	}
	st := w.rsvc.Status.Schema
	if st.Phase != routingv1alpha1.SchemaPhaseComplete || st.Contract.CompletionTime == nil || st.ConfirmedVersion != "3" {
		t.Fatalf("after the contract: phase %q, contract %+v, confirmed %q", st.Phase, st.Contract, st.ConfirmedVersion)
	}
	if !w.isTrue(routingv1alpha1.ConditionReady) || !w.sawEvent(EventContractStarted) || !w.sawEvent(EventContractComplete) {
		t.Fatalf("Ready %v, Events %v", w.isTrue(routingv1alpha1.ConditionReady), w.log)
	}
	for i := 0; i < 20; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if jobs := w.contractJobs(); len(jobs) != 1 {
		t.Fatalf("the contract ran again: %v", jobs)
	}
}

// The contract Job is named and labelled like a migration Job, component contract, with the
// contract's template and SCHEMAGATE_SCHEMA_VERSION=contract.version.
func TestNewContractJob(t *testing.T) {
	rsvc := fixture()
	rsvc.Spec.Schema.Contract = contractSpec("3", "contract:ok", 60)
	j := NewContractJob(rsvc, "3", 2)
	if j.Name != "rs-a-contract-"+shortHash("3")[:8]+"-2" || j.Labels[LabelComponent] != ComponentContract || j.Labels[LabelSchemaVersion] != "3" || j.Labels[LabelAttempt] != "2" {
		t.Fatalf("contract Job %s labels %v", j.Name, j.Labels)
	}
	c := j.Spec.Template.Spec.Containers[0]
	if c.Image != "contract:ok" || len(c.Env) != 1 || c.Env[0].Name != EnvSchemaVersion || c.Env[0].Value != "3" || !metav1.IsControlledBy(j, rsvc) {
		t.Fatalf("container %+v", c)
	}
	if len(ContractJobName(strings.Repeat("a", 40), "3", 9999)) > 63 {
		t.Fatalf("name too long")
	}
}

// contractDue is an expanded world past its window: one Compute more would start the contract.
func contractDue(t *testing.T) *world {
	w := expanded(t, "contract:ok")
	w.now = w.lastPromotion().Add(61 * time.Second)
	for name, rs := range w.rss {
		rs.UID = types.UID("uid-" + name)
	}
	return w
}

func createsContract(p Plan) bool {
	for _, a := range p.Actions {
		if a.Kind == CreateJob && a.Job.Labels[LabelComponent] == ComponentContract {
			return true
		}
	}
	return false
}

func contractReadyOf(p Plan) *metav1.Condition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == routingv1alpha1.ConditionContractReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Each rule on its own, with the smallest change to a world where the contract is due.
func TestContractRules(t *testing.T) {
	oldRS := func(w *world) *appsv1.ReplicaSet {
		for _, rs := range w.rss {
			if rs.Labels[LabelShard] == "eu-west" && rs.Labels[LabelRevision] != w.rsvc.Status.UpdateRevision {
				return rs
			}
		}
		t.Fatalf("no old ReplicaSet in eu-west")
		return nil
	}
	cases := []struct {
		name   string
		change func(w *world, o *Observed)
		reason string
	}{
		{"every rule holds", func(*world, *Observed) {}, ""},
		{"a terminating v1 pod", func(w *world, o *Observed) {
			o.TerminatingPods = map[types.UID]int32{oldRS(w).UID: 1}
		}, routingv1alpha1.ReasonOlderPodsRemain},
		{"a terminating pod of a deleted ReplicaSet", func(w *world, o *Observed) {
			o.TerminatingPods = map[types.UID]int32{"gone": 1}
		}, routingv1alpha1.ReasonOlderPodsRemain},
		{"an orphaned routing pod", func(w *world, o *Observed) {
			o.RoutingPods = map[types.UID]int32{"": 1}
		}, routingv1alpha1.ReasonOlderPodsRemain},
		{"a v1 ReplicaSet whose status still counts a pod", func(w *world, o *Observed) {
			for _, rs := range o.ReplicaSets {
				if rs.Name == oldRS(w).Name {
					rs.Status.Replicas = 1
				}
			}
		}, routingv1alpha1.ReasonOlderPodsRemain},
		{"inside the window", func(w *world, o *Observed) {
			o.Now = w.lastPromotion().Add(59 * time.Second)
		}, routingv1alpha1.ReasonRollbackWindow},
		{"paused", func(w *world, o *Observed) { o.RoutingService.Spec.Paused = true }, routingv1alpha1.ReasonPaused},
		{"a shard check runs", func(w *world, o *Observed) {
			o.Jobs = append(o.Jobs, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rs-a-verify-x", Namespace: "default",
				Labels: map[string]string{LabelComponent: ComponentShardCheck, LabelName: "rs-a"}, OwnerReferences: []metav1.OwnerReference{ControllerRef(o.RoutingService)}},
				Status: batchv1.JobStatus{Active: 1}})
		}, routingv1alpha1.ReasonMigrationRunning},
		{"approval required", func(w *world, o *Observed) { o.RoutingService.Spec.Schema.Contract.RequireApproval = true }, routingv1alpha1.ReasonAwaitingApproval},
		{"approval required and given", func(w *world, o *Observed) {
			o.RoutingService.Spec.Schema.Contract.RequireApproval = true
			o.RoutingService.Annotations = map[string]string{routingv1alpha1.AnnotationApproveContract: "go"}
		}, ""},
		{"the revision's range stops below the contract", func(w *world, o *Observed) {
			for _, rs := range o.ReplicaSets {
				if rs.Labels[LabelShard] == "ap-south" && rs.Labels[LabelRevision] == w.rsvc.Status.UpdateRevision {
					rs.Annotations[annotationSchemaMax] = "2"
				}
			}
		}, routingv1alpha1.ReasonWaitingForShards},
		{"a shard is not complete", func(w *world, o *Observed) {
			for _, rs := range o.ReplicaSets {
				if rs.Labels[LabelShard] == "us-east" && rs.Labels[LabelRevision] == w.rsvc.Status.UpdateRevision {
					rs.Status.AvailableReplicas = 2
				}
			}
		}, routingv1alpha1.ReasonWaitingForShards},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := contractDue(t)
			o := w.observed()
			tc.change(w, &o)
			plan := Compute(o)
			c := contractReadyOf(plan)
			if tc.reason == "" {
				if !createsContract(plan) || c == nil || c.Reason != routingv1alpha1.ReasonContracting {
					t.Fatalf("want the contract started; ContractReady %+v, actions %v", c, plan.Actions)
				}
				return
			}
			if createsContract(plan) {
				t.Fatalf("contract started although %s", tc.name)
			}
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				t.Fatalf("ContractReady = %+v, want False %s", c, tc.reason)
			}
		})
	}
}

// The window counts from the cluster's promoted-at annotations as well as status: a status lost
// (or edited to say every shard was promoted long ago) does not end it early.
func TestContractWindowSurvivesStatusLoss(t *testing.T) {
	for _, name := range []string{"status lost", "step times edited into the past"} {
		t.Run(name, func(t *testing.T) {
			w := expanded(t, "contract:ok")
			last := w.lastPromotion()
			w.now = last.Add(30 * time.Second)
			if name == "status lost" {
				w.rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
			} else {
				for i := range w.rsvc.Status.Shards {
					w.rsvc.Status.Shards[i].StepStartTime = &metav1.Time{Time: last.Add(-time.Hour)}
				}
				w.rsvc.Status.Schema.Contract.EligibleTime = &metav1.Time{Time: last.Add(-time.Hour)}
			}
			for w.now.Before(last.Add(60 * time.Second)) {
				w.reconcile()
				if jobs := w.contractJobs(); len(jobs) != 0 {
					t.Fatalf("contract started at %s, inside the window, after the %s: %v", w.now, name, jobs)
				}
				w.tick()
				w.now = w.now.Add(time.Second)
			}
			w.run(100, func() bool { return len(w.contractJobs()) > 0 })
		})
	}
}

// A lost status write while the contract runs changes nothing: the Job's name is deterministic,
// so no second one is created, and the outcome is read from the Job.
func TestContractLostStatusWriteRunsNothingTwice(t *testing.T) {
	w := contractDue(t)
	w.loseStatus = func(Plan) bool { return true }
	w.run(50, func() bool { return len(w.contractJobs()) > 0 })
	for i := 0; i < 10; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	w.loseStatus = nil
	w.reconcile()
	if jobs := w.contractJobs(); len(jobs) != 1 || w.contractReason() != routingv1alpha1.ReasonContractComplete {
		t.Fatalf("contract Jobs %v, ContractReady %q", jobs, w.contractReason())
	}
}

// A failed contract stalls, names the Job, and runs attempt 2 only on a new retry.
func TestContractFailsThenRetryRunsAttempt2(t *testing.T) {
	w := expanded(t, "contract:fail-once")
	w.run(200, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractFailed })
	if !w.isTrue(routingv1alpha1.ConditionStalled) || w.reason(routingv1alpha1.ConditionStalled) != routingv1alpha1.ReasonContractFailed {
		t.Fatalf("Stalled = %+v", w.condition(routingv1alpha1.ConditionStalled))
	}
	for i := 0; i < 5; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Minute)
	}
	if jobs := w.contractJobs(); len(jobs) != 1 {
		t.Fatalf("a failed contract was retried by itself: %v", jobs)
	}
	w.annotate(routingv1alpha1.AnnotationRetry, "1")
	w.run(50, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractComplete })
	if jobs := w.contractJobs(); len(jobs) != 2 || w.jobs[ContractJobName("rs-a", "3", 2)] == nil {
		t.Fatalf("contract Jobs %v, want attempts 1 and 2", jobs)
	}
	if w.isTrue(routingv1alpha1.ConditionStalled) || !w.sawEvent(EventContractRetried) {
		t.Fatalf("still stalled after the retry, or no %s Event", EventContractRetried)
	}
}

// A contract Job that succeeds with a report below its version is not a contract done.
func TestContractNeedsTheDatabaseToReportIt(t *testing.T) {
	w := expanded(t, "contract:noop")
	w.run(200, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractFailed })
	if w.rsvc.Status.Schema.Phase == routingv1alpha1.SchemaPhaseComplete {
		t.Fatalf("phase %q after a contract that did nothing", w.rsvc.Status.Schema.Phase)
	}
	if c := w.condition(routingv1alpha1.ConditionContractReady); !strings.Contains(c.Message, "below 3") {
		t.Fatalf("ContractReady message %q", c.Message)
	}
}

// With requireApproval the contract waits for a new approve-contract value, which is recorded
// on the ReplicaSets once used: the same value, status lost, never approves again.
func TestContractApprovalActsOnceAndIsRecorded(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Schema.Contract = contractSpec("3", "contract:ok", 60)
	w.rsvc.Spec.Schema.Contract.RequireApproval = true
	w.update("app:v2", "2", "migrate:ok")
	// Given early, during the rollout: it is kept and acts once every other rule holds.
	w.annotate(routingv1alpha1.AnnotationApproveContract, "yes")
	w.run(400, func() bool { return len(w.contractJobs()) > 0 })
	if w.now.Before(w.lastPromotion().Add(60 * time.Second)) {
		t.Fatalf("an early approval skipped the window")
	}
	for _, rs := range w.rss {
		if rs.Annotations[annotationHandledApproveContract] != "yes" {
			t.Fatalf("ReplicaSet %s records %q", rs.Name, rs.Annotations[annotationHandledApproveContract])
		}
	}
	// Status lost, the Job gone, the same annotation: nothing approves again. The database is
	// restored from before the contract, and a person removed the record of the contract done
	// from the ReplicaSets (contracted.go), so that the contract is due again.
	w.run(50, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractComplete })
	w.deleteJob(ContractJobName("rs-a", "3", 1))
	for _, rs := range w.rss {
		delete(rs.Annotations, annotationContracted)
	}
	w.dirty, w.confirmed = false, "2"
	w.skipI1 = true
	w.rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
	w.run(100, func() bool { return w.contractReason() == routingv1alpha1.ReasonAwaitingApproval })
	if jobs := w.contractJobs(); len(jobs) != 0 {
		t.Fatalf("an approval handled before acted again: %v", jobs)
	}
}

// One lifecycle at a time: a migration never starts while a contract Job runs.
func TestExpandWaitsForRunningContract(t *testing.T) {
	w := expanded(t, "contract:hang")
	w.run(200, func() bool { return len(w.contractJobs()) > 0 })
	w.rsvc.Spec.Schema.Contract = nil
	w.update("app:v3", "4", "migrate:ok")
	for i := 0; i < 10; i++ {
		w.step(time.Second)
	}
	if r := w.schemaReason(); r != routingv1alpha1.ReasonWaitingForContract {
		t.Fatalf("SchemaReady reason %q, want WaitingForContract", r)
	}
	for name, j := range w.jobs {
		if j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "4" {
			t.Fatalf("migration %s created beside the running contract", name)
		}
	}
}

// A contract that failed stays pending: an expand the new revision cannot run beside it waits;
// one whose range holds both versions goes on.
func TestExpandWaitsForPendingContractUnlessRangeCoversBoth(t *testing.T) {
	for _, covers := range []bool{false, true} {
		w := expanded(t, "contract:fail")
		w.run(200, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractFailed })
		w.rsvc.Spec.Schema.Contract = nil
		w.update("app:v3", "2.5", "migrate:ok")
		if covers {
			w.rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "2.5", Max: "3"}
		} else {
			w.rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "2.5", Max: "2.5"}
		}
		for i := 0; i < 5; i++ {
			w.step(time.Second)
		}
		started := false
		for _, j := range w.jobs {
			started = started || (j.Labels[LabelComponent] == ComponentMigration && j.Labels[LabelSchemaVersion] == "2.5")
		}
		if started != covers {
			t.Fatalf("range covers both %v: migration to 2.5 started %v (SchemaReady %q)", covers, started, w.schemaReason())
		}
		if !covers && w.schemaReason() != routingv1alpha1.ReasonWaitingForContract {
			t.Fatalf("SchemaReady reason %q, want WaitingForContract", w.schemaReason())
		}
	}
}

// Without spec.schema.contract there is no ContractReady condition and no contract status; the
// phase still follows the rollout.
func TestNoContractNoCondition(t *testing.T) {
	w := steady(t)
	if c := w.condition(routingv1alpha1.ConditionContractReady); c != nil || w.rsvc.Status.Schema.Contract != nil {
		t.Fatalf("ContractReady %+v, contract status %+v without a contract", c, w.rsvc.Status.Schema.Contract)
	}
	if p := w.rsvc.Status.Schema.Phase; p != routingv1alpha1.SchemaPhaseComplete {
		t.Fatalf("phase %q", p)
	}
	w.update("app:v2", "2", "migrate:hang")
	w.reconcile()
	if p := w.rsvc.Status.Schema.Phase; p != routingv1alpha1.SchemaPhaseExpanding {
		t.Fatalf("phase %q while migrating", p)
	}
}

// An orphaned contract Job of this RoutingService's name (an orphan delete and re-create) is
// adopted as history, like migration Jobs: it goes with the RoutingService and is never evidence.
func TestOrphanedContractJobIsAdoptedAsHistory(t *testing.T) {
	rsvc := fixture()
	rsvc.Spec.Schema.Contract = contractSpec("3", "contract:ok", 60)
	orphan := NewContractJob(rsvc, "3", 1)
	orphan.OwnerReferences = nil
	plan := Compute(Observed{RoutingService: rsvc, Jobs: []*batchv1.Job{orphan}, Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)})
	adopted := false
	for _, a := range plan.Actions {
		adopted = adopted || (a.Kind == AdoptJob && a.Job.Name == orphan.Name)
	}
	if !adopted {
		t.Fatalf("orphaned contract Job not adopted: %v", plan.Actions)
	}
	if c := contractReadyOf(plan); c == nil || c.Reason == routingv1alpha1.ReasonContractComplete {
		t.Fatalf("an adopted Job counted as evidence: ContractReady %+v", c)
	}
}

// contractFloor, for the rollback gate: a contract that runs or ran counts, one whose report is
// gone too; one whose report says it did nothing does not.
func TestContractFloor(t *testing.T) {
	for _, tc := range []struct {
		image  string
		change func(w *world)
		want   string
	}{
		{"contract:ok", nil, "3"},
		{"contract:hang", nil, "3"},
		{"contract:noop", nil, ""},
		{"contract:fail", nil, ""},
		{"contract:ok", func(w *world) {
			for name, pod := range w.pods {
				if pod.Labels[LabelComponent] == ComponentContract {
					delete(w.pods, name)
				}
			}
		}, "3"},
	} {
		w := expanded(t, tc.image)
		w.now = w.lastPromotion().Add(61 * time.Second)
		w.run(20, func() bool { return len(w.contractJobs()) > 0 })
		w.tick()
		if tc.change != nil {
			tc.change(w)
		}
		p := newPlanner(w.observed())
		p.readings = p.readJobs()
		if got := p.contractFloor(); got != tc.want {
			t.Errorf("%s: contractFloor %q, want %q", tc.image, got, tc.want)
		}
	}
}

// A contract declared anew while an earlier one still runs waits for it: never two contracts.
func TestNewContractWaitsForRunningContract(t *testing.T) {
	w := expanded(t, "contract:hang")
	w.now = w.lastPromotion().Add(61 * time.Second)
	w.run(20, func() bool { return len(w.contractJobs()) > 0 })
	w.rsvc.Spec.Schema.Contract = contractSpec("3.5", "contract:ok", 0)
	w.rsvc.Generation++
	for i := 0; i < 5; i++ {
		w.step(time.Second)
	}
	if jobs := w.contractJobs(); len(jobs) != 1 || w.contractReason() != routingv1alpha1.ReasonMigrationRunning {
		t.Fatalf("contract Jobs %v, ContractReady %q: want only the running one, MigrationRunning", jobs, w.contractReason())
	}
}

// A contract that ran is not pending, even once its pods (and report) are gone: the next expand
// is not held for it.
func TestExpandAfterAContractWhoseReportIsGone(t *testing.T) {
	w := contractDue(t)
	w.run(50, func() bool { return w.contractReason() == routingv1alpha1.ReasonContractComplete })
	for name, pod := range w.pods {
		if pod.Labels[LabelComponent] == ComponentContract {
			delete(w.pods, name)
		}
	}
	w.rsvc.Spec.Schema.Contract = nil
	w.update("app:v3", "4", "migrate:ok")
	w.rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "4", Max: "4"}
	w.run(20, func() bool { return w.schemaReason() == routingv1alpha1.ReasonSchemaConfirmed })
}

// A contract version that is not a version (a stored object the CRD would refuse) runs nothing.
func TestContractWithInvalidVersionRunsNothing(t *testing.T) {
	for _, v := range []string{"x", "", "3.", strings.Repeat("9", 300)} {
		w := contractDue(t)
		w.rsvc.Spec.Schema.Contract.Version = v
		plan := Compute(w.observed())
		if createsContract(plan) {
			t.Fatalf("version %q: a contract Job was created", v)
		}
		if c := contractReadyOf(plan); c == nil || c.Status != metav1.ConditionFalse {
			t.Fatalf("version %q: ContractReady %+v", v, c)
		}
	}
}
