package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Deleting pods is granted per namespace by config/rbac/namespaced_role.yaml, not the markers'
// ClusterRole (docs/security.md): without it, each delete is refused and the ReplicaSet
// controller removes the pods, as it would have anyway.

// removeScaledToZero deletes the pods a ReplicaSet the manager has just scaled to 0 still runs,
// instead of leaving each deletion (and its SuccessfulDelete Event) to kube-controller-manager's
// ReplicaSet controller. That controller serves every ReplicaSet in the cluster through one client
// limited to 20 requests/s by default (--kube-api-qps), and a rollout of many RoutingServices at
// once is bound by it (issue 13's benchmark): two of its requests fewer per pod are pods someone
// else's rollout gets sooner.
//
// Only a scale to 0 is handled so: every pod of the ReplicaSet goes then, whoever deletes it, so the
// two controllers cannot together remove more than the step asked for (I2). A smaller scale-down
// is left to the ReplicaSet controller, which alone knows which pods it will pick. Each deletion is
// graceful (the pod's terminationGracePeriodSeconds) and preconditioned on the pod's UID.
//
// Failures are logged and otherwise ignored: the ReplicaSet controller deletes what is left, as it
// would have anyway.
func removeScaledToZero(ctx context.Context, c client.Client, rs *appsv1.ReplicaSet) {
	if rs.Spec.Selector == nil || len(rs.Spec.Selector.MatchLabels) == 0 {
		return
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(rs.Namespace), client.MatchingLabels(rs.Spec.Selector.MatchLabels)); err != nil {
		logf.FromContext(ctx).V(1).Info("listing the pods of a ReplicaSet scaled to 0", "replicaSet", rs.Name, "error", err.Error())
		return
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || !metav1.IsControlledBy(pod, rs) {
			continue
		}
		uid := pod.UID
		if err := c.Delete(ctx, pod, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			logf.FromContext(ctx).V(1).Info("deleting a pod of a ReplicaSet scaled to 0", "pod", pod.Name, "error", err.Error())
		}
	}
}
