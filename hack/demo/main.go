// Command demo shows schemagate on a real local control plane: it starts the cluster of
// test/localcluster, installs the CRD, runs the manager, and walks a RoutingService through
// v1 → v2 (new image, schema 2: migration, gate, shard by shard) → v3 (an image that never becomes
// ready: progress deadline, rollback of the first shard only, v2 still serving). `make demo` runs
// it; -keep (or KEEP=1) leaves the cluster up afterwards for kubectl.
//
// Ctrl-C (SIGINT), SIGTERM, and the death of the process that started it (make: see parent.go)
// all stop the demo the same way: the manager and the cluster are stopped and nothing is left
// running. Further signals during that teardown are ignored; SIGKILL still ends the demo at once,
// and the cluster's processes with it (they die with their parent).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/localcluster"
)

func main() {
	keep := flag.Bool("keep", os.Getenv("KEEP") != "", "keep the cluster running after the demo, until Ctrl-C")
	state := flag.String("state", ".state/demo", "folder for the cluster's certificates, data, logs and kubeconfig")
	bake := flag.Int("bake", 5, "bakeSeconds of the demo RoutingService")
	flag.Parse()
	// The demo prints its own timeline; the manager logs to its own file.
	ctrllog.SetLogger(logr.Discard())

	// Catch the signals before looking at parentDeath: a SIGTERM from the parent's death that
	// arrives in between is then handled, not fatal.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-signals
		fmt.Fprintf(os.Stderr, "\n%s: stopping the manager and the cluster\n", describe(s))
		cancel()
		// Later signals change nothing: killing make sends SIGTERM twice (make passes it to its
		// child, then dies, and its death sends another), and the teardown must not be cut short.
		for range signals {
		}
	}()
	if parentDeath != nil {
		fmt.Fprintln(os.Stderr, "demo not started:", parentDeath)
		os.Exit(1)
	}
	// run has stopped everything it started (its defers) by the time it returns.
	switch err := run(ctx, *state, *keep, int32(*bake)); {
	case err == nil: // done; with -keep, the signal ended the wait
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "demo stopped before it finished; the manager and the cluster are stopped")
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

// describe names a signal as the person who sent it would: Ctrl-C, or SIGTERM (a kill, or the
// parent's death).
func describe(s os.Signal) string {
	if s == os.Interrupt {
		return "interrupted"
	}
	return "terminated (SIGTERM: killed, or the process that started the demo exited)"
}

func run(ctx context.Context, stateDir string, keep bool, bake int32) error {
	root, _ := os.Getwd()
	bin := filepath.Join(root, "bin")
	stateDir, _ = filepath.Abs(stateDir)
	if err := os.RemoveAll(stateDir); err != nil {
		return err
	}
	began := time.Now()

	heading("1. A local control plane on 127.0.0.1 (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)")
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: filepath.Join(bin, "k8s"), StateDir: stateDir, Log: os.Stdout})
	if err != nil {
		return err
	}
	defer cluster.Stop()
	fmt.Printf("\n  Use it from another terminal:  export KUBECONFIG=%s\n", cluster.Kubeconfig)
	fmt.Printf("                                 %s get rsvc,rs,jobs,pods -o wide\n", filepath.Join(bin, "k8s", "kubectl"))

	heading("2. The RoutingService CRD (kubectl apply --server-side -k config/crd) and the manager")
	if err := cluster.InstallCRDs(ctx, filepath.Join(bin, "k8s", "kubectl"), "config/crd", routingv1alpha1.GroupVersion.String()); err != nil {
		return err
	}
	manager, err := startManager(ctx, filepath.Join(bin, "manager"), cluster.Kubeconfig, filepath.Join(stateDir, "logs", "manager.log"))
	if err != nil {
		return err
	}
	defer manager.stop()
	fmt.Printf("  manager running (log: %s)\n", manager.log)

	c, err := client.New(cluster.Config, client.Options{Scheme: controllers.Scheme()})
	if err != nil {
		return err
	}
	w := newWatcher(c, "default", "edge-router")
	go w.run(ctx)

	heading("3. Act one: edge-router v1 (schema 1) in us-east, eu-west, ap-south")
	rsvc := demoRoutingService(bake)
	act1 := time.Now()
	if err := c.Create(ctx, rsvc); err != nil {
		return err
	}
	if err := w.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	w.summary("v1", act1)

	heading("4. Act two: v2, a new image that needs schema 2")
	act2 := time.Now()
	gen, err := w.update(ctx, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
		r.Spec.Schema.Version = "2"
		r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "registry.example/edge-router-migrate:v2"
	})
	if err != nil {
		return err
	}
	if err := w.waitReady(ctx, gen, 3*time.Minute); err != nil {
		return err
	}
	w.summary("v2", act2)
	if err := w.expectServing(ctx, "registry.example/edge-router:v2"); err != nil {
		return err
	}

	heading("5. Act three: v3, whose pods never become ready (schemagate.io/fake-pod: never-ready)")
	act3 := time.Now()
	gen, err = w.update(ctx, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v3"
		r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
	})
	if err != nil {
		return err
	}
	if err := w.waitStalledAndRolledBack(ctx, gen, 3*time.Minute); err != nil {
		return err
	}
	if err := w.expectServing(ctx, "registry.example/edge-router:v2"); err != nil {
		return err
	}
	w.summary("v3", act3)
	fmt.Printf("\n  v3 missed its progress deadline in us-east and was rolled back there; eu-west and ap-south were never touched; v2 serves every shard.\n")

	heading(fmt.Sprintf("Done in %s", time.Since(began).Round(time.Second)))
	if keep {
		fmt.Printf("  The cluster stays up: export KUBECONFIG=%s   (Ctrl-C to stop it)\n", cluster.Kubeconfig)
		<-ctx.Done()
	}
	return nil
}

func heading(s string) { fmt.Printf("\n== %s\n", s) }
