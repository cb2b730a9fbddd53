package rollout

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// gatedPods keeps want pods of rs in the world, as the ReplicaSet controller and a kubelet would:
// each with an IP, its containers ready when up is true, and Ready only once its readiness gate is
// True. It returns how many are Ready.
func (w *world) gatedPods(rs *appsv1.ReplicaSet, want int32, up bool) int32 {
	var ready int32
	for i := int32(0); i < 64; i++ {
		name := fmt.Sprintf("%s-%d", rs.Name, i)
		pod := w.pods[name]
		if i >= want {
			delete(w.pods, name)
			continue
		}
		if pod == nil {
			pod = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.Namespace, UID: types.UID("uid-" + name), Labels: rs.Spec.Template.Labels,
					OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
				Spec:   *rs.Spec.Template.Spec.DeepCopy(),
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("127.0.9.%d", w.seq%250+1)},
			}
			w.seq++
			w.pods[name] = pod
		}
		status := corev1.ConditionFalse
		if up {
			status = corev1.ConditionTrue
		}
		if c := podCondition(pod, corev1.ContainersReady); c == nil {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: status, LastTransitionTime: metav1.Time{Time: w.now}})
		} else if c.Status != status {
			c.Status, c.LastTransitionTime = status, metav1.Time{Time: w.now}
		}
		if g := podCondition(pod, routingv1alpha1.PodCheckGate); up && g != nil && g.Status == corev1.ConditionTrue {
			ready++
		}
	}
	return ready
}

// setPodCheck applies SetPodCheck as the API server would: to the pod of that name and UID only.
func (w *world) setPodCheck(a Action) {
	pod := w.pods[a.Pod.Name]
	if pod == nil || pod.UID != a.Pod.UID {
		return
	}
	if c := podCondition(pod, a.PodCondition.Type); c != nil {
		*c = a.PodCondition
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, a.PodCondition)
}

// withPodCheck adds a check at PodReady: a lookup sent to each pod, answered by answer(request,
// how many times this pod was asked).
func withPodCheck(w *world, answer func(MeasurementRequest, int) routingv1alpha1.MeasurementPhase) {
	w.rsvc.Spec.Strategy.Checks = append(w.rsvc.Spec.Strategy.Checks, routingv1alpha1.ShardCheck{Name: "routes", When: []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenPodReady},
		HTTP:        &routingv1alpha1.HTTPCheck{URL: "http://{{podIP}}:8080/lookup?host=example.com"},
		Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(2))}})
	n := map[MeasurementKey]int{}
	w.measure = func(req MeasurementRequest) TakenMeasurement {
		n[req.MeasurementKey]++
		return TakenMeasurement{MeasurementKey: req.MeasurementKey, Result: routingv1alpha1.MeasurementResult{Phase: answer(req, n[req.MeasurementKey]), Value: "404", Message: "no route"}}
	}
	w.rsvc.Generation++
}

// scaledDownIn reports the log line of the first scale-down of revision's ReplicaSet in shard.
func (w *world) scaledDownIn(shard, revision string) string {
	for _, l := range w.log {
		if strings.Contains(l, "ScaleReplicaSet rs-a-"+shard+"-"+revision+" ") && strings.Contains(l, "scale down") {
			return l
		}
	}
	return ""
}

