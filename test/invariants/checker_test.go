package invariants

import (
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// The I1 verdict must not depend on the order in which the checker's informers (one per kind)
// deliver their events: confirmations are dated by resourceVersion, and an event of one kind may
// arrive before an older event of another. The timeline is CI's failing one (real stack, R-2),
// as seen again in a local run: the migration pod succeeded with a clean report at rv 1738 while
// its Job was still active, schemagate read that report and created us-east's ReplicaSet with 2
// replicas at rv 1740, and the Job controller marked the Job Complete at rv 1768.

const (
	ns      = "story-test"
	rsvcUID = types.UID("rsvc-uid")
	jobUID  = types.UID("job-uid")
)

func rsvcRef(uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: routingv1alpha1.GroupVersion.String(), Kind: "RoutingService", Name: "rs-a", UID: uid, Controller: ptr.To(true)}
}

func testRSVC() *routingv1alpha1.RoutingService {
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-a", UID: rsvcUID, Generation: 1, ResourceVersion: "1700"},
		Spec:       routingv1alpha1.RoutingServiceSpec{Schema: routingv1alpha1.SchemaSpec{Version: "1"}},
	}
}

// testJob is a migration Job (or, with check, a check Job) for schema 1 at rv, Complete if complete.
func testJob(uid types.UID, name string, rv int, check, complete bool) *batchv1.Job {
	component := rollout.ComponentMigration
	if check {
		component = rollout.ComponentCheck
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, ResourceVersion: strconv.Itoa(rv),
			Labels:          map[string]string{rollout.LabelComponent: component, rollout.LabelSchemaVersion: "1"},
			OwnerReferences: []metav1.OwnerReference{rsvcRef(rsvcUID)}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "migrate"}}}}},
	}
	if complete {
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	} else {
		j.Status.Active = 1
	}
	return j
}

// testPod is the Job's pod at rv, Succeeded with a clean report of schema 1.
func testPod(job *batchv1.Job, rv int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-pod", ResourceVersion: strconv.Itoa(rv),
			Labels:          map[string]string{rollout.LabelComponent: job.Labels[rollout.LabelComponent]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "migrate"}}},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0,
				Message: `{"schemagate":"schema-report/v1","version":"1","dirty":false,"tool":"golang-migrate","time":"2026-12-02T11:04:36Z"}`}}}}},
	}
}

// testRS is us-east's ReplicaSet of a revision requiring schema 1, asking for replicas at rv.
func testRS(rv int, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-a-us-east-46x944c495", UID: "rs-uid", ResourceVersion: strconv.Itoa(rv),
			Labels:          map[string]string{rollout.LabelName: "rs-a", rollout.LabelShard: "us-east"},
			Annotations:     map[string]string{"schemagate.io/requires-schema": "1"},
			OwnerReferences: []metav1.OwnerReference{rsvcRef(rsvcUID)}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
	}
}

func verdict(t *testing.T, events ...any) []string {
	t.Helper()
	k := New()
	for _, e := range events {
		k.observe(e)
	}
	v, _ := k.Violations()
	return v
}

// Every order in which the Job's, the pod's and the ReplicaSet's informers may deliver this
// timeline gives the same verdict: no violation, since the pod's report at rv 1738 confirmed
// schema 1 before the scale-up at rv 1740.
func TestI1EarlyReportConfirmsWhateverTheDeliveryOrder(t *testing.T) {
	job := testJob(jobUID, "rs-a-schema-1", 1723, false, false)
	done := testJob(jobUID, "rs-a-schema-1", 1768, false, true)
	pod := testPod(job, 1738)
	rs := testRS(1740, 2)
	for name, order := range map[string][]any{
		"job, pod, rs, complete (etcd's order)":           {testRSVC(), job, pod, rs, done},
		"complete seen before the pod (a lagging watch)":  {testRSVC(), job, done, pod, rs},
		"rs and complete before the pod":                  {testRSVC(), job, rs, done, pod},
		"pod before the Job's first event, then complete": {testRSVC(), pod, rs, done},
	} {
		if v := verdict(t, order...); len(v) > 0 {
			t.Errorf("%s: %v", name, v)
		}
	}
}

