package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// approveContractAction sets schemagate.io/approve-contract: the person's hand on a contract
// migration declared with requireApproval.
var approveContractAction = annotateAction{
	verb: "approve-contract", annotation: routingv1alpha1.AnnotationApproveContract,
	short: "Approve the contract migration (annotation " + routingv1alpha1.AnnotationApproveContract + ")",
	long: `Set the annotation ` + routingv1alpha1.AnnotationApproveContract + ` to a new value with a merge patch. With
spec.schema.contract.requireApproval true, the contract migration waits for it once every other
rule holds (ContractReady=False, reason AwaitingApproval). A value set earlier, while the contract
still waits for its shards, its older pods or its rollback window, is kept and acts once they
hold: an approval never skips a rule. The controller acts once per value and records it on the
RoutingService's ReplicaSets (schemagate.io/handled-approve-contract), so a lost or restored
status never makes it approve again. With no contract that waits for an approval nothing changes
(a ContractApprovalIgnored Event).`,
	handled: func(*routingv1alpha1.RoutingService) string { return "" },
	explain: explainApproveContract,
}

func explainApproveContract(r *routingv1alpha1.RoutingService) string {
	c := r.Spec.Schema.Contract
	switch {
	case c == nil:
		return "spec.schema.contract is not set: no contract waits for an approval; the controller changes nothing (ContractApprovalIgnored)."
	case !c.RequireApproval:
		return "spec.schema.contract.requireApproval is false: the contract needs no approval; the controller changes nothing (ContractApprovalIgnored)."
	}
	cond := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionContractReady)
	if cond == nil || cond.ObservedGeneration != r.Generation {
		return fmt.Sprintf("The controller has not reported on the contract to schema %s for this generation yet: the approval is kept and acts once every other rule holds.", c.Version)
	}
	switch cond.Reason {
	case routingv1alpha1.ReasonAwaitingApproval:
		return fmt.Sprintf("The controller starts the contract to schema %s now (ContractStarted).", c.Version)
	case routingv1alpha1.ReasonContracting, routingv1alpha1.ReasonContractComplete, routingv1alpha1.ReasonContractFailed:
		return fmt.Sprintf("The contract to schema %s has already started (%s): the controller changes nothing (ContractApprovalIgnored).", c.Version, cond.Reason)
	}
	return fmt.Sprintf("The contract to schema %s still waits (%s: %s); the approval is kept and acts once every other rule holds.", c.Version, cond.Reason, cond.Message)
}
