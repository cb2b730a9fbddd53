// Package fleet starts a hub cluster and one cluster per region on loopback, each a full
// test/localcluster control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler), for tests of a manager in the hub driving shards in spoke clusters. Each region
// cluster sits behind a Proxy (partition the hub from it without stopping it), can hand out the
// hub's credentials for one of its namespaces (config/spoke applied; SpokeCredentials), and runs
// a process-backed node agent (test/nodeagent) so that pods really run there.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/realstack"
)

// Options configure a fleet.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
	// (hack/build-binaries.sh's bin/k8s).
	BinDir string
	// StateDir receives hub/ and <region>/ (each a localcluster StateDir, plus agent/ for the
	// node agent's pods).
	StateDir string
	// Regions get one cluster each (default us-east-1, eu-west-1, ap-south-1).
	Regions []string
	// Log receives one line per step (may be nil).
	Log io.Writer
	// RouterBinary, if set, is examples/edge-router built (schemagate-schema must sit beside
	// it): each region cluster then runs a node agent with one process Node, process-<region>,
	// running it for the images realstack.RouterImage:<revision> of Revisions (default v1, v2).
	// Empty: no agent.
	RouterBinary string
	Revisions    []string
	// FakeNodes, if above 0, gives every cluster (the hub too) that many kwok Nodes labelled
	// with the cluster's name as their region (localcluster.RegionLabel), each with room for
	// PodsPerNode pods (default 110): pods there become Ready without running, for benchmarks
	// (test/bench). 0: no kwok.
	FakeNodes   int
	PodsPerNode int
}

// Fleet is a running hub and its regions.
type Fleet struct {
	Hub *Hub
	// Regions in the order of Options.Regions.
	Regions []*Region

	opts    Options
	started time.Duration
}

// Hub is the cluster the manager runs against.
type Hub struct {
	*localcluster.Cluster
	Client kubernetes.Interface
}

// StopAPIServer stops the hub's kube-apiserver (SIGTERM, SIGKILL after 10 s): "the hub is gone"
// for whatever talks to it; etcd and the rest keep running.
func (h *Hub) StopAPIServer() { h.StopComponent("kube-apiserver") }

// StartAPIServer starts the hub's kube-apiserver again with the same flags and port and waits
// until it is ready (at most 60 s).
func (h *Hub) StartAPIServer(ctx context.Context) error {
	return h.RestartComponent(ctx, "kube-apiserver")
}

// Region is one spoke cluster.
type Region struct {
	Name string
	*localcluster.Cluster
	// Client is an admin client straight to the region's kube-apiserver (not through Proxy).
	Client kubernetes.Interface
	// Proxy stands between the hub and this region's kube-apiserver.
	Proxy *Proxy
	// Agent runs the region's process Node (nil without Options.RouterBinary).
	Agent *nodeagent.Agent

	kubectl string
	cidr    string
}

// Start brings the hub and every region up concurrently and returns when all are ready; on error
// whatever was started is stopped. ctx bounds the start only.
func Start(ctx context.Context, opts Options) (_ *Fleet, err error) {
	if len(opts.Regions) == 0 {
		opts.Regions = []string{"us-east-1", "eu-west-1", "ap-south-1"}
	}
	if len(opts.Revisions) == 0 {
		opts.Revisions = []string{"v1", "v2"}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	opts.Log = &syncWriter{w: opts.Log}
	begin := time.Now()
	f := &Fleet{opts: opts, Hub: &Hub{}, Regions: make([]*Region, len(opts.Regions))}
	for i, name := range opts.Regions {
		f.Regions[i] = &Region{Name: name, kubectl: filepath.Join(opts.BinDir, "kubectl")}
	}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(opts.Regions)+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		errs[0] = f.startHub(ctx)
	}()
	for i, r := range f.Regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.startRegion(ctx, r); err != nil {
				errs[i+1] = fmt.Errorf("region %s: %w", r.Name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	f.started = time.Since(begin)
	fmt.Fprintf(opts.Log, "fleet: hub and %d regions up in %.1fs\n", len(f.Regions), f.started.Seconds())
	return f, nil
}

func (f *Fleet) cluster(ctx context.Context, name string) (*localcluster.Cluster, kubernetes.Interface, error) {
	c, err := localcluster.Start(ctx, localcluster.Options{BinDir: f.opts.BinDir, StateDir: filepath.Join(f.opts.StateDir, name),
		Log: f.opts.Log, Name: name, NoKwok: f.opts.FakeNodes == 0,
		Regions: []string{name}, NodesPerRegion: f.opts.FakeNodes, PodsPerNode: f.opts.PodsPerNode})
	if c == nil || err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	return c, cs, err
}

func (f *Fleet) startHub(ctx context.Context) error {
	c, cs, err := f.cluster(ctx, "hub")
	if c != nil {
		f.Hub.Cluster, f.Hub.Client = c, cs
	}
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

func (f *Fleet) startRegion(ctx context.Context, r *Region) error {
	c, cs, err := f.cluster(ctx, r.Name)
	if c != nil {
		r.Cluster, r.Client = c, cs
	}
	if err != nil {
		return err
	}
	if r.Proxy, err = NewProxy(c.APIServerAddr()); err != nil {
		return err
	}
	if f.opts.RouterBinary == "" {
		return nil
	}
	start := time.Now()
	r.cidr = podCIDR()
	dir := filepath.Join(f.opts.StateDir, r.Name, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if r.Agent, err = realstack.StartAgentForRegions(ctx, c.Config, r.cidr, f.opts.RouterBinary, dir, []string{r.Name}, f.opts.Revisions...); err != nil {
		return fmt.Errorf("node agent: %w", err)
	}
	fmt.Fprintf(f.opts.Log, "  [%s] %-24s ready in %4.1fs  (pods in %s; state %s)\n", r.Name, "node agent", time.Since(start).Seconds(), r.cidr, dir)
	return nil
}

// Region returns the region named name, nil if none.
func (f *Fleet) Region(name string) *Region {
	for _, r := range f.Regions {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Stop ends every agent (and its pods), proxy and cluster. It may be called more than once.
func (f *Fleet) Stop() {
	var wg sync.WaitGroup
	for _, r := range f.Regions {
		if r == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.stop()
		}()
	}
	if f.Hub.Cluster != nil {
		wg.Add(1)
		go func() { defer wg.Done(); f.Hub.Stop() }()
	}
	wg.Wait()
}

func (r *Region) stop() {
	if r.Agent != nil {
		r.Agent.Stop()
	}
	if r.cidr != "" {
		releaseCIDR(r.cidr)
		r.cidr = ""
	}
	if r.Proxy != nil {
		r.Proxy.Close()
	}
	if r.Cluster != nil {
		r.Cluster.Stop()
	}
}

// ProxiedConfig is the region's admin rest.Config with the Proxy as its server: what the hub
// would reach, cut when the proxy is.
func (r *Region) ProxiedConfig() *rest.Config {
	cfg := rest.CopyConfig(r.Config)
	cfg.Host = "https://" + r.Proxy.Addr()
	return cfg
}

// syncWriter serialises the clusters' log lines, which are written from several goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
