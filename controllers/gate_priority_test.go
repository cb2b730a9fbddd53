package controllers

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

func schemaPod(component string, terminated bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{rollout.LabelName: "rs-a", rollout.LabelComponent: component}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "migrate"}, {Name: "proxy"}}}}
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if terminated {
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, {Name: "migrate", State: state}}
	return p
}

func schemaJob(finished batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j", Labels: map[string]string{rollout.LabelName: "rs-a", rollout.LabelComponent: rollout.ComponentMigration}}}
	if finished != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: finished, Status: corev1.ConditionTrue}}
	}
	return j
}

func TestEvidenceArrived(t *testing.T) {
	for _, c := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"migration container terminated", schemaPod(rollout.ComponentMigration, false), schemaPod(rollout.ComponentMigration, true), true},
		{"check container terminated", schemaPod(rollout.ComponentCheck, false), schemaPod(rollout.ComponentCheck, true), true},
		{"already terminated", schemaPod(rollout.ComponentMigration, true), schemaPod(rollout.ComponentMigration, true), false},
		{"still running", schemaPod(rollout.ComponentMigration, false), schemaPod(rollout.ComponentMigration, false), false},
		{"a routing pod", schemaPod(rollout.ComponentRouting, false), schemaPod(rollout.ComponentRouting, true), false},
		{"Job Complete", schemaJob(""), schemaJob(batchv1.JobComplete), true},
		{"Job Failed", schemaJob(""), schemaJob(batchv1.JobFailed), true},
		{"Job still Complete", schemaJob(batchv1.JobComplete), schemaJob(batchv1.JobComplete), false},
	} {
		if got := evidenceArrived(c.old, c.new); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// A RoutingService whose migration just finished is handed out before those queued earlier by
// ordinary events.
func TestGateEventsJumpTheQueue(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	for _, name := range []string{"busy-1", "busy-2", "busy-3"} {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	}
	r := &RoutingServiceReconciler{}
	r.gateEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: schemaJob(""), ObjectNew: schemaJob(batchv1.JobComplete)}, q)
	got, _ := q.Get()
	if got.Name != "rs-a" {
		t.Fatalf("first out: %s, want rs-a (its migration Job just completed)", got.Name)
	}
	// An update that carries no new evidence adds nothing.
	r.gateEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: schemaJob(batchv1.JobComplete), ObjectNew: schemaJob(batchv1.JobComplete)}, q)
	if n := q.Len(); n != 3 {
		t.Fatalf("queue length %d, want the 3 ordinary items", n)
	}
}

// The gate's priority lasts until a reconcile acts on the evidence; the requeues after that go
// back to priority 0, so a RoutingService that once opened its gate does not keep jumping the
// queue for the rest of its rollout.
func TestGatePriorityEndsWhenActedOn(t *testing.T) {
	r := &RoutingServiceReconciler{}
	key := types.NamespacedName{Namespace: "ns", Name: "rs-a"}
	if p := *r.priorityAfter(key); p != 0 {
		t.Fatalf("priority with no evidence: %d, want 0", p)
	}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	r.gateEvents().Update(context.Background(), event.UpdateEvent{ObjectOld: schemaJob(""), ObjectNew: schemaJob(batchv1.JobComplete)}, q)
	received, ok := r.gate.pending(key)
	if !ok {
		t.Fatal("the evidence was not marked")
	}
	if p := *r.priorityAfter(key); p != PriorityGate {
		t.Fatalf("priority while the evidence waits: %d, want %d", p, PriorityGate)
	}
	// A reconcile that started before the evidence arrived does not count as acting on it.
	r.gate.acted(key, received.Add(-time.Millisecond), received.Add(time.Millisecond))
	if _, ok := r.gate.pending(key); !ok {
		t.Fatal("a reconcile started before the evidence cleared its mark")
	}
	r.gate.deciding(key, received.Add(2*time.Millisecond))
	r.gate.acted(key, received.Add(time.Millisecond), received.Add(5*time.Millisecond))
	if _, ok := r.gate.pending(key); ok {
		t.Fatal("the mark outlived the reconcile that acted on it")
	}
	if p := *r.priorityAfter(key); p != 0 {
		t.Fatalf("priority after acting: %d, want 0", p)
	}
	// A second piece of evidence keeps the first one's time.
	r.gate.mark(key, received)
	r.gate.mark(key, received.Add(time.Second))
	if got, _ := r.gate.pending(key); !got.Equal(received) {
		t.Fatalf("mark moved to %v, want the first evidence's %v", got, received)
	}
	r.gate.forget(key)
	if _, ok := r.gate.pending(key); ok {
		t.Fatal("forget kept the mark")
	}
}

