package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Scheme holds the API types the manager reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(routingv1alpha1.AddToScheme(s))
	return s
}

// ManagerOptions are the manager's options. The cache holds only the ReplicaSets, Jobs and Pods
// labelled app.kubernetes.io/managed-by=schemagate, so the manager's memory does not grow with
// unrelated objects in the cluster.
func ManagerOptions(metricsAddr, probeAddr string, leaderElect bool, leaderElectionNamespace string) ctrl.Options {
	ours := labels.SelectorFromSet(labels.Set{rollout.LabelManagedBy: rollout.ManagedByValue})
	return ctrl.Options{
		Scheme:                  Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "schemagate.routing.schemagate.io",
		LeaderElectionNamespace: leaderElectionNamespace,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.ReplicaSet{}: {Label: ours},
			&batchv1.Job{}:       {Label: ours},
			&corev1.Pod{}:        {Label: ours},
		}},
	}
}
