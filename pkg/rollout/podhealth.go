package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The pod-health gate (spec.strategy.podHealth, issue "a shard is judged by what its pods do").
// A readiness probe and a metric query both miss a pod that is OOM-killed or crash-loops between
// two probes: the kubelet restarts it and it is Ready again. The restart counts in the pods'
// status do not miss it, so while the update revision rolls out schemagate reads them for every
// shard that has that revision's pods (the one stepping or baking, and each one promoted before
// it) and fails the shard when one container restarted more than maxRestarts times since the
// shard's step started. Pod status is untrusted input: counts are bounded, times after now are
// ignored, and text is cut and cleaned before it reaches a message.

// maxPodHealthContainers bounds the container statuses read per pod (a pod has a handful; a
// hostile status can list thousands).
const maxPodHealthContainers = 64

// podTrouble is the worst container of a shard's update-revision pods: the one whose restarts
// since the step started go furthest past the threshold (or, when none does, the latest restart).
type podTrouble struct {
	pod, container string
	// restarts is the container's restartCount.
	restarts int32
	// reason is ReasonPodOOMKilled, ReasonPodCrashLooping or ReasonPodRestarted.
	reason string
	// cause says what the container's last termination was ("OOMKilled, exit code 137").
	cause string
	// at is when its last termination finished (zero when the status does not say, or says a
	// time after now).
	at time.Time
}

// podHealth reads the update revision's pods in shard, counting the restarts that ended at or
// after since (the step's start). failed is set when one container is past maxRestarts;
// otherwise latest is the newest restart at or after since (zero when there is none), after
// which a bake starts over.
func (p *planner) podHealth(shard string, since time.Time) (failed *podTrouble, latest time.Time) {
	rs := p.set(shard).byRev[p.update]
	if rs == nil || rs.UID == "" {
		return nil, time.Time{}
	}
	limit := p.rsvc.Spec.Strategy.MaxRestartsOrDefault()
	for _, pod := range p.observed.Pods {
		if pod == nil || !metav1.IsControlledBy(pod, rs) {
			continue
		}
		statuses := make([]corev1.ContainerStatus, 0, len(pod.Status.InitContainerStatuses)+len(pod.Status.ContainerStatuses))
		statuses = append(statuses, pod.Status.InitContainerStatuses...)
		statuses = append(statuses, pod.Status.ContainerStatuses...)
		if len(statuses) > maxPodHealthContainers {
			statuses = statuses[:maxPodHealthContainers]
		}
		for i := range statuses {
			t := p.containerTrouble(pod, &statuses[i], since)
			if t == nil {
				continue
			}
			if t.restarts > limit && (failed == nil || t.restarts > failed.restarts) {
				failed = t
			}
			if t.at.After(latest) {
				latest = t.at
			}
		}
	}
	return failed, latest
}

// containerTrouble is what one container status says about restarts after since, or nil when it
// shows none. A restart with no finish time (a status that does not say) counts: the gate errs
// towards failing a shard, never towards passing one.
func (p *planner) containerTrouble(pod *corev1.Pod, cs *corev1.ContainerStatus, since time.Time) *podTrouble {
	// restartCount alone: a container terminated and not restarted yet is not counted (a finished
	// init container stays so for good, and a pod being deleted or evicted has its containers
	// terminated without any restart); the kubelet counts the restart when it comes.
	restarts := max(0, cs.RestartCount)
	if restarts == 0 {
		return nil
	}
	last := cs.LastTerminationState.Terminated
	t := &podTrouble{pod: pod.Name, container: podText(cs.Name, 63), restarts: restarts, reason: routingv1alpha1.ReasonPodRestarted}
	if last != nil {
		if at := last.FinishedAt.Time; !at.IsZero() && !at.After(p.now) {
			t.at = at
		}
		if !t.at.IsZero() && t.at.Before(since) {
			// Its last restart came before this step: an earlier attempt's, not this one's.
			return nil
		}
		t.cause = fmt.Sprintf("%s, exit code %d", orNone(podText(last.Reason, 40)), last.ExitCode)
		if last.Reason == "OOMKilled" {
			t.reason = routingv1alpha1.ReasonPodOOMKilled
		}
	}
	if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
		t.cause = "CrashLoopBackOff after " + orNone(t.cause)
		if t.reason != routingv1alpha1.ReasonPodOOMKilled {
			t.reason = routingv1alpha1.ReasonPodCrashLooping
		}
	}
	if t.cause == "" {
		t.cause = "its last termination is not in its status"
	}
	return t
}

// podHealthGate applies the gate to shard ss in promote: it reports true when it failed the
// update revision there (failurePolicy has been applied). A shard whose pods restarted within
// the threshold while baking bakes again from that restart: its stepStartTime moves to it, a time
// the cluster keeps in the pods' status, so a lost status write changes nothing.
func (p *planner) podHealthGate(ss *routingv1alpha1.ShardStatus) bool {
	if !p.podHealthOn() || ss.StepStartTime == nil {
		return false
	}
	since := ss.StepStartTime.Time
	if ss.ProgressStartTime != nil && ss.ProgressStartTime.Before(ss.StepStartTime) {
		since = ss.ProgressStartTime.Time
	}
	// A step moved forward in this reconcile for the time a cluster was away (clusters.go): the
	// restarts of that time still count.
	since = since.Add(-p.shifted[ss.Name])
	failed, latest := p.podHealth(ss.Name, since)
	if failed != nil {
		limit := p.rsvc.Spec.Strategy.MaxRestartsOrDefault()
		msg := fmt.Sprintf("shard %s: pod %s of revision %s: container %s restarted %s since the shard's step started (%s), more than spec.strategy.podHealth.maxRestarts (%d) allows",
			ss.Name, failed.pod, p.update, failed.container, times(int64(failed.restarts)), failed.cause, limit)
		p.event(true, failed.reason, "%s; failurePolicy %s applies", msg, p.rsvc.Spec.Strategy.FailurePolicyOrDefault())
		p.failWith(ss, failed.reason, msg)
		return true
	}
	if ss.Step == routingv1alpha1.ShardStepBaking && latest.After(ss.StepStartTime.Time) {
		ss.StepStartTime = &metav1.Time{Time: latest}
		p.event(false, EventBakeRestarted, "shard %s: a pod of revision %s restarted at %s, within spec.strategy.podHealth.maxRestarts (%d): its bake starts over",
			ss.Name, p.update, latest.UTC().Format(time.RFC3339), p.rsvc.Spec.Strategy.MaxRestartsOrDefault())
	}
	return false
}

// podHealthOn reports whether the gate judges the update revision now: it is not Off, the update
// revision is not the stable one (a revert to the last-known-good is never failed by it), and
// the rollout is not complete (some shard is not yet promoted).
func (p *planner) podHealthOn() bool {
	if !p.rsvc.Spec.Strategy.PodHealthEnforced() || p.update == p.status.StableRevision {
		return false
	}
	for _, shard := range p.rsvc.Spec.Shards {
		if p.shardStatus(shard.Name).Step != routingv1alpha1.ShardStepPromoted {
			return true
		}
	}
	return false
}

// times is n as a count of times: "once", "twice", "3 times".
func times(n int64) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
