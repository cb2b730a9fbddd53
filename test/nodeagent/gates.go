package nodeagent

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Readiness gates, as the kubelet honours them: a pod whose spec lists readinessGates is Ready
// only when its containers are ready and each gate's condition (which someone else sets in the
// pod's status) is True. The agent learns those conditions from its pod informer and keeps them
// in every status it writes, so its own writes never undo them.

// watchGates hands each change of a pod's gate conditions, as the API server has them, to the
// pod running here.
func (prov *provider) watchGates(inf cache.SharedIndexInformer) error {
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { prov.takeGates(obj) },
		UpdateFunc: func(_, obj any) { prov.takeGates(obj) },
	})
	return err
}

func (prov *provider) takeGates(obj any) {
	api, ok := obj.(*corev1.Pod)
	if !ok || len(api.Spec.ReadinessGates) == 0 {
		return
	}
	p := prov.get(api.Namespace, api.Name)
	if p == nil || p.obj.UID != api.UID {
		return
	}
	if p.takeGates(api) {
		p.notify()
	}
}

// takeGates adopts the gate conditions in api's status that differ from the pod's own. It reports
// whether the pod's status must be written again: a gate condition changed, or the API server's
// copy lacks one the pod has (a status write of the agent's raced the writer's).
func (p *pod) takeGates(api *corev1.Pod) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	rewrite := false
	for _, g := range p.obj.Spec.ReadinessGates {
		var found *corev1.PodCondition
		for i := range api.Status.Conditions {
			if api.Status.Conditions[i].Type == g.ConditionType {
				found = &api.Status.Conditions[i]
			}
		}
		have, ok := p.conds[g.ConditionType]
		switch {
		case found == nil && ok:
			rewrite = true
		case found != nil && (!ok || have != *found):
			p.conds[g.ConditionType] = *found
			rewrite = true
		}
	}
	return rewrite
}

// gatesNotReady lists the pod's readiness gates whose condition is missing or not True, as the
// kubelet words it. p.mu must be held.
func (p *pod) gatesNotReady() string {
	var missing, notTrue []string
	for _, g := range p.obj.Spec.ReadinessGates {
		c, ok := p.conds[g.ConditionType]
		switch {
		case !ok:
			missing = append(missing, string(g.ConditionType))
		case c.Status != corev1.ConditionTrue:
			notTrue = append(notTrue, string(g.ConditionType))
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("the status of readiness gates [%s] is not set", strings.Join(missing, " ")))
	}
	if len(notTrue) > 0 {
		parts = append(parts, fmt.Sprintf("readiness gates [%s] are not True", strings.Join(notTrue, " ")))
	}
	return strings.Join(parts, "; ")
}
