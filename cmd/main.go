// Command manager runs the schemagate controller manager.
package main

import (
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/pkg/rollout"
)

func main() {
	var metricsAddr, probeAddr, leaderElectionNamespace string
	var leaderElect bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint (\"0\" disables it).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader so that only one manager acts at a time.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the manager's own, or kube-system out of cluster).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ManagerOptions(metricsAddr, probeAddr, leaderElect, leaderElectionNamespace))
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if err := (&controllers.RoutingServiceReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("schemagate"),
		Clock:    clock.RealClock{},
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "setting up the RoutingService controller")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding the ready check")
		os.Exit(1)
	}
	log.Info("starting the manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}

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
