package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	fakekube "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// capturedDir holds RoutingServices captured from real runs (for the Argo CD health check's tests).
var capturedDir = filepath.Join("..", "..", "config", "argocd", "resource_customizations", "routing.schemagate.io", "RoutingService", "testdata")

// captured reads one of them as the API server returns it: unstructured.
func captured(t *testing.T, state string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(capturedDir, state+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// world is a fake cluster for one RoutingService: the objects schemagate and the ReplicaSet and
// Job controllers would have made, built by the tests.
type world struct {
	t    *testing.T
	u    *unstructured.Unstructured
	r    *routingv1alpha1.RoutingService
	objs Objects
	seq  int
	now  time.Time
}

func newWorld(t *testing.T, state string, now string) *world {
	t.Helper()
	u := captured(t, state)
	r, err := toTyped(u)
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, u: u, r: r, now: mustTime(now)}
}

// suffix returns the next pod name suffix: five characters, deterministic.
func (w *world) suffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	w.seq++
	n := w.seq * 7919
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[n%len(alphabet)]
		n = n/len(alphabet) + i*31
	}
	return string(b)
}

func (w *world) shard(name string) routingv1alpha1.ShardSpec {
	for _, s := range w.r.Spec.Shards {
		if s.Name == name {
			return s
		}
	}
	w.t.Fatalf("no shard %s", name)
	return routingv1alpha1.ShardSpec{}
}

// podSpec says how many of a ReplicaSet's pods are ready and what the others do.
type podSpec struct {
	ready    int
	notReady string // Running (never ready), ContainerCreating, Terminating
	others   int
	restarts int32
}

// replicaSet adds a shard's ReplicaSet of rev running image, with its pods.
func (w *world) replicaSet(shard, rev, image string, desired int32, created string, pods podSpec) {
	rs := rollout.NewReplicaSet(w.r, w.shard(shard), rev, desired)
	rs.CreationTimestamp = metav1.NewTime(mustTime(created))
	rs.UID = types.UID("uid-" + rs.Name)
	rs.Spec.Template.Spec.Containers[0].Image = image
	n := int32(pods.ready + pods.others)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: n, ReadyReplicas: int32(pods.ready), AvailableReplicas: int32(pods.ready), FullyLabeledReplicas: n}
	w.objs.ReplicaSets = append(w.objs.ReplicaSets, *rs)
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}
	region := rs.Spec.Template.Spec.NodeSelector["topology.kubernetes.io/region"]
	for i := range pods.ready + pods.others {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: rs.Name + "-" + w.suffix(), Namespace: w.r.Namespace, Labels: rs.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{ref}, CreationTimestamp: rs.CreationTimestamp},
			Spec: rs.Spec.Template.Spec,
		}
		p.Spec.NodeName = fmt.Sprintf("kwok-%s-%d", region, i%2)
		switch {
		case i < pods.ready:
			setRunning(&p, true, pods.restarts)
		case pods.notReady == "ContainerCreating":
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		case pods.notReady == "Terminating":
			setRunning(&p, false, pods.restarts)
			p.DeletionTimestamp = ptr.To(metav1.NewTime(w.now.Add(-time.Second)))
		default:
			setRunning(&p, false, pods.restarts)
		}
		w.objs.Pods = append(w.objs.Pods, p)
	}
}

func setRunning(p *corev1.Pod, ready bool, restarts int32) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image, Ready: ready,
		RestartCount: restarts, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.CreationTimestamp}}}}
}

// migration adds a migration Job (version, attempt) in state complete, running or failed, with
// its pods (failed: one per try, backoffLimit+1).
func (w *world) migration(version string, attempt int32, created, finished string, state string) {
	j := rollout.NewMigrationJob(w.r, version, attempt)
	w.job(j, created, finished, state, j.Spec.Template.Spec.Containers[0].Image)
}

// checkJob adds a schema check Job.
func (w *world) checkJob(version string, n int32, created, finished string, state string) {
	j := rollout.NewCheckJob(w.r, version, n)
	w.job(j, created, finished, state, j.Spec.Template.Spec.Containers[0].Image)
}

