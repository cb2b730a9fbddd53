package controllers

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	gateEvents.Update(context.Background(), event.UpdateEvent{ObjectOld: schemaJob(""), ObjectNew: schemaJob(batchv1.JobComplete)}, q)
	got, _ := q.Get()
	if got.Name != "rs-a" {
		t.Fatalf("first out: %s, want rs-a (its migration Job just completed)", got.Name)
	}
	// An update that carries no new evidence adds nothing.
	gateEvents.Update(context.Background(), event.UpdateEvent{ObjectOld: schemaJob(batchv1.JobComplete), ObjectNew: schemaJob(batchv1.JobComplete)}, q)
	if n := q.Len(); n != 3 {
		t.Fatalf("queue length %d, want the 3 ordinary items", n)
	}
}
