package nodeagent

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// statusLocked is the pod's status as the kubelet would report it. p.mu must be held.
func (p *pod) statusLocked() corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:  p.phaseLocked(),
		HostIP: hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		PodIP: p.ip, PodIPs: []corev1.PodIP{{IP: p.ip}},
		StartTime: &p.started,
		QOSClass:  p.obj.Status.QOSClass,
	}
	for i := range p.statuses {
		s := *p.statuses[i].DeepCopy()
		if i < p.nInit {
			st.InitContainerStatuses = append(st.InitContainerStatuses, s)
		} else {
			st.ContainerStatuses = append(st.ContainerStatuses, s)
		}
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	var unready []string
	for i, s := range p.statuses {
		// Regular init containers have finished by the time the pod can be ready; native
		// sidecars count, as the kubelet counts them.
		if !s.Ready && (i >= p.nInit || p.sidecar(i)) {
			unready = append(unready, s.Name)
		}
	}
	initialized := p.initializedLocked()
	ready := corev1.PodCondition{Status: corev1.ConditionTrue}
	switch {
	case terminal:
		ready = corev1.PodCondition{Status: corev1.ConditionFalse, Reason: "PodCompleted"}
	case len(unready) > 0:
		ready = corev1.PodCondition{Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
			Message: fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))}
	}
	sandbox := corev1.ConditionTrue
	if terminal {
		sandbox = corev1.ConditionFalse
	}
	p.setCondition(corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: sandbox})
	if initialized {
		p.setCondition(corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue})
	} else {
		p.setCondition(corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Reason: "ContainersNotInitialized"})
	}
	ready.Type = corev1.ContainersReady
	p.setCondition(ready)
	ready.Type = corev1.PodReady
	if msg := p.gatesNotReady(); ready.Status == corev1.ConditionTrue && msg != "" {
		ready = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady", Message: msg}
	}
	p.setCondition(ready)
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
		if c, ok := p.conds[t]; ok {
			st.Conditions = append(st.Conditions, c)
		}
	}
	// Conditions others set are kept: DisruptionTarget as it was at creation, readiness gates as
	// the pod informer last showed them (gates.go).
	var others []corev1.PodCondition
	for t, c := range p.conds {
		switch t {
		case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled:
		default:
			others = append(others, c)
		}
	}
	sort.Slice(others, func(a, b int) bool { return others[a].Type < others[b].Type })
	st.Conditions = append(st.Conditions, others...)
	return st
}

// setCondition records c, keeping the last transition time while its status stays the same.
func (p *pod) setCondition(c corev1.PodCondition) {
	old, ok := p.conds[c.Type]
	if ok && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	} else {
		c.LastTransitionTime = now()
	}
	p.conds[c.Type] = c
}

// initializedLocked reports whether every init container has done its part: a regular one
// exited 0, a native sidecar has started (or has run and stopped since). p.mu must be held.
func (p *pod) initializedLocked() bool {
	for i := 0; i < p.nInit; i++ {
		s := p.statuses[i]
		switch {
		case p.sidecar(i):
			if !*s.Started && s.State.Terminated == nil && s.LastTerminationState.Terminated == nil {
				return false
			}
		case s.State.Terminated == nil || s.State.Terminated.ExitCode != 0:
			return false
		}
	}
	return true
}

// phaseLocked follows the kubelet's getPhase: Pending while the init containers have not done
// their part or a container has not run yet, Running while one runs or will restart, then
// Succeeded or Failed under the restart policy. Only the regular containers decide the end:
// native sidecars are stopped once they have ended, whatever their exit code. A deleted pod whose
// containers have all stopped is Succeeded only if every one of them exited 0.
func (p *pod) phaseLocked() corev1.PodPhase {
	if p.initFailed {
		return corev1.PodFailed
	}
	if !p.initializedLocked() {
		if p.finished {
			return corev1.PodFailed
		}
		return corev1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, s := range p.statuses[p.nInit:] {
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case s.LastTerminationState.Terminated != nil: // waiting to restart
			stopped++
			if s.LastTerminationState.Terminated.ExitCode == 0 {
				succeeded++
			}
		default:
			waiting++
		}
	}
	if p.finished {
		if waiting == 0 && stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	}
	for i := 0; i < p.nInit; i++ {
		if p.statuses[i].State.Running != nil {
			return corev1.PodRunning // a sidecar the kubelet is still stopping
		}
	}
	switch p.obj.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	case corev1.RestartPolicyOnFailure:
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodRunning
	default:
		return corev1.PodRunning
	}
}
