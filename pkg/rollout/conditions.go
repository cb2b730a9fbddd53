package rollout

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The conditions and their writers. Each condition type is set by exactly one function:
//
//	SchemaReady        writeSchemaConditions, from verdicts.schemaReady (decideSchema)
//	ContractReady      writeSchemaConditions, from verdicts.contractReady (decideContract)
//	RollbackSafe       lifecycle (lifecycle.go), from the serving set and the database's versions
//	Available, Ready,
//	Reconciling,
//	Stalled            summarize (status.go), from the activity and stall verdicts (setActivity, stall)
//	ClustersReachable  clustersCondition (clusters.go), from the frozen shards
//
// A stage that decides what a condition says records a verdict; it never sets the condition
// itself, so "why does SchemaReady say this" is answered by the verdict's one field, and the
// last stage to decide wins, in the order Compute runs them. A verdict not decided in this
// reconcile leaves the condition as stored (the gate held, for instance).

// conditionVerdict is what one condition is to say.
type conditionVerdict struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

// verdicts are the condition verdicts decided in this reconcile; nil is not decided.
type verdicts struct {
	schemaReady   *conditionVerdict
	contractReady *conditionVerdict
	// noContract: no contract is declared, and ContractReady is removed.
	noContract bool
}

// decideSchema records what SchemaReady is to say.
func (p *planner) decideSchema(status metav1.ConditionStatus, reason, message string) {
	p.verdicts.schemaReady = &conditionVerdict{status: status, reason: reason, message: message}
}

// decideContract records what ContractReady is to say.
func (p *planner) decideContract(status metav1.ConditionStatus, reason, message string) {
	p.verdicts.contractReady = &conditionVerdict{status: status, reason: reason, message: message}
	p.verdicts.noContract = false
}

// schemaMessage is the SchemaReady message decided so far in this reconcile, or the stored one.
func (p *planner) schemaMessage() string {
	if v := p.verdicts.schemaReady; v != nil {
		return v.message
	}
	return p.conditionMessage(routingv1alpha1.ConditionSchemaReady)
}

// schemaReason is the SchemaReady reason decided so far in this reconcile, or the stored one.
func (p *planner) schemaReason() string {
	if v := p.verdicts.schemaReady; v != nil {
		return v.reason
	}
	if c := meta.FindStatusCondition(p.status.Conditions, routingv1alpha1.ConditionSchemaReady); c != nil {
		return c.Reason
	}
	return ""
}

// writeSchemaConditions is the one writer of SchemaReady and ContractReady. Compute calls it once,
// after every stage that decides them and before the status summary.
func (p *planner) writeSchemaConditions() {
	if v := p.verdicts.schemaReady; v != nil {
		p.setCondition(routingv1alpha1.ConditionSchemaReady, v.status, v.reason, v.message)
	}
	switch v := p.verdicts.contractReady; {
	case p.verdicts.noContract:
		meta.RemoveStatusCondition(&p.status.Conditions, routingv1alpha1.ConditionContractReady)
	case v != nil:
		p.setCondition(routingv1alpha1.ConditionContractReady, v.status, v.reason, v.message)
	}
}
