package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// restartedPod adds a pod of ReplicaSet rs whose container "app" restarted restarts times, its
// last termination (reason, exit code) finished at at; waiting, when set, is its waiting reason.
func (w *world) restartedPod(rs *appsv1.ReplicaSet, restarts int32, reason string, exit int32, at time.Time, waiting string) *corev1.Pod {
	w.seq++
	name := rs.Name + "-p" + string(rune('a'+w.seq%26))
	cs := corev1.ContainerStatus{Name: "app", RestartCount: restarts, Ready: waiting == "",
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exit, FinishedAt: metav1.Time{Time: at}}},
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if waiting != "" {
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.Namespace, UID: types.UID(name), Labels: rs.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{cs}},
	}
	w.pods[name] = pod
	return pod
}

// untilBaking runs the v1 → v2 rollout until shard bakes v2.
func (w *world) untilBaking(shard string) {
	w.run(300, func() bool { return w.shardStep(shard) == routingv1alpha1.ShardStepBaking })
	w.tick() // the controllers act on what that reconcile did
}

// S-40: a v2 pod OOM-killed during us-east's bake, with no check configured, fails the shard at
// once with PodOOMKilled naming the pod, the container and the cause; under Rollback only us-east
// goes back, and eu-west never starts.
func TestPodHealthOOMKillFailsTheBakingShard(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("us-east")
	w.step(2 * time.Second)
	pod := w.restartedPod(w.rsOf("us-east", "app:v2"), 1, "OOMKilled", 137, w.now.Add(-time.Second), "")
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	f := w.rsvc.Status.Failure
	if f == nil || f.Reason != routingv1alpha1.ReasonPodOOMKilled || f.Shard != "us-east" {
		t.Fatalf("failure %+v", f)
	}
	for _, want := range []string{pod.Name, "container app", "OOMKilled, exit code 137", "maxRestarts (0)"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("the failure message does not say %q: %s", want, f.Message)
		}
	}
	if !w.sawEvent(routingv1alpha1.ReasonPodOOMKilled) {
		t.Error("no PodOOMKilled Event")
	}
	for _, l := range w.log {
		if strings.Contains(l, "eu-west-") && strings.Contains(l, "Create") {
			t.Fatalf("eu-west was touched after us-east failed: %s", l)
		}
	}
	if s := w.shardStep("eu-west"); s != routingv1alpha1.ShardStepPending {
		t.Fatalf("eu-west step %s", s)
	}
}

// A shard already promoted keeps being watched until the rollout completes: v2 crash-looping in
// us-east while eu-west bakes fails the rollout there (PodCrashLooping); both touched shards go
// back, ap-south is never touched.
func TestPodHealthWatchesPromotedShardsUntilTheRolloutCompletes(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("eu-west")
	w.restartedPod(w.rsOf("us-east", "app:v2"), 2, "Error", 1, w.now.Add(-time.Second), "CrashLoopBackOff")
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	if f := w.rsvc.Status.Failure; f == nil || f.Reason != routingv1alpha1.ReasonPodCrashLooping || f.Shard != "us-east" || !strings.Contains(f.Message, "CrashLoopBackOff after Error, exit code 1") {
		t.Fatalf("failure %+v", f)
	}
	if s := w.shardStep("ap-south"); s != routingv1alpha1.ShardStepPending {
		t.Fatalf("ap-south step %s", s)
	}

	// Once the rollout is complete the gate is done: a restart after that changes nothing.
	w2 := steady(t)
	w2.update("app:v2", "2", "migrate:ok")
	w2.run(300, func() bool { return w2.isTrue(routingv1alpha1.ConditionReady) })
	w2.restartedPod(w2.rsOf("us-east", "app:v2"), 5, "OOMKilled", 137, w2.now, "")
	for i := 0; i < 10; i++ {
		w2.step(time.Second)
	}
	if w2.rsvc.Status.Failure != nil || !w2.isTrue(routingv1alpha1.ConditionReady) {
		t.Fatalf("a restart after the rollout completed failed it: %+v", w2.rsvc.Status.Failure)
	}
}

