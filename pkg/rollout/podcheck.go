package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkverdict"
)

// The check at PodReady (spec.strategy.checks[].when: [PodReady]): an http check sent to each pod
// of the RoutingService, the way a routing binary is asked to resolve known domains before it
// takes traffic. A readiness probe says the process answers; this says it answers right.
//
// A pod's result lives on the pod: its ReplicaSet's template carries the readiness gate
// routingv1alpha1.PodCheckGate (NewReplicaSet), so the kubelet reports the pod Ready, and the
// ReplicaSet counts it available, only once schemagate set that condition True. Nothing else is
// needed to hold a rolling step: an update pod that has not passed is not available, so the
// shard keeps its old pods (Step never takes one away for it) and never completes. The Service's
// endpoints skip it too. A lost status write, or a second manager, measures a pod again at
// worst; it never makes a pod Ready that did not pass.
//
// Which pods: every pod of a ReplicaSet this RoutingService controls whose template has the gate,
// whose containers are ready and whose gate is not yet True, in any revision (a rollback's pods
// are checked too: a stable pod that fails stays unready and is measured again). Only the update
// revision's results count towards a shard's verdict: failed measurements past failureLimit, or
// errors in a row past consecutiveErrorLimit, fail the shard while it is stepping or baking, and
// failurePolicy applies. count and minSuccessful do not apply: a pod passes on its first success.
// A dryRun check sets the gate True after the first measurement, whatever it said.

// maxPodChecksPerReconcile bounds the pods measured in one reconcile; the others wait a second.
const maxPodChecksPerReconcile = 16

// The reasons of the gate condition on a pod.
const (
	podCheckPassed = "CheckPassed"
	podCheckFailed = "CheckFailed"
	podCheckError  = "CheckError"
	podCheckDryRun = "DryRunReported"
)

// podChecks measures the pods waiting for the check at PodReady and sets their gate, and keeps
// status.shards[].checks[] (moment PodReady) for the update revision's pods of each shard that is
// stepping or baking. It runs before the shard steps are decided, so promote reads the verdict
// (podCheckFailure).
func (p *planner) podChecks() {
	check := p.rsvc.Spec.Strategy.PodReadyCheck()
	if check == nil {
		return
	}
	owners := map[types.UID]*appsv1.ReplicaSet{}
	for shard, set := range p.shards {
		if _, frozen := p.frozen[shard]; frozen {
			continue
		}
		for _, rs := range set.all {
			if rs.UID != "" && !p.untrusted[rs] && hasPodCheckGate(&rs.Spec.Template.Spec) {
				owners[rs.UID] = rs
			}
		}
	}
	pods := slices.Clone(p.observed.Pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		if a == nil || b == nil {
			return cmp.Compare(btoi(a == nil), btoi(b == nil))
		}
		return cmp.Compare(a.Name, b.Name)
	})
	requested := 0
	for _, pod := range pods {
		if pod == nil || pod.DeletionTimestamp != nil || !hasPodCheckGate(&pod.Spec) || pod.Status.PodIP == "" {
			continue
		}
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			continue
		}
		rs := owners[ref.UID]
		if rs == nil {
			continue
		}
		gate := podCondition(pod, routingv1alpha1.PodCheckGate)
		if gate != nil && gate.Status == corev1.ConditionTrue {
			continue
		}
		ready := podCondition(pod, corev1.ContainersReady)
		if ready == nil || ready.Status != corev1.ConditionTrue {
			continue
		}
		if due := p.podCheckDue(check, ready, gate); p.now.Before(due) {
			p.requeueAt(due)
			continue
		}
		shard, revision := rs.Labels[LabelShard], rs.Labels[LabelRevision]
		key := MeasurementKey{Shard: shard, Check: check.Name, Revision: revision, When: routingv1alpha1.CheckWhenPodReady, Pod: pod.Name}
		taken, ok := p.takenMeasurement(key)
		if !ok {
			if requested >= maxPodChecksPerReconcile {
				p.requeueAt(p.now.Add(time.Second))
				continue
			}
			requested++
			p.plan.Measurements = append(p.plan.Measurements, MeasurementRequest{MeasurementKey: key, Check: *check.DeepCopy(), Vars: map[string]string{
				"shard": shard, "revision": revision, "stableRevision": cmp.Or(p.status.StableRevision, "none"),
				"namespace": p.rsvc.Namespace, "name": p.rsvc.Name, "schemaVersion": p.rsvc.Spec.Schema.Version,
				"podIP": pod.Status.PodIP, "podName": pod.Name,
			}})
			p.requeueAt(p.now.Add(check.Interval()))
			continue
		}
		p.recordPodCheck(check, pod, gate, shard, revision, taken)
	}
}