func (w *world) job(j *batchv1.Job, created, finished, state, image string) {
	j.CreationTimestamp = metav1.NewTime(mustTime(created))
	j.UID = types.UID("uid-job-" + j.Name)
	start := metav1.NewTime(mustTime(created))
	j.Status.StartTime = &start
	tries := 1
	switch state {
	case "complete":
		end := metav1.NewTime(mustTime(finished))
		j.Status.Succeeded, j.Status.CompletionTime = 1, &end
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: end}}
	case "failed":
		end := metav1.NewTime(mustTime(finished))
		tries = int(ptr.Deref(j.Spec.BackoffLimit, 0)) + 1
		j.Status.Failed = int32(tries)
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: end,
			Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}
	case "running":
		j.Status.Active = 1
	}
	w.objs.Jobs = append(w.objs.Jobs, *j)
	ref := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}
	for i := range tries {
		labels := map[string]string{batchv1.JobNameLabel: j.Name}
		for k, v := range j.Spec.Template.Labels {
			labels[k] = v
		}
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-" + w.suffix(), Namespace: w.r.Namespace, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{ref}, CreationTimestamp: metav1.NewTime(mustTime(created).Add(time.Duration(i) * time.Second))},
			Spec: j.Spec.Template.Spec,
		}
		p.Spec.NodeName = "kwok-us-east-1-0"
		cs := corev1.ContainerStatus{Name: p.Spec.Containers[0].Name, Image: image}
		switch state {
		case "complete":
			p.Status.Phase = corev1.PodSucceeded
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
		case "failed":
			p.Status.Phase = corev1.PodFailed
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
		default:
			p.Status.Phase = corev1.PodRunning
			cs.State.Running = &corev1.ContainerStateRunning{}
			cs.Ready = true
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		w.objs.Pods = append(w.objs.Pods, p)
	}
}

// clients returns fake clients serving the world: the RoutingService (with others, if any)
// through a fake dynamic client, its objects through a fake clientset, and discovery saying the
// cluster serves routing.schemagate.io/v1alpha1.
func (w *world) clients(others ...*unstructured.Unstructured) *clients {
	return fakeClients(w.objs, append([]*unstructured.Unstructured{w.u}, others...)...)
}

func fakeClients(objs Objects, rsvcs ...*unstructured.Unstructured) *clients {
	var dynObjs []runtime.Object
	for _, u := range rsvcs {
		dynObjs = append(dynObjs, u.DeepCopy())
	}
	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{rsvcGVR: "RoutingServiceList"}, dynObjs...)
	var kubeObjs []runtime.Object
	for i := range objs.ReplicaSets {
		kubeObjs = append(kubeObjs, &objs.ReplicaSets[i])
	}
	for i := range objs.Jobs {
		kubeObjs = append(kubeObjs, &objs.Jobs[i])
	}
	for i := range objs.Pods {
		kubeObjs = append(kubeObjs, &objs.Pods[i])
	}
	kube := fakekube.NewClientset(kubeObjs...)
	disco := kube.Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{
		GroupVersion: routingv1alpha1.GroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "routingservices", SingularName: "routingservice", Namespaced: true, Kind: "RoutingService", ShortNames: []string{"rsvc"}}},
	}}
	return &clients{dyn: dyn, kube: kube, disco: disco}
}

// result is what a command printed and its exit code.
type result struct {
	out, err string
	code     int
}

// runWith runs the plugin's command line against cl with the clock at now.
func runWith(cl *clients, now time.Time, args ...string) result {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: &out, ErrOut: &errOut}
	a := newApp(genericclioptions.NewConfigFlags(false), streams)
	a.now = func() time.Time { return now }
	a.connect = func() (*clients, error) { return cl, nil }
	a.getenv = func(string) string { return "" }
	a.tty = func(io.Writer) bool { return false }
	code := run(args, streams, a)
	return result{out: out.String(), err: errOut.String(), code: code}
}
