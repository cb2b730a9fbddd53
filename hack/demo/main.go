// Command demo shows schemagate on a real local control plane with real pods, a real database and
// real traffic: it starts the cluster of test/localcluster, PostgreSQL (test/postgres) and three
// process-backed Nodes (test/nodeagent, one per region) that run the reference router
// (examples/edge-router) as local processes; installs the CRD, runs the manager, and walks a
// RoutingService through v1 → v2 (a router that needs schema 2: its migration runs against
// PostgreSQL, the gate holds the pods until it is done, shards promote in turn) → v3 (a router
// that never becomes ready: progress deadline, rollback of the first shard only, v2 still
// serving), while client traffic goes to each region's ready routers and a line per second says
// what they answered. It exits 0 only if v1 → v2 cost no 404 and no error in any region and v2
// serves everywhere at the end. `make demo` builds what it needs and runs it; -keep (or KEEP=1)
// leaves everything up afterwards for kubectl. -variant=expand-contract (DEMO=expand-contract)
// plays the route target's type change as one schema lifecycle instead (expandcontract.go).
//
// Ctrl-C (SIGINT), SIGTERM, and the death of the process that started it (make: see parent.go)
// all stop the demo the same way: the traffic, the manager, the node agent and its router
// processes, PostgreSQL and the cluster are stopped and nothing is left running. Further signals
// during that teardown are ignored; SIGKILL still ends the demo at once, and every process it
// started with it (they all die with their parent).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
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
	router := flag.String("router", "bin/edge-router", "the reference router binary (go build -o bin/edge-router ./examples/edge-router)")
	rate := flag.Int("rate", 20, "requests per second sent to each region")
	variant := flag.String("variant", os.Getenv("DEMO"), "empty: v1 → v2 → v3; expand-contract: the route target's type change as expand, roll out, contract (DEMO=expand-contract)")
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
		fmt.Fprintf(os.Stderr, "\n%s: stopping the traffic, the manager, the router pods, PostgreSQL and the cluster\n", describe(s))
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
	if *variant != "" && *variant != variantExpandContract {
		fmt.Fprintf(os.Stderr, "demo: unknown variant %q (DEMO= or DEMO=%s)\n", *variant, variantExpandContract)
		os.Exit(2)
	}
	switch err := run(ctx, options{state: *state, keep: *keep, bake: int32(*bake), router: *router, rate: *rate, variant: *variant}); {
	case err == nil: // done; with -keep, the signal ended the wait
	case ctx.Err() != nil:
		fmt.Fprintln(os.Stderr, "demo stopped before it finished; nothing it started is running")
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

type options struct {
	state, router, variant string
	keep                   bool
	bake                   int32
	rate                   int
}

func run(ctx context.Context, o options) error {
	root, _ := os.Getwd()
	bin := filepath.Join(root, "bin")
	router, err := routerBinaryPath(o.router)
	if err != nil {
		return err
	}
	stateDir, _ := filepath.Abs(o.state)
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
	printf("\n  Use it from another terminal:  export KUBECONFIG=%s\n", cluster.Kubeconfig)
	printf("                                 %s get rsvc,rs,jobs,pods -o wide\n", filepath.Join(bin, "k8s", "kubectl"))

	heading("2. The real stack: PostgreSQL, and three Nodes that run pods as local processes")
	pg, closePG, err := startPostgres(ctx, filepath.Join(stateDir, "logs", "postgres.log"))
	if err != nil {
		return err
	}
	defer closePG()
	// routes: empty, the v1 migration Job creates schema 1. routes_v3: the database the bad v3
	// release points at, which nobody migrated.
	for _, db := range []string{"routes", "routes_v3"} {
		if err := pg.CreateDatabase(ctx, db); err != nil {
			return err
		}
	}
	database, unmigrated := pg.URL("routes"), pg.URL("routes_v3")
	printf("  PostgreSQL %s on 127.0.0.1:%d, database routes (empty: the migration Job brings it to schema 1)\n", pg.Version(), pg.Port())
	agent, err := startAgent(ctx, cluster.Config, router, filepath.Join(stateDir, "nodeagent"))
	if err != nil {
		return err
	}
	defer agent.Stop()
	var names []string
	for _, r := range regions {
		names = append(names, "process-"+r.Region)
	}
	printf("  Nodes %s (schemagate.io/node=process, tainted NoSchedule),\n", strings.Join(names, ", "))
	printf("  each pod a process of %s on its own 127.42.x.x address (logs: %s)\n", router, filepath.Join(agent.StateDir(), "pods"))

	heading("3. The RoutingService CRD (kubectl apply --server-side -k config/crd) and the manager")
	if err := cluster.InstallCRDs(ctx, filepath.Join(bin, "k8s", "kubectl"), "config/crd", routingv1alpha1.GroupVersion.String()); err != nil {
		return err
	}
	manager, err := startManager(ctx, filepath.Join(bin, "manager"), cluster.Kubeconfig, filepath.Join(stateDir, "logs", "manager.log"))
	if err != nil {
		return err
	}
	defer manager.stop()
	printf("  manager running (log: %s)\n", manager.log)

	c, err := client.New(cluster.Config, client.Options{Scheme: controllers.Scheme()})
	if err != nil {
		return err
	}
	w := newWatcher(c, "default", "edge-router")
	go w.run(ctx)
	if o.variant == variantExpandContract {
		return runExpandContract(ctx, o, c, w, database, began, cluster.Kubeconfig)
	}

	heading("4. Act one: edge-router v1 (schema 1) in us-east, eu-west, ap-south, 2 router pods each")
	act1 := time.Now()
	if err := c.Create(ctx, demoRoutingService(database, o.bake)); err != nil {
		return err
	}
	if err := w.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	w.summary("v1", act1)
	traffic := newLoad(c, "default", "edge-router", o.rate)
	if err := traffic.waitServed(ctx, time.Minute); err != nil {
		return err
	}
	trafficCtx, stopLines := context.WithCancel(ctx)
	defer stopLines()
	traffic.start(ctx)
	defer traffic.stop()
	go traffic.printEverySecond(trafficCtx)
	printf("\n  Traffic: %d requests/s per region over d00.example … d19.example, to each region's ready router pods.\n", o.rate)
	printf("  Each second, per region: requests, 200s, 404s and errors in that second, and the revisions that answered.\n\n")
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}

	heading("5. Act two: v2, a router that needs schema 2; its migration (edge-router migrate, 5 s) runs against PostgreSQL")
	act2 := time.Now()
	gen, err := w.update(ctx, toV2(database))
	if err != nil {
		return err
	}
	if err := w.waitReady(ctx, gen, 3*time.Minute); err != nil {
		return err
	}
	if err := w.expectServing(ctx, routerImage+":v2"); err != nil {
		return err
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	v1v2, _ := traffic.start(ctx)
	w.summary("v2", act2)
	gated := cleanRollout(v1v2, "v2")

	heading("6. Act three: v3, whose pods never become ready (it reads a database nobody migrated)")
	act3 := time.Now()
	gen, err = w.update(ctx, toV3(unmigrated))
	if err != nil {
		return err
	}
	explainCtx, stopExplaining := context.WithCancel(ctx)
	go w.explainNotReady(explainCtx, routerImage+":v3")
	err = w.waitStalledAndRolledBack(ctx, gen, 3*time.Minute)
	stopExplaining()
	if err != nil {
		return err
	}
	if err := w.expectServing(ctx, routerImage+":v2"); err != nil {
		return err
	}
	before := traffic.snapshot()
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	stillV2 := servedOnlyBy(before, traffic.snapshot(), "v2")
	v2v3 := traffic.stop()
	stopLines()
	w.summary("v3", act3)
	printf("\n  v3 missed its %d s progress deadline in us-east and was rolled back there; eu-west and ap-south were never touched; v2 serves every shard.\n", progressDeadline)

	heading("Traffic, per region, over each act")
	printf("%s", tables(
		tableRow{"v1 → v2 (migration, gate, shard by shard)", v1v2},
		tableRow{"v2 → v3 (never ready, rolled back)", v2v3},
	))
	printf("\n")
	verdict := func(what string, err error) {
		if err != nil {
			printf("  FAIL  %s: %v\n", what, err)
		} else {
			printf("  ok    %s\n", what)
		}
	}
	verdict("v1 → v2: no 404 and no error in any region, v2 answering everywhere", gated)
	verdict("at the end: v2 answers every request in every region", stillV2)

	heading(fmt.Sprintf("Done in %s", time.Since(began).Round(time.Second)))
	if err := errors.Join(gated, stillV2); err != nil {
		return err
	}
	if o.keep {
		printf("  The cluster stays up: export KUBECONFIG=%s   (Ctrl-C to stop it)\n", cluster.Kubeconfig)
		<-ctx.Done()
	}
	return nil
}

// sleep waits d, or less if the demo is stopped (then it returns why).
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func heading(s string) { printf("\n== %s\n", s) }
