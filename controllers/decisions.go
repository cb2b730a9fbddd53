package controllers

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// decisionConditions are the conditions whose reason and message say what the planner decided:
// the current step (Ready), whether a person is needed (Stalled), and the schema gate
// (SchemaReady).
var decisionConditions = []string{routingv1alpha1.ConditionReady, routingv1alpha1.ConditionStalled, routingv1alpha1.ConditionSchemaReady}

// logDecision logs the plan's decision at info, as "decision" with the status, reason and message
// of each of decisionConditions, when any of them changed since the last reconcile of key: a
// RoutingService that waits (a bake of an hour, reconciled every few seconds by its pods'
// events) logs its decision once, not once per reconcile. The actions themselves are logged by
// apply, one "apply" line each.
func (r *RoutingServiceReconciler) logDecision(log logr.Logger, key types.NamespacedName, plan rollout.Plan) {
	current := map[string]string{}
	var kv []any
	for _, t := range decisionConditions {
		c := meta.FindStatusCondition(plan.Status.Conditions, t)
		if c == nil {
			continue
		}
		current[t] = string(c.Status) + "/" + c.Reason + "/" + c.Message
		kv = append(kv, t, string(c.Status)+" "+c.Reason, t+"Message", c.Message)
	}
	if len(r.decisions.fresh(key, current)) == 0 {
		return
	}
	log.Info("decision", append(kv, "actions", len(plan.Actions), "requeueAfter", plan.RequeueAfter.String())...)
}