// podCheckDue is when pod is measured next: initialDelaySeconds after its containers became
// ready, then intervalSeconds after the last measurement its gate records. Times from the pod's
// status are untrusted: one after now counts as now.
func (p *planner) podCheckDue(check *routingv1alpha1.ShardCheck, ready, gate *corev1.PodCondition) time.Time {
	at := func(t metav1.Time) time.Time {
		if t.After(p.now) {
			return p.now
		}
		return t.Time
	}
	due := at(ready.LastTransitionTime).Add(check.InitialDelay())
	if gate != nil && !gate.LastProbeTime.IsZero() {
		if next := at(gate.LastProbeTime).Add(check.Interval()); next.After(due) {
			due = next
		}
	}
	return due
}

// recordPodCheck turns a measurement of pod into its gate condition (SetPodCheck) and, for the
// update revision in a shard that is stepping or baking, into that shard's status entry.
func (p *planner) recordPodCheck(check *routingv1alpha1.ShardCheck, pod *corev1.Pod, gate *corev1.PodCondition, shard, revision string, taken TakenMeasurement) {
	r := taken.Result
	r.Time = metav1.Time{Time: p.now}
	r.Value, r.Message = clip(r.Value, 64), clip(fmt.Sprintf("pod %s: %s", pod.Name, r.Message), 1024)
	cond := corev1.PodCondition{Type: routingv1alpha1.PodCheckGate, LastProbeTime: metav1.Time{Time: p.now}}
	switch {
	case check.DryRun:
		cond.Status, cond.Reason = corev1.ConditionTrue, podCheckDryRun
	case r.Phase == routingv1alpha1.MeasurementSuccessful:
		cond.Status, cond.Reason = corev1.ConditionTrue, podCheckPassed
	case r.Phase == routingv1alpha1.MeasurementFailed:
		cond.Status, cond.Reason = corev1.ConditionFalse, podCheckFailed
	default:
		cond.Status, cond.Reason = corev1.ConditionFalse, podCheckError
	}
	cond.Message = clip(fmt.Sprintf("check %s: %s", check.Name, checkverdict.Describe(taken.Result)), 1024)
	cond.LastTransitionTime = metav1.Time{Time: p.now}
	if gate != nil && gate.Status == cond.Status && !gate.LastTransitionTime.After(p.now) {
		cond.LastTransitionTime = gate.LastTransitionTime
	}
	p.podActions = append(p.podActions, Action{Kind: SetPodCheck, Pod: pod, PodCondition: cond,
		Note: fmt.Sprintf("check %s on pod %s of revision %s in shard %s: %s", check.Name, pod.Name, revision, shard, r.Phase)})

	ss := p.findShardStatus(shard)
	if revision != p.update || ss == nil || (ss.Step != routingv1alpha1.ShardStepProgressing && ss.Step != routingv1alpha1.ShardStepBaking) {
		return
	}
	st := p.podCheckStatus(ss, check)
	r = checkverdict.Tally(st, r)
	st.Message = r.Message
	was := st.Phase
	switch {
	case taken.Fatal:
		st.Phase, st.Message = routingv1alpha1.CheckPhaseFailed, checkverdict.Fatal(r)
	case st.Failed > check.FailureLimitOrDefault():
		st.Phase = routingv1alpha1.CheckPhaseFailed
		st.Message = fmt.Sprintf("%d failed measurements, more than failureLimit %d; last: %s", st.Failed, check.FailureLimitOrDefault(), checkverdict.Describe(r))
	case st.ConsecutiveErrors > check.ConsecutiveErrorLimitOrDefault():
		st.Phase = routingv1alpha1.CheckPhaseFailed
		st.Message = fmt.Sprintf("%d errors in a row, more than consecutiveErrorLimit %d; last: %s", st.ConsecutiveErrors, check.ConsecutiveErrorLimitOrDefault(), checkverdict.Describe(r))
	}
	if st.Phase == routingv1alpha1.CheckPhaseFailed && was != routingv1alpha1.CheckPhaseFailed {
		dry := ""
		if check.DryRun {
			dry = " (dryRun: reported only, the shard goes on)"
		}
		p.checkEvent(check.Name, true, routingv1alpha1.ReasonShardCheckFailed, "check %s failed in shard %s on a new pod of revision %s: %s%s", check.Name, shard, p.update, st.Message, dry)
	}
}