// A confirmation is what its evidence says, not what was seen first: of two Jobs confirming
// schema 1, the earlier one counts even when its events arrive last.
func TestI1EarliestConfirmationCountsWhateverTheDeliveryOrder(t *testing.T) {
	check := testJob("check-uid", "rs-a-check-1", 1900, true, true)
	late := testPod(check, 1890)
	mig := testJob(jobUID, "rs-a-schema-1", 1723, false, true)
	early := testPod(mig, 1738)
	if v := verdict(t, testRSVC(), check, late, testRS(1850, 2), mig, early); len(v) > 0 {
		t.Errorf("the migration's report at rv 1738 confirms schema 1 before rv 1850: %v", v)
	}
}

// The checker still catches a real breach: a scale-up before any evidence, or one the evidence
// only followed, in either delivery order.
func TestI1ScaleUpBeforeTheEvidenceIsAViolation(t *testing.T) {
	job := testJob(jobUID, "rs-a-schema-1", 1723, false, false)
	done := testJob(jobUID, "rs-a-schema-1", 1768, false, true)
	pod := testPod(job, 1738)
	for name, order := range map[string][]any{
		"scaled before the report":                 {testRSVC(), job, testRS(1730, 2), pod, done},
		"scaled before the report, complete first": {testRSVC(), job, done, pod, testRS(1730, 2)},
		"no evidence at all":                       {testRSVC(), job, testRS(1730, 2)},
	} {
		if v := verdict(t, order...); len(v) != 1 {
			t.Errorf("%s: want one I1 violation, got %v", name, v)
		}
	}
	// A check Job confirms only once it is Complete (its pod alone is not evidence).
	check := testJob("check-uid", "rs-a-check-1", 1800, true, false)
	checkDone := testJob("check-uid", "rs-a-check-1", 1810, true, true)
	if v := verdict(t, testRSVC(), check, testPod(check, 1790), testRS(1805, 2), checkDone); len(v) != 1 {
		t.Errorf("scaled after a check pod's report but before its Job completed: want one I1 violation, got %v", v)
	}
}

// Under spec.schema.evidence JobSuccess a migration Job's Complete confirms its own version,
// whether its pod (with no report) is seen before or after it.
func TestI1JobSuccessWhateverTheDeliveryOrder(t *testing.T) {
	rsvc := testRSVC()
	rsvc.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
	done := testJob(jobUID, "rs-a-schema-1", 1768, false, true)
	pod := testPod(done, 1738)
	pod.Status.ContainerStatuses[0].State.Terminated.Message = ""
	for name, order := range map[string][]any{
		"pod, then complete": {rsvc, pod, done, testRS(1770, 2)},
		"complete, then pod": {rsvc, done, pod, testRS(1770, 2)},
	} {
		if v := verdict(t, order...); len(v) > 0 {
			t.Errorf("%s: %v", name, v)
		}
	}
	if v := verdict(t, rsvc, pod, testRS(1750, 2), done); len(v) != 1 {
		t.Errorf("scaled before the Job completed under JobSuccess: want one I1 violation, got %v", v)
	}
}

// A contract Job's pod that reported early confirms its version, as schemagate reads it
// (readEarly covers every Job that is not a check), whatever the delivery order.
func TestI1ContractEarlyReportConfirms(t *testing.T) {
	job := testJob(jobUID, "rs-a-contract-1", 1723, false, false)
	job.Labels[rollout.LabelComponent] = rollout.ComponentContract
	done := testJob(jobUID, "rs-a-contract-1", 1768, false, true)
	done.Labels[rollout.LabelComponent] = rollout.ComponentContract
	pod := testPod(job, 1738)
	pod.Status.Phase = corev1.PodRunning // a sidecar still runs
	if v := verdict(t, testRSVC(), job, done, pod, testRS(1740, 2)); len(v) > 0 {
		t.Errorf("the contract pod's early report at rv 1738 confirms schema 1 before rv 1740: %v", v)
	}
}

// spokeRS is testRS as it lives in a region cluster: controlled by the spoke anchor.
func spokeRS(replicas, available int32) *appsv1.ReplicaSet {
	rs := testRS(10, replicas)
	rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "rs-a-schemagate", UID: "anchor-uid", Controller: ptr.To(true)}}
	rs.Status.AvailableReplicas = available
	return rs
}

// hubAndRegion returns a hub checker that has seen rs-a (us-east 3 replicas) and, with confirmed,
// its schema-1 migration confirmed; and a region checker following it.
func hubAndRegion(confirmed bool) (*Checker, *Checker) {
	hub, region := New(), New()
	region.Follow(hub)
	rsvc := testRSVC()
	rsvc.Spec.Shards = []routingv1alpha1.ShardSpec{{Name: "us-east", Replicas: 3}}
	hub.observe(rsvc)
	if confirmed {
		job := testJob(jobUID, "rs-a-schema-1", 1723, false, true)
		hub.observe(job)
		hub.observe(testPod(job, 1738))
	}
	return hub, region
}