// maxRestarts tolerates restarts, and each tolerated restart starts the bake over: the shard is
// promoted bakeSeconds after the restart, not after the bake began. The restart time comes from
// the pod, so a lost status write changes nothing; a time after now (a hostile or skewed status)
// cannot hold the bake forever.
func TestPodHealthToleratedRestartStartsTheBakeOver(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{MaxRestarts: ptr.To(int32(1))}
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("us-east")
	began := w.stepOf("us-east").StepStartTime.Time
	w.step(6 * time.Second)
	restart := w.now.Add(-time.Second)
	w.restartedPod(w.rsOf("us-east", "app:v2"), 1, "Error", 2, restart, "")
	w.run(100, func() bool { return w.shardStep("us-east") == routingv1alpha1.ShardStepPromoted })
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("a tolerated restart failed the shard: %+v", w.rsvc.Status.Failure)
	}
	if !w.sawEvent(EventBakeRestarted) {
		t.Error("no BakeRestarted Event")
	}
	bake := time.Duration(*w.rsvc.Spec.Strategy.BakeSeconds) * time.Second
	if promoted := w.stepOf("us-east").StepStartTime.Time; promoted.Before(restart.Add(bake)) {
		t.Fatalf("us-east promoted at %s: its bake began at %s and the restart at %s must start it over (%s)", promoted, began, restart, bake)
	}

	// A second restart of the same container passes maxRestarts 1: PodRestarted.
	w.tick() // the controllers act on what the last reconcile did
	w.untilBaking("eu-west")
	w.restartedPod(w.rsOf("eu-west", "app:v2"), 2, "Error", 2, w.now, "")
	w.run(100, func() bool { return w.rsvc.Status.Failure != nil })
	if f := w.rsvc.Status.Failure; f.Reason != routingv1alpha1.ReasonPodRestarted || f.Shard != "eu-west" || !strings.Contains(f.Message, "restarted twice") {
		t.Fatalf("failure %+v", f)
	}

	// A restart time in the future is not believed: the bake ends on time.
	w3 := steady(t)
	w3.rsvc.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{MaxRestarts: ptr.To(int32(1))}
	w3.update("app:v2", "2", "migrate:ok")
	w3.untilBaking("us-east")
	w3.restartedPod(w3.rsOf("us-east", "app:v2"), 1, "Error", 2, w3.now.Add(24*time.Hour), "")
	w3.run(30, func() bool { return w3.shardStep("us-east") == routingv1alpha1.ShardStepPromoted })
}

// A restart that ended before the shard's step started is an earlier attempt's (failurePolicy
// Halt keeps the pods; a retry starts the step again): it is not counted.
func TestPodHealthCountsOnlyRestartsOfThisStep(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("us-east")
	w.restartedPod(w.rsOf("us-east", "app:v2"), 3, "OOMKilled", 137, w.stepOf("us-east").ProgressStartTime.Add(-time.Second), "")
	w.run(100, func() bool { return w.shardStep("us-east") == routingv1alpha1.ShardStepPromoted })
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("%+v", w.rsvc.Status.Failure)
	}
}

// mode Off is the only way to turn the gate off: then restarts are neither counted nor reported.
func TestPodHealthOff(t *testing.T) {
	w := steady(t)
	w.rsvc.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{Mode: routingv1alpha1.PodHealthOff}
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("us-east")
	w.restartedPod(w.rsOf("us-east", "app:v2"), 4, "OOMKilled", 137, w.now, "CrashLoopBackOff")
	w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	if w.rsvc.Status.Failure != nil || w.sawEvent(routingv1alpha1.ReasonPodOOMKilled) {
		t.Fatalf("mode Off still judged the pods: %+v", w.rsvc.Status.Failure)
	}
}

