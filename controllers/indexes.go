package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/pkg/rollout"
)

// IndexRoutingService is the cache index of the ReplicaSets, Jobs, Pods, ControllerRevisions and
// PodDisruptionBudgets schemagate labels, keyed by their schemagate.io/name label (the
// RoutingService they belong to). controller-runtime's cache keeps every index per namespace
// too, so a List with InNamespace and this field reads one bucket: its cost follows the
// RoutingService's own objects, not the namespace's (a label selector alone walks every object
// of the kind in the namespace, which made N RoutingServices in one namespace cost O(N²)).
const IndexRoutingService = "schemagate.io/routingservice"

// indexedKinds are the kinds the manager's cache indexes by IndexRoutingService.
func indexedKinds() []client.Object {
	return []client.Object{&appsv1.ReplicaSet{}, &batchv1.Job{}, &corev1.Pod{}, &appsv1.ControllerRevision{}, &policyv1.PodDisruptionBudget{}}
}

// routingServiceOf is the IndexRoutingService extractor: the schemagate.io/name label of an object
// labelled as managed by schemagate, none otherwise.
func routingServiceOf(o client.Object) []string {
	l := o.GetLabels()
	if l[rollout.LabelManagedBy] != rollout.ManagedByValue || l[rollout.LabelName] == "" {
		return nil
	}
	return []string{l[rollout.LabelName]}
}

// IndexFields registers IndexRoutingService on indexer for kinds (indexedKinds when none are
// given). It must run before the cache starts (SetupWithManager does; a spoke connection does
// for the kinds it reads there); the error names the kind that failed.
func IndexFields(ctx context.Context, indexer client.FieldIndexer, kinds ...client.Object) error {
	if len(kinds) == 0 {
		kinds = indexedKinds()
	}
	for _, obj := range kinds {
		if err := indexer.IndexField(ctx, obj, IndexRoutingService, routingServiceOf); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", obj, IndexRoutingService, err)
		}
	}
	return nil
}

// ownedBy selects, in a cache indexed by IndexFields, the objects schemagate labelled with the
// RoutingService ns/name, and further narrowed by extra labels (nil for none).
func ownedBy(ns, name string, extra map[string]string) []client.ListOption {
	sel := client.MatchingLabels{rollout.LabelManagedBy: rollout.ManagedByValue}
	for k, v := range extra {
		sel[k] = v
	}
	return []client.ListOption{client.InNamespace(ns), client.MatchingFields{IndexRoutingService: name}, sel}
}
