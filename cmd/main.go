// Command manager runs the schemagate controller manager.
package main

import (
	"flag"
	"os"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schemagate/schemagate/controllers"
)

func main() {
	var metricsAddr, probeAddr, leaderElectionNamespace string
	var leaderElect bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint (\"0\" disables it).")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader so that only one manager acts at a time.")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease (default: the manager's own, or "+outOfClusterLeaderElectionNamespace+" out of cluster).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	// Out of cluster (make run) controller-runtime cannot find a namespace of its own for the
	// Lease and would refuse to start; in cluster it reads the service account's.
	leaderElectionNamespace = resolveLeaderElectionNamespace(leaderElectionNamespace, serviceAccountNamespaceFile)

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), controllers.ManagerOptions(metricsAddr, probeAddr, leaderElect, leaderElectionNamespace))
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	if err := (&controllers.RoutingServiceReconciler{
		Client:    mgr.GetClient(),
		Recorder:  mgr.GetEventRecorder("schemagate"),
		Clock:     clock.RealClock{},
		APIReader: mgr.GetAPIReader(),
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