// podCheckStatus is shard's status entry of the check at PodReady for the update revision, new
// (Running) when the stored one is for another revision or cannot be believed.
func (p *planner) podCheckStatus(ss *routingv1alpha1.ShardStatus, check *routingv1alpha1.ShardCheck) *routingv1alpha1.ShardCheckStatus {
	for i := range ss.Checks {
		st := &ss.Checks[i]
		if st.Name != check.Name || st.When != routingv1alpha1.CheckWhenPodReady {
			continue
		}
		if st.Revision != p.update || st.StartTime == nil || st.StartTime.After(p.now) || !checkverdict.Sane(st, p.now) {
			*st = newPodCheckStatus(check, p.update, p.now)
		}
		return st
	}
	ss.Checks = append(ss.Checks, newPodCheckStatus(check, p.update, p.now))
	return &ss.Checks[len(ss.Checks)-1]
}

func newPodCheckStatus(check *routingv1alpha1.ShardCheck, revision string, now time.Time) routingv1alpha1.ShardCheckStatus {
	return routingv1alpha1.ShardCheckStatus{Name: check.Name, When: routingv1alpha1.CheckWhenPodReady, DryRun: check.DryRun,
		Phase: routingv1alpha1.CheckPhaseRunning, Revision: revision, StartTime: &metav1.Time{Time: now}, Message: "started"}
}

// podCheckFailure is why the check at PodReady fails shard's step on the update revision, or "":
// its status entry for the update revision is Failed and it is not a dryRun.
func (p *planner) podCheckFailure(ss *routingv1alpha1.ShardStatus) string {
	for _, st := range ss.Checks {
		if st.When == routingv1alpha1.CheckWhenPodReady && st.Revision == p.update && st.Phase == routingv1alpha1.CheckPhaseFailed && !st.DryRun {
			return fmt.Sprintf("check %s failed in shard %s on a new pod of revision %s: %s", st.Name, ss.Name, p.update, st.Message)
		}
	}
	return ""
}

// passPodChecks marks shard's entry of the check at PodReady Passed once the update revision
// serves the shard alone and fully: every one of its pods is available, so each passed.
func (p *planner) passPodChecks(ss *routingv1alpha1.ShardStatus) {
	for i := range ss.Checks {
		st := &ss.Checks[i]
		if st.When == routingv1alpha1.CheckWhenPodReady && st.Revision == p.update && st.Phase == routingv1alpha1.CheckPhaseRunning {
			st.Phase, st.Message = routingv1alpha1.CheckPhasePassed, fmt.Sprintf("every pod of revision %s in shard %s passed", p.update, ss.Name)
		}
	}
}

// hasPodCheckGate reports whether a pod spec carries the readiness gate of the check at PodReady.
func hasPodCheckGate(spec *corev1.PodSpec) bool {
	for _, g := range spec.ReadinessGates {
		if g.ConditionType == routingv1alpha1.PodCheckGate {
			return true
		}
	}
	return false
}

// podCondition returns pod's condition of type t, or nil.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// findShardStatus returns the status entry of shard name, or nil (it never creates one).
func (p *planner) findShardStatus(name string) *routingv1alpha1.ShardStatus {
	for i := range p.status.Shards {
		if p.status.Shards[i].Name == name {
			return &p.status.Shards[i]
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
