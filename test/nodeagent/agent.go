// Package nodeagent is a test-only node agent built on virtual-kubelet: it registers Nodes and
// runs every pod bound to them as local processes, each on its own loopback address, with HTTP
// and TCP probes, restart policies, termination messages, logs and graceful deletion, pushing
// each status change to the API at once. kwok's fake Nodes and these real ones can share a
// cluster: kwok only manages Nodes annotated kwok.x-k8s.io/node=fake, these carry no such
// annotation (and the label schemagate.io/node=process, for nodeSelectors).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// NodeLabel marks the Nodes this agent runs; pods choose them with nodeSelector
// {NodeLabel: NodeLabelValue}.
const (
	NodeLabel      = "schemagate.io/node"
	NodeLabelValue = "process"
	// RegionLabel is set from NodeSpec.Region.
	RegionLabel = "topology.kubernetes.io/region"
)

// Executable is the program that stands for a container image.
type Executable struct {
	// Path is the image's entrypoint.
	Path string
	// Args are the image's default arguments (a container's args replace them).
	Args []string
	// Env holds KEY=value pairs set before the container's own env (which overrides them).
	Env []string
}

// NodeSpec describes one Node to register.
type NodeSpec struct {
	Name string
	// Region, if set, becomes the topology.kubernetes.io/region label.
	Region string
	// Labels are added to kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch,
	// type=process and schemagate.io/node=process.
	Labels map[string]string
	// Capacity (also the allocatable) defaults to 8 CPUs, 32Gi of memory and 110 pods.
	Capacity corev1.ResourceList
	// Taints are optional: kwok never takes these Nodes, but other pods might be scheduled here.
	Taints []corev1.Taint
}

// Options configure an Agent.
type Options struct {
	// Nodes to register (at least one).
	Nodes []NodeSpec
	// Images maps an image, exactly as written in a container spec, to the program that runs
	// it. A container whose image is not here waits with ErrImagePull, then ImagePullBackOff.
	Images map[string]Executable
	// StateDir receives pods/<namespace>_<name>_<uid>/<container>/{<run>.log,termination-log}
	// and agent.log (default: a new temporary directory, kept after Stop).
	StateDir string
	// PodCIDR is the range, inside 127.0.0.0/8, that pod addresses come from (DefaultPodCIDR).
	PodCIDR string
	// BackoffInitial and BackoffMax bound the CrashLoopBackOff and ImagePullBackOff delays, which
	// double from one restart to the next (default 10 s and 5 min, the kubelet's).
	BackoffInitial, BackoffMax time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL (default 2 s).
	StopGrace time.Duration
	// Log receives the agent's and virtual-kubelet's log (default StateDir/agent.log).
	Log io.Writer
}

// Agent runs process-backed Nodes.
type Agent struct {
	opts     Options
	stateDir string
	client   kubernetes.Interface
	ips      *ipPool
	log      *slog.Logger
	logFile  *os.File

	imagesMu sync.RWMutex
	images   map[string]Executable

	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister

	providers   map[string]*provider
	controllers []<-chan struct{} // closed when each pod and node controller has returned
	broadcaster record.EventBroadcaster
	kubeletAPI  *kubeletAPI
	cancel      context.CancelFunc

	stopOnce sync.Once
	stopping chan struct{}
}