// A reconcile skipped because the cache lacked the manager's own status write runs again on that
// write's watch event, at the gate's priority while evidence waits, and only once per skip.
func TestCacheCaughtUpEnqueuesTheSkippedReconcile(t *testing.T) {
	r := &RoutingServiceReconciler{}
	key := types.NamespacedName{Namespace: "ns", Name: "rs-a"}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	for _, name := range []string{"busy-1", "busy-2"} {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	}
	update := func(rv string) {
		obj := func(v string) *routingv1alpha1.RoutingService {
			return &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rs-a", ResourceVersion: v}}
		}
		r.cacheCaughtUp().Update(context.Background(), event.UpdateEvent{ObjectOld: obj("1"), ObjectNew: obj(rv)}, q)
	}
	now := time.Now()
	r.written.wrote(key, "5", "6", now)
	update("6") // no reconcile was skipped: nothing to wake
	if n := q.Len(); n != 2 {
		t.Fatalf("queue length %d after an update nobody waited for, want 2", n)
	}
	r.written.wrote(key, "6", "7", now)
	r.gate.mark(key, now)
	if !r.written.stale(key, "6", now) {
		t.Fatal("the cache's replaced version is not stale")
	}
	update("6") // the cache still serves the replaced version
	if n := q.Len(); n != 2 {
		t.Fatalf("queue length %d before the cache caught up, want 2", n)
	}
	update("7")
	got, prio, _ := q.GetWithPriority()
	if got.Name != "rs-a" || prio != PriorityGate {
		t.Fatalf("first out: %s at priority %d, want rs-a at %d", got.Name, prio, PriorityGate)
	}
	q.Done(got)
	update("8") // the skip was answered once
	if n := q.Len(); n != 2 {
		t.Fatalf("queue length %d after a second update, want 2", n)
	}
}

// The race: a reconcile reads the replaced version from the cache, the write's watch event lands
// (nobody waits yet, so cacheCaughtUp enqueues nothing), then the reconcile's stale check skips
// it. It must not wait for the one-second fallback: the cache already serves the new version.
func TestSkipAfterTheCacheMovedRechecksAtOnce(t *testing.T) {
	var w writtenVersions
	key := types.NamespacedName{Namespace: "ns", Name: "rs-a"}
	now := time.Now()
	w.wrote(key, "6", "7", now)
	if got := w.recheckAfter(key); got != staleCacheRecheck {
		t.Fatalf("before the event: recheck after %s, want the fallback %s", got, staleCacheRecheck)
	}
	if w.caughtUp(key, "7") {
		t.Fatal("the event woke a skip that had not happened")
	}
	if !w.stale(key, "6", now) {
		t.Fatal("the version the reconcile read is still the replaced one: skipped")
	}
	if got := w.recheckAfter(key); got != cacheMovedRecheck {
		t.Fatalf("the cache moved before the skip: recheck after %s, want %s", got, cacheMovedRecheck)
	}
	if w.stale(key, "7", now) {
		t.Fatal("the recheck reads the new version: not stale")
	}
	// A new write starts afresh.
	w.wrote(key, "7", "8", now)
	if got := w.recheckAfter(key); got != staleCacheRecheck {
		t.Fatalf("a new write: recheck after %s, want %s", got, staleCacheRecheck)
	}
}