// S-41: v2 is Ready by its probe but resolves nothing. The lookup sent to each new pod fails, so
// us-east fails (ShardCheckFailed, naming the pod) before any of its v1 pods goes, and eu-west
// and ap-south are never touched.
func TestPodCheckFailsTheShardBeforeAnyOldPodGoes(t *testing.T) {
	w := steady(t)
	withPodCheck(w, func(req MeasurementRequest, _ int) routingv1alpha1.MeasurementPhase {
		return routingv1alpha1.MeasurementSuccessful
	})
	// Adding the check renames the revision (its pods carry the gate); let that roll first.
	w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	stable := w.rsvc.Status.StableRevision
	for _, pod := range w.pods {
		if !hasPodCheckGate(&pod.Spec) {
			continue
		}
		if g := podCondition(pod, routingv1alpha1.PodCheckGate); g == nil || g.Status != corev1.ConditionTrue || g.Reason != podCheckPassed {
			t.Fatalf("pod %s of the stable revision: gate %+v", pod.Name, g)
		}
	}
	w.log = nil
	w.measure = func(req MeasurementRequest) TakenMeasurement {
		phase := routingv1alpha1.MeasurementSuccessful
		if req.Revision != stable {
			phase = routingv1alpha1.MeasurementFailed
		}
		return TakenMeasurement{MeasurementKey: req.MeasurementKey, Result: routingv1alpha1.MeasurementResult{Phase: phase, Value: "404", Message: "no route for example.com"}}
	}
	w.update("app:v2", "2", "migrate:ok")
	w.run(300, func() bool { return w.rsvc.Status.Failure != nil })
	f := w.rsvc.Status.Failure
	if f.Reason != routingv1alpha1.ReasonShardCheckFailed || f.Shard != "us-east" || !strings.Contains(f.Message, "pod rs-a-us-east-") || !strings.Contains(f.Message, "no route for example.com") {
		t.Fatalf("failure %+v", f)
	}
	if l := w.scaledDownIn("us-east", stable); l != "" {
		t.Fatalf("a v1 pod went before the check failed: %s", l)
	}
	w.run(100, func() bool { return w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" })
	for _, l := range w.log {
		if strings.Contains(l, "eu-west") && strings.Contains(l, "Create") {
			t.Fatalf("eu-west was touched: %s", l)
		}
	}
	var failedGate bool
	for _, pod := range w.pods {
		if g := podCondition(pod, routingv1alpha1.PodCheckGate); g != nil && g.Status == corev1.ConditionFalse && g.Reason == podCheckFailed {
			failedGate = true
		}
	}
	if !failedGate && len(w.pods) > 0 {
		t.Log("the failed v2 pods are gone with their ReplicaSet's scale-down")
	}
}

// Each new pod counts as available only once its own lookup passed: the first two answers of
// every pod are connection errors (the router still loads routes), so no v1 pod in a shard goes
// before a v2 pod there passed; then every pod passes and the rollout completes, each pod asked
// three times and no more.
func TestPodCheckHoldsEachPodUntilItPassed(t *testing.T) {
	w := steady(t)
	passes := func(_ MeasurementRequest, n int) routingv1alpha1.MeasurementPhase {
		if n <= 2 {
			return routingv1alpha1.MeasurementError
		}
		return routingv1alpha1.MeasurementSuccessful
	}
	withPodCheck(w, passes)
	w.run(600, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	w.measured, w.log = nil, nil
	stable := w.rsvc.Status.StableRevision
	w.update("app:v2", "2", "migrate:ok")
	var passedAt string
	w.run(600, func() bool {
		if passedAt == "" {
			for _, pod := range w.pods {
				if g := podCondition(pod, routingv1alpha1.PodCheckGate); g != nil && g.Status == corev1.ConditionTrue && strings.Contains(pod.Name, "us-east") && pod.Labels[LabelRevision] == w.rsvc.Status.UpdateRevision {
					passedAt = w.now.Format("15:04:05")
				}
			}
			if l := w.scaledDownIn("us-east", stable); l != "" {
				t.Fatalf("a v1 pod went before any v2 pod passed its check: %s", l)
			}
		}
		return w.isTrue(routingv1alpha1.ConditionReady) && w.rsvc.Status.StableRevision == w.rsvc.Status.UpdateRevision
	})
	if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
		t.Fatalf("after the rollout: %s", got)
	}
	asked := map[string]int{}
	for _, r := range w.measured {
		if r.When != routingv1alpha1.CheckWhenPodReady || r.Pod == "" || r.Vars["podIP"] == "" || r.Vars["podName"] != r.Pod {
			t.Fatalf("request %+v", r)
		}
		asked[r.Pod]++
	}
	if len(asked) < 9 {
		t.Fatalf("%d pods asked, want the 9 new ones at least: %v", len(asked), asked)
	}
	for pod, n := range asked {
		if n != 3 {
			t.Errorf("pod %s asked %d times, want 3 (two errors, one pass)", pod, n)
		}
	}
	for _, ss := range w.rsvc.Status.Shards {
		var st *routingv1alpha1.ShardCheckStatus
		for i := range ss.Checks {
			if ss.Checks[i].When == routingv1alpha1.CheckWhenPodReady {
				st = &ss.Checks[i]
			}
		}
		if st == nil || st.Phase != routingv1alpha1.CheckPhasePassed || st.Successful < 3 || st.Errors < 6 {
			t.Errorf("shard %s: check status %+v", ss.Name, st)
		}
	}
}

// The gate is part of the revision only when a check runs at PodReady: adding one renames the
// revision (its pods change), and a spec without one keeps its name.
func TestPodCheckGateIsInTheRevision(t *testing.T) {
	rsvc := fixture()
	before := Revision(&rsvc.Spec)
	rs := NewReplicaSet(rsvc, rsvc.Spec.Shards[0], before, 1)
	if hasPodCheckGate(&rs.Spec.Template.Spec) {
		t.Fatal("a ReplicaSet has the gate with no check at PodReady")
	}
	rsvc.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "bake", HTTP: &routingv1alpha1.HTTPCheck{URL: "http://127.0.0.1/x"}}}
	if Revision(&rsvc.Spec) != before {
		t.Fatal("a check at Bake renamed the revision")
	}
	rsvc.Spec.Strategy.Checks = append(rsvc.Spec.Strategy.Checks, routingv1alpha1.ShardCheck{Name: "routes", When: []routingv1alpha1.CheckWhen{routingv1alpha1.CheckWhenPodReady},
		HTTP: &routingv1alpha1.HTTPCheck{URL: "http://{{podIP}}:8080/lookup"}})
	after := Revision(&rsvc.Spec)
	if after == before {
		t.Fatal("a check at PodReady kept the revision's name")
	}
	rs = NewReplicaSet(rsvc, rsvc.Spec.Shards[0], after, 1)
	if !hasPodCheckGate(&rs.Spec.Template.Spec) || len(rs.Spec.Template.Spec.ReadinessGates) != 1 {
		t.Fatalf("readiness gates %+v", rs.Spec.Template.Spec.ReadinessGates)
	}
	if ok, diff := TemplateMatches(NewReplicaSet(rsvc, rsvc.Spec.Shards[0], after, 1).Spec.Template, rs.Spec.Template); !ok {
		t.Fatalf("the gated template does not match itself: %s", diff)
	}
}