// Across clusters I1 is judged by the checkers' clock: a spoke ReplicaSet scaled up after the
// hub saw its schema confirmed passes; one with no confirmation, or scaled up more than
// spokeSlack before it, is a violation.
func TestSpokeI1(t *testing.T) {
	_, region := hubAndRegion(true)
	region.observe(spokeRS(2, 0))
	region.settle(true)
	if v, _ := region.Violations(); len(v) > 0 {
		t.Errorf("scaled after the confirmation: %v", v)
	}

	_, region = hubAndRegion(false)
	region.observe(spokeRS(2, 0))
	region.settle(true)
	if v, _ := region.Violations(); len(v) != 1 {
		t.Errorf("no confirmation: want one violation, got %v", v)
	}

	hub, region := hubAndRegion(true)
	for v := range hub.confirmedWall[ns+"/"+string(rsvcUID)] {
		hub.confirmedWall[ns+"/"+string(rsvcUID)][v] = time.Now().Add(2 * spokeSlack)
	}
	region.observe(spokeRS(2, 0))
	region.settle(true)
	if v, _ := region.Violations(); len(v) != 1 {
		t.Errorf("scaled up long before the hub saw the confirmation: want one violation, got %v", v)
	}

	// A ReplicaSet the RoutingService itself controls in a region is not a spoke's (not checked
	// against the hub).
	_, region = hubAndRegion(false)
	region.observe(testRS(10, 2))
	region.settle(true)
	if v, _ := region.Violations(); len(v) != 1 {
		t.Errorf("a RoutingService-controlled ReplicaSet is checked as before (no confirmation there): got %v", v)
	}
}

// I2 for a spoke shard: once it served, a dip below its floor is a violation; a new generation
// of the hub's RoutingService (more replicas asked for) starts afresh.
func TestSpokeI2(t *testing.T) {
	_, region := hubAndRegion(true)
	region.observe(spokeRS(3, 3))
	dip := spokeRS(3, 1)
	dip.ResourceVersion = "11"
	region.observe(dip)
	if v, _ := region.Violations(); len(v) != 1 {
		t.Fatalf("a dip from 3 to 1 available (floor 3): want one violation, got %v", v)
	}

	hub, region := hubAndRegion(true)
	region.observe(spokeRS(3, 3))
	bigger := testRSVC()
	bigger.Generation = 2
	bigger.Spec.Shards = []routingv1alpha1.ShardSpec{{Name: "us-east", Replicas: 5}}
	hub.observe(bigger)
	region.observe(spokeRS(5, 3))
	if v, _ := region.Violations(); len(v) > 0 {
		t.Errorf("replicas raised to 5 while 3 are available is no dip: %v", v)
	}
}

// After one of the checker's own Job or Pod watches broke (a kube-apiserver restart), the pod's
// early report may never reach it: a scale-up confirmed only by later evidence is then undecided,
// not a violation. A scale-up with no confirmation at all, or one far from any broken watch, is
// still a violation.
func TestI1EvidenceLostToABrokenWatchIsUndecided(t *testing.T) {
	job := testJob(jobUID, "rs-a-schema-1", 1723, false, false)
	done := testJob(jobUID, "rs-a-schema-1", 1768, false, true)
	run := func(broken time.Time, events ...any) (violations, undecided int) {
		k := New()
		k.WatchBroken(broken)
		for _, e := range events {
			k.observe(e)
		}
		v, _ := k.Violations()
		return len(v), len(k.undecided)
	}
	if v, u := run(time.Now().Add(-20*time.Second), testRSVC(), job, testRS(1740, 2), testPod(done, 1770), done); v != 0 || u != 1 {
		t.Errorf("confirmed after a broken watch: want 0 violations and 1 undecided, got %d and %d", v, u)
	}
	if v, u := run(time.Now().Add(-20*time.Second), testRSVC(), job, testRS(1740, 2)); v != 1 || u != 0 {
		t.Errorf("never confirmed: want 1 violation, got %d (undecided %d)", v, u)
	}
	if v, u := run(time.Now().Add(-10*time.Minute), testRSVC(), job, testRS(1740, 2), testPod(done, 1770), done); v != 1 || u != 0 {
		t.Errorf("watch broke long before: want 1 violation, got %d (undecided %d)", v, u)
	}
}