// Start registers opts.Nodes with the API server at cfg and returns once each is Ready and free
// of not-ready taints, so the scheduler can use it. ctx bounds the start only: the agent runs
// until Stop.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (_ *Agent, err error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("nodeagent: no Nodes")
	}
	if opts.BackoffInitial <= 0 {
		opts.BackoffInitial = 10 * time.Second
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = 5 * time.Minute
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = 2 * time.Second
	}
	if opts.PodCIDR == "" {
		opts.PodCIDR = DefaultPodCIDR
	}
	a := &Agent{opts: opts, stateDir: opts.StateDir, images: map[string]Executable{}, providers: map[string]*provider{}, stopping: make(chan struct{})}
	for k, v := range opts.Images {
		a.images[k] = v
	}
	if a.ips, err = newIPPool(opts.PodCIDR); err != nil {
		return nil, err
	}
	if a.stateDir == "" {
		if a.stateDir, err = os.MkdirTemp("", "nodeagent-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(a.stateDir, "pods"), 0o700); err != nil {
		return nil, err
	}
	w := opts.Log
	if w == nil {
		if a.logFile, err = os.OpenFile(filepath.Join(a.stateDir, "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			return nil, err
		}
		w = a.logFile
	}
	a.log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))

	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.UserAgent = 50, 100, "schemagate-nodeagent"
	if a.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.Stop()
		}
	}()
	if a.kubeletAPI, err = startKubeletAPI(a); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(vklog.WithLogger(context.WithoutCancel(ctx), vkslog.FromSlog(a.log)))
	a.cancel = cancel
	a.broadcaster = record.NewBroadcaster()
	a.broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	shared := informers.NewSharedInformerFactory(a.client, time.Minute)
	cms, secrets, services := shared.Core().V1().ConfigMaps(), shared.Core().V1().Secrets(), shared.Core().V1().Services()
	a.configMaps, a.secrets = cms.Lister(), secrets.Lister()

	type started struct {
		nc *node.NodeController
		pc *node.PodController
	}
	var nodes []started
	for _, spec := range opts.Nodes {
		if spec.Name == "" || a.providers[spec.Name] != nil {
			return nil, fmt.Errorf("nodeagent: node name %q is empty or repeated", spec.Name)
		}
		recorder := a.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: spec.Name})
		prov := newProvider(a, spec.Name, recorder)
		a.providers[spec.Name] = prov
		pods := informers.NewSharedInformerFactoryWithOptions(a.client, time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", spec.Name).String()
		}))
		pc, err := node.NewPodController(node.PodControllerConfig{
			PodClient: a.client.CoreV1(), PodInformer: pods.Core().V1().Pods(), EventRecorder: recorder, Provider: prov,
			ConfigMapInformer: cms, SecretInformer: secrets, ServiceInformer: services,
			// status.podIP is only known here: the agent resolves env itself (env.go).
			SkipDownwardAPIResolution: true,
		})
		if err != nil {
			return nil, err
		}
		nc, err := node.NewNodeController(node.NewNaiveNodeProvider(), a.nodeObject(spec), a.client.CoreV1().Nodes(),
			node.WithNodeEnableLeaseV1(a.client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 0))
		if err != nil {
			return nil, err
		}
		if err := prov.watchGates(pods.Core().V1().Pods().Informer()); err != nil {
			return nil, err
		}
		pods.Start(runCtx.Done())
		nodes = append(nodes, started{nc, pc})
		a.controllers = append(a.controllers, pc.Done(), nc.Done())
	}
	shared.Start(runCtx.Done())
	for _, n := range nodes {
		go n.pc.Run(runCtx, 2) //nolint:errcheck // reported through Done/Err
		go n.nc.Run(runCtx)    //nolint:errcheck
	}
	for _, n := range nodes {
		for _, c := range []interface {
			Ready() <-chan struct{}
			Done() <-chan struct{}
			Err() error
		}{n.pc, n.nc} {
			select {
			case <-c.Ready():
			case <-c.Done():
				return nil, fmt.Errorf("nodeagent: controller exited: %v", c.Err())
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if err := a.waitSchedulable(ctx); err != nil {
		return nil, err
	}
	a.logf("started %d node(s); state in %s", len(opts.Nodes), a.stateDir)
	return a, nil
}

// Stop ends the node and pod controllers, then every pod's processes (SIGTERM to each process
// group, SIGKILL after Options.StopGrace). The Nodes stay registered, as a stopped kubelet's
// do. Stop may be called more than once.
func (a *Agent) Stop() {
	a.stopOnce.Do(func() {
		close(a.stopping)
		if a.cancel != nil {
			a.cancel()
		}
		timeout := time.After(10 * time.Second)
		for _, done := range a.controllers {
			select {
			case <-done:
			case <-timeout:
			}
		}
		var wg sync.WaitGroup
		for _, prov := range a.providers {
			wg.Add(1)
			go func() { defer wg.Done(); prov.stopAll(a.opts.StopGrace) }()
		}
		wg.Wait()
		if a.broadcaster != nil {
			a.broadcaster.Shutdown()
		}
		if a.kubeletAPI != nil {
			a.kubeletAPI.close()
		}
		a.logf("stopped")
		if a.logFile != nil {
			_ = a.logFile.Close()
		}
	})
}

func (a *Agent) stopped() bool {
	select {
	case <-a.stopping:
		return true
	default:
		return false
	}
}

// StateDir is where pods' logs and termination messages are kept.
func (a *Agent) StateDir() string { return a.stateDir }

// SetImage adds or replaces an image in the table; containers waiting in ImagePullBackOff for
// it start at their next retry.
func (a *Agent) SetImage(image string, exe Executable) {
	a.imagesMu.Lock()
	defer a.imagesMu.Unlock()
	a.images[image] = exe
}

func (a *Agent) image(image string) (Executable, bool) {
	a.imagesMu.RLock()
	defer a.imagesMu.RUnlock()
	exe, ok := a.images[image]
	return exe, ok
}

// backoff is the delay before restart or retry number n (from 1): BackoffInitial doubled each
// time, at most BackoffMax.
func (a *Agent) backoff(n int) time.Duration {
	d := a.opts.BackoffInitial
	for i := 1; i < n && d < a.opts.BackoffMax; i++ {
		d *= 2
	}
	return min(d, a.opts.BackoffMax)
}

// findPod returns the pod namespace/name on any of the agent's Nodes.
func (a *Agent) findPod(namespace, name string) *pod {
	for _, prov := range a.providers {
		if p := prov.get(namespace, name); p != nil {
			return p
		}
	}
	return nil
}

// ContainerPID is the process id (and process group id) of a running container, 0 if none.
func (a *Agent) ContainerPID(namespace, podName, container string) int {
	p := a.findPod(namespace, podName)
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.specs {
		if c.Name == container && p.procs[i] != nil {
			return p.procs[i].pid()
		}
	}
	return 0
}

// LogPath is the log file of a container's current (or previous) run.
func (a *Agent) LogPath(namespace, podName, container string, previous bool) (string, error) {
	p := a.findPod(namespace, podName)
	if p == nil {
		return "", fmt.Errorf("pod %s/%s is not on this agent's nodes", namespace, podName)
	}
	return p.containerLogPath(container, previous)
}

func (a *Agent) logf(format string, args ...any) {
	a.log.Info(fmt.Sprintf(format, args...))
}
