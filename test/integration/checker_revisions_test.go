package integration

import (
	"context"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/invariants"
)

// The invariant checker confirms a dip of its own view against the API server's state at the
// same resourceVersion (test/invariants/dips.go). A real kube-apiserver must serve that past state:
// a ReplicaSet read at the revision of its first write shows 3 replicas after it was scaled to 0.
func TestCheckerReadsAShardAtAPastRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	labels := map[string]string{rollout.LabelName: "rs-past", rollout.LabelShard: "us-east", "app": "past"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-past-us-east", Labels: labels},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v1"}}}}},
	}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	first, _ := strconv.ParseInt(rs.ResourceVersion, 10, 64)
	rs.Spec.Replicas = ptr.To(int32(0))
	if err := k8s.Update(ctx, rs); err != nil {
		t.Fatal(err)
	}
	second, _ := strconv.ParseInt(rs.ResourceVersion, 10, 64)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := invariants.ReplicaSetsAtRevision(cs)
	sel := rollout.LabelName + "=rs-past," + rollout.LabelShard + "=us-east"
	for rv, want := range map[int64]int32{first: 3, second: 0} {
		items, err := at(ctx, ns, sel, rv)
		if err != nil {
			t.Fatalf("at resourceVersion %d: %v", rv, err)
		}
		if len(items) != 1 || ptr.Deref(items[0].Spec.Replicas, -1) != want {
			t.Errorf("at resourceVersion %d: %d ReplicaSets %v, want one with %d replicas", rv, len(items), items, want)
		}
	}
	if items, err := at(ctx, ns, sel, first-1); err != nil || len(items) != 0 {
		t.Errorf("before it was created: %d ReplicaSets, %v; want none", len(items), err)
	}
}

// The same for the Jobs and schema pods an I1 check reads again (test/invariants/confirm_at.go):
// a migration pod read at the revision before its report shows none; at the report's, the report.
func TestCheckerReadsJobsAndPodsAtAPastRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	labels := map[string]string{rollout.LabelComponent: rollout.ComponentMigration, "app": "past"}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-past-schema-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "migrate", Image: "migrate:v1"}}}}},
	}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-past-schema-1-p0d", Labels: labels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "migrate", Image: "migrate:v1"}}}}
	other := pod.DeepCopy()
	other.Name, other.Labels = "not-a-schema-pod", map[string]string{"app": "past"}
	for _, p := range []*corev1.Pod{pod, other} {
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: "report"}}}}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	after, _ := strconv.ParseInt(pod.ResourceVersion, 10, 64)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := invariants.JobsAndPodsAtRevision(cs)
	for rv, want := range map[int64]corev1.PodPhase{before: corev1.PodPending, after: corev1.PodSucceeded} {
		jobs, pods, err := at(ctx, ns, rv)
		if err != nil {
			t.Fatalf("at resourceVersion %d: %v", rv, err)
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.Name+" "+string(p.Status.Phase))
		}
		if len(jobs) != 1 || len(got) != 1 || got[0] != pod.Name+" "+string(want) {
			t.Errorf("at resourceVersion %d: %d Jobs, pods %q; want the Job and the migration pod %s", rv, len(jobs), got, want)
		}
	}
}