// Pod status is untrusted: negative and huge counts, empty and oversized text, thousands of
// container statuses, a pod of another ReplicaSet with a copied label: no panic, messages bounded,
// only the update revision's own pods count.
func TestPodHealthHostileStatus(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("us-east")
	v1 := w.rsOf("us-east", "app:v1")
	w.restartedPod(v1, 9, "OOMKilled", 137, w.now, "") // the stable revision's: not judged here
	stranger := w.restartedPod(w.rsOf("us-east", "app:v2"), 9, "OOMKilled", 137, w.now, "")
	stranger.OwnerReferences[0].UID = "someone-else"
	neg := w.restartedPod(w.rsOf("us-east", "app:v2"), -5, strings.Repeat("x", 1<<16), -1, w.now, "")
	neg.Status.ContainerStatuses[0].LastTerminationState.Terminated = nil
	for i := 0; i < 5; i++ {
		w.step(time.Second)
	}
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("a pod that is not the update revision's, or a negative count, failed the shard: %+v", w.rsvc.Status.Failure)
	}
	many := w.restartedPod(w.rsOf("us-east", "app:v2"), 0, "", 0, w.now, "")
	for i := 0; i < 5000; i++ {
		many.Status.ContainerStatuses = append(many.Status.ContainerStatuses, corev1.ContainerStatus{Name: strings.Repeat("c", 300), RestartCount: 1 << 30,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: strings.Repeat("\xff", 500), ExitCode: 137}}})
	}
	w.run(100, func() bool { return w.rsvc.Status.Failure != nil })
	if f := w.rsvc.Status.Failure; f.Reason != routingv1alpha1.ReasonPodRestarted || len(f.Message) > 1024 {
		t.Fatalf("failure %s, message of %d bytes", f.Reason, len(f.Message))
	}
}

// Terminated is not restarted: an init container that finished (it stays Terminated, Completed,
// for the pod's life), the containers of a pod being deleted or evicted, and a restart count at
// the top of int32 are read as the kubelet means them (found by review).
func TestPodHealthTerminatedIsNotARestart(t *testing.T) {
	w := steady(t)
	w.update("app:v2", "2", "migrate:ok")
	w.untilBaking("us-east")
	rs := w.rsOf("us-east", "app:v2")
	initDone := w.restartedPod(rs, 0, "", 0, w.now, "")
	initDone.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{}
	initDone.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init-config",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Time{Time: w.now}}}}}
	deleting := w.restartedPod(rs, 0, "", 0, w.now, "")
	deleting.DeletionTimestamp = &metav1.Time{Time: w.now}
	deleting.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{}
	deleting.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 143, FinishedAt: metav1.Time{Time: w.now}}}
	w.run(100, func() bool { return w.shardStep("us-east") == routingv1alpha1.ShardStepPromoted })
	if w.rsvc.Status.Failure != nil {
		t.Fatalf("a finished init container or a pod being deleted failed the shard: %+v", w.rsvc.Status.Failure)
	}
	w.tick()
	w.untilBaking("eu-west")
	huge := w.restartedPod(w.rsOf("eu-west", "app:v2"), 1<<31-1, "OOMKilled", 137, w.now, "")
	huge.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.Time{Time: w.now}}}
	w.run(100, func() bool { return w.rsvc.Status.Failure != nil })
	if f := w.rsvc.Status.Failure; f.Reason != routingv1alpha1.ReasonPodOOMKilled || f.Shard != "eu-west" {
		t.Fatalf("failure %+v", f)
	}
}

// A restart while the shard's cluster was away is still counted once it answers again, though
// its step's times move forward by the time away (the progress deadline and the bake are not
// charged for it); so is one in a shard whose step was moved because the cluster the schema
// Jobs run in was away (found by review).
func TestPodHealthCountsRestartsWhileAClusterWasAway(t *testing.T) {
	for _, schemaPlace := range []bool{false, true} {
		t.Run(map[bool]string{false: "the shard's cluster", true: "the schema Jobs' cluster"}[schemaPlace], func(t *testing.T) {
			w := clustered(t)
			cut := "eu-west"
			if schemaPlace {
				w.rsvc.Spec.Schema.RunWithShard = "us-east"
				cut = "us-east"
			}
			w.update("app:v2", "2", "migrate:ok")
			w.untilBaking("eu-west")
			w.step(2 * time.Second)
			w.cut(cut, routingv1alpha1.ClusterUnreachable)
			w.step(5 * time.Second)
			w.restartedPod(w.rsOf("eu-west", "app:v2"), 1, "OOMKilled", 137, w.now, "")
			for i := 0; i < 60; i++ {
				w.step(time.Second)
			}
			w.restore(cut)
			w.run(100, func() bool {
				return w.shardStep("eu-west") == routingv1alpha1.ShardStepPromoted || w.rsvc.Status.Failure != nil
			})
			if f := w.rsvc.Status.Failure; f == nil || f.Reason != routingv1alpha1.ReasonPodOOMKilled || f.Shard != "eu-west" {
				t.Fatalf("failure %+v; eu-west %s", f, w.shardStep("eu-west"))
			}
		})
	}
}
