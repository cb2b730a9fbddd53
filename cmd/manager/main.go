// Command manager runs the schemagate controller manager. docs/manager.md describes its flags.
package main

import (
	"context"
	"flag"
	"os"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/schemagate/schemagate/controllers"
)

func main() {
	flags := bindManagerFlags(flag.CommandLine)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	cfg, err := flags.resolve()
	if err != nil {
		log.Error(err, "invalid flags")
		os.Exit(2)
	}
	// Out of cluster (make run) controller-runtime cannot find a namespace of its own for the
	// Lease and would refuse to start; in cluster it reads the service account's.
	cfg.LeaderElectionNamespace = resolveLeaderElectionNamespace(cfg.LeaderElectionNamespace, serviceAccountNamespaceFile)

	mgr, err := ctrl.NewManager(cfg.RESTConfig(ctrl.GetConfigOrDie()), cfg.Options())
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	hubID, err := controllers.ResolveHubID(context.Background(), mgr.GetAPIReader(), flags.hubID)
	if err != nil {
		log.Error(err, "finding this hub's identity (set --hub-id)")
		os.Exit(1)
	}
	probeImage, note, err := controllers.ResolveProbeImage(context.Background(), mgr.GetAPIReader(), flags.probeImage, os.Getenv)
	if err != nil {
		log.Error(err, "finding the migration probe's image (set --probe-image)")
		os.Exit(1)
	}
	if note != "" {
		log.Info(note)
	}
	if err := (&controllers.RoutingServiceReconciler{
		Client:              mgr.GetClient(),
		Recorder:            mgr.GetEventRecorder("schemagate"),
		Clock:               clock.RealClock{},
		APIReader:           mgr.GetAPIReader(),
		Spokes:              &controllers.Spokes{Hub: hubID, Secrets: mgr.GetAPIReader(), Scheme: mgr.GetScheme()},
		SpokeCleanupTimeout: flags.spokeCleanupTimeout,
		Probe:               flags.probeImages(probeImage),
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
	log.Info("starting the manager", "metrics", cfg.MetricsAddr, "metricsSecure", cfg.MetricsSecure,
		"watchNamespaces", cfg.WatchNamespaces, "maxConcurrentReconciles", cfg.MaxConcurrentReconciles,
		"hubID", hubID, "probeImage", probeImage, "probeDatabaseImage", flags.probeDatabaseImage, "kubeAPIQPS", cfg.KubeAPIQPS, "kubeAPIBurst", cfg.KubeAPIBurst)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}
