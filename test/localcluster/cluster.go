// Package localcluster starts a real Kubernetes control plane on loopback, built from source by
// hack/build-binaries.sh: etcd → kube-apiserver → kube-controller-manager (real ReplicaSet and Job
// controllers) → kube-scheduler (pods bind to their region's nodes) → kwok (fake Nodes in several
// regions standing in for kubelets; see stages.yaml for how a pod can be told to fail or never
// become ready). Every process listens on 127.0.0.1 on a free port, runs in its own process group
// and dies with its parent; Stop ends them all.
package localcluster

import (
	"context"
	"crypto/tls"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

//go:embed stages.yaml
var stages []byte

// RegionLabel is the node label each fake Node carries with its region.
const RegionLabel = "topology.kubernetes.io/region"

// kwokNodeAnnotation marks the Nodes kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// Options configure a local cluster.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
	BinDir string
	// StateDir receives certificates, etcd's data, logs/<process>.log and kubeconfig.
	StateDir string
	// Regions get NodesPerRegion fake Nodes each (default us-east-1, eu-west-1, ap-south-1; 2).
	Regions        []string
	NodesPerRegion int
	// PodsPerNode is each fake Node's pod capacity (default 110).
	PodsPerNode int
	// Log receives one line per step (may be nil).
	Log io.Writer
	// APIServerArgs are appended to kube-apiserver's flags, e.g.
	// "--enable-admission-plugins=OwnerReferencesPermissionEnforcement" (nil: none).
	APIServerArgs []string
	// Name, if set, starts each of Start's log lines ("[eu-west-1] etcd ready in …"), for
	// several clusters logging to one writer (test/fleet).
	Name string
	// NoKwok starts no kwok and registers no fake Nodes (Regions and NodesPerRegion are then
	// unused): the cluster's only Nodes are those a node agent registers.
	NoKwok bool
}

// Cluster is a running local control plane.
type Cluster struct {
	opts Options
	// Kubeconfig is the path of an admin kubeconfig (group system:masters).
	Kubeconfig string
	// Config is the same as a rest.Config.
	Config *rest.Config

	pki    pki
	ports  map[string]int
	procs  []*Process
	byName map[string]*Process
}

// Start brings the cluster up and waits until each component is healthy and every Node is Ready.
// On error, whatever was started is stopped.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if len(opts.Regions) == 0 {
		opts.Regions = []string{"us-east-1", "eu-west-1", "ap-south-1"}
	}
	if opts.NodesPerRegion == 0 {
		opts.NodesPerRegion = 2
	}
	if opts.PodsPerNode == 0 {
		opts.PodsPerNode = 110
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	for _, d := range []string{"pki", "etcd", "logs"} {
		if err := os.MkdirAll(filepath.Join(opts.StateDir, d), 0o700); err != nil {
			return nil, err
		}
	}
	c := &Cluster{opts: opts, ports: map[string]int{}, byName: map[string]*Process{}}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.pki, err = newPKI(filepath.Join(opts.StateDir, "pki")); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	for _, name := range []string{"etcd-client", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"} {
		if c.ports[name], err = FreePort(); err != nil {
			return nil, err
		}
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	stagesFile := filepath.Join(opts.StateDir, "kwok-stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		return nil, err
	}

	steps := []struct {
		name  string
		args  []string
		ready func(context.Context) error
	}{
		{"etcd", c.etcdArgs(), c.etcdHealthy},
		{"kube-apiserver", c.apiserverArgs(), c.apiserverReady},
		{"kube-controller-manager", c.controllerManagerArgs(), c.httpsHealthy("controller-manager")},
		{"kube-scheduler", c.schedulerArgs(), c.httpsHealthy("scheduler")},
		{"kwok", c.kwokArgs(stagesFile), func(context.Context) error { return nil }},
	}
	if opts.NoKwok {
		steps = steps[:len(steps)-1]
	}
	prefix := ""
	if opts.Name != "" {
		prefix = "[" + opts.Name + "] "
	}
	for _, s := range steps {
		start := time.Now()
		if err := c.startProcess(s.name, s.args); err != nil {
			return nil, err
		}
		if err := c.waitFor(ctx, s.name, 60*time.Second, s.ready); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Log, "  %s%-24s ready in %4.1fs  (log: %s)\n", prefix, s.name, time.Since(start).Seconds(), c.byName[s.name].Log)
	}
	if opts.NoKwok {
		return c, nil
	}
	start := time.Now()
	if err := c.createNodes(ctx); err != nil {
		return nil, err
	}
	if err := c.waitFor(ctx, "kwok", 60*time.Second, c.nodesReady); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "  %s%-24s ready in %4.1fs  (%d regions × %d nodes)\n", prefix, "nodes", time.Since(start).Seconds(), len(opts.Regions), opts.NodesPerRegion)
	return c, nil
}

// Stop ends every process, most dependent first (SIGTERM, then SIGKILL after 5 s).
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(5 * time.Second)
	}
}

// StopComponent stops one process (e.g. "kube-apiserver" for an outage test).
func (c *Cluster) StopComponent(name string) {
	if p := c.byName[name]; p != nil {
		p.Stop(10 * time.Second)
	}
}

// RestartComponent starts a stopped process again with the same arguments and waits for it.
func (c *Cluster) RestartComponent(ctx context.Context, name string) error {
	p := c.byName[name]
	if p == nil {
		return fmt.Errorf("no component %s", name)
	}
	if err := p.Start(); err != nil {
		return err
	}
	ready := map[string]func(context.Context) error{
		"etcd": c.etcdHealthy, "kube-apiserver": c.apiserverReady,
		"kube-controller-manager": c.httpsHealthy("controller-manager"), "kube-scheduler": c.httpsHealthy("scheduler"),
	}[name]
	if ready == nil {
		return nil
	}
	return c.waitFor(ctx, name, 60*time.Second, ready)
}

func (c *Cluster) startProcess(name string, args []string) error {
	path, err := binary(c.opts.BinDir, name)
	if err != nil {
		return err
	}
	p, err := StartProcess(name, path, args, filepath.Join(c.opts.StateDir, "logs", name+".log"))
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	c.byName[name] = p
	return nil
}

func (c *Cluster) waitFor(ctx context.Context, name string, timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p := c.byName[name]; p != nil && !p.Running() {
			return fmt.Errorf("%s exited; the end of its log:\n%s", name, p.Tail(3000))
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within %s: %v; the end of its log:\n%s", name, timeout, last, c.byName[name].Tail(3000))
}

func (c *Cluster) url(name string) string {
	return "https://127.0.0.1:" + strconv.Itoa(c.ports[name])
}

func (c *Cluster) etcdURL() string { return "http://127.0.0.1:" + strconv.Itoa(c.ports["etcd-client"]) }

func (c *Cluster) etcdArgs() []string {
	peer := "http://127.0.0.1:" + strconv.Itoa(c.ports["etcd-peer"])
	return []string{
		"--name=default", "--data-dir=" + filepath.Join(c.opts.StateDir, "etcd"),
		"--listen-client-urls=" + c.etcdURL(), "--advertise-client-urls=" + c.etcdURL(),
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer, "--unsafe-no-fsync", "--log-level=warn",
		"--listen-metrics-urls=",
	}
}

func (c *Cluster) apiserverArgs() []string {
	return append([]string{
		"--etcd-servers=" + c.etcdURL(),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(c.ports["apiserver"]),
		"--cert-dir=" + filepath.Join(c.opts.StateDir, "pki"),
		"--tls-cert-file=" + c.pki.path("apiserver.crt"), "--tls-private-key-file=" + c.pki.path("apiserver.key"),
		"--client-ca-file=" + c.pki.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.path("sa.pub"),
		"--service-account-signing-key-file=" + c.pki.path("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--enable-priority-and-fairness=false",
	}, c.opts.APIServerArgs...)
}

func (c *Cluster) controllerManagerArgs() []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.ports["controller-manager"]),
		"--cert-dir=" + filepath.Join(c.opts.StateDir, "pki", "kcm"),
		"--service-account-private-key-file=" + c.pki.path("sa.key"),
		"--root-ca-file=" + c.pki.path("ca.crt"),
		"--use-service-account-credentials", "--controllers=*", "--leader-elect=false",
		// kwok's heartbeats stop while kube-apiserver is down in the outage test; a longer grace
		// keeps the node lifecycle controller from marking every node NotReady when it returns.
		"--node-monitor-grace-period=3m",
		// No cloud, no node IPAM: kwok assigns pod IPs itself.
		"--allocate-node-cidrs=false",
	}
}

func (c *Cluster) schedulerArgs() []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig, "--authorization-kubeconfig=" + c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.ports["scheduler"]),
		"--cert-dir=" + filepath.Join(c.opts.StateDir, "pki", "scheduler"),
		"--leader-elect=false",
	}
}

func (c *Cluster) kwokArgs(stagesFile string) []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig, "--config=" + stagesFile,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(c.ports["kwok"]),
		"--node-ip=127.0.0.1", "--cidr=10.244.0.0/16",
	}
}

func (c *Cluster) writeKubeconfig() error {
	c.Kubeconfig = filepath.Join(c.opts.StateDir, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["schemagate-local"] = &clientcmdapi.Cluster{Server: c.url("apiserver"), CertificateAuthority: c.pki.path("ca.crt")}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: c.pki.path("admin.crt"), ClientKey: c.pki.path("admin.key")}
	cfg.Contexts["schemagate-local"] = &clientcmdapi.Context{Cluster: "schemagate-local", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "schemagate-local"
	if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
		return err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 100, 200
	c.Config = rc
	return nil
}

func (c *Cluster) etcdHealthy(ctx context.Context) error {
	return httpOK(ctx, http.DefaultClient, c.etcdURL()+"/health")
}

func (c *Cluster) apiserverReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%v: %s", err, body)
	}
	return nil
}

func (c *Cluster) httpsHealthy(port string) func(context.Context) error {
	// The components serve /healthz with a self-signed certificate of their own.
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe
	return func(ctx context.Context) error { return httpOK(ctx, insecure, c.url(port)+"/healthz") }
}

func httpOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	return nil
}

// NodeName is the name of the i-th fake Node (from 0) of region.
func NodeName(region string, i int) string { return fmt.Sprintf("kwok-%s-%d", region, i) }

func (c *Cluster) createNodes(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("128Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(c.opts.PodsPerNode), resource.DecimalSI),
	}
	for _, region := range c.opts.Regions {
		for i := 0; i < c.opts.NodesPerRegion; i++ {
			name := NodeName(region, i)
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{
					Name:        name,
					Annotations: map[string]string{kwokNodeAnnotation: "fake"},
					Labels: map[string]string{RegionLabel: region, "kubernetes.io/hostname": name,
						"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"},
				},
				Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
			}
			if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating node %s: %w", name, err)
			}
		}
	}
	return nil
}

func (c *Cluster) nodesReady(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if want := len(c.opts.Regions) * c.opts.NodesPerRegion; ready < want {
		return fmt.Errorf("%d of %d nodes Ready", ready, want)
	}
	return nil
}

// FreePort returns a free TCP port on 127.0.0.1.
//
// Ports are drawn from 10000–32767, below Linux's ephemeral range (32768–60999): a port the kernel
// hands out for :0 is also what outgoing connections take as their source port, so between this
// check and the component's bind another connection (or another cluster's FreePort, with several
// clusters started at once) could take it, and the component then fails with "address already in
// use" while its health check reaches someone else's server. A port is never handed out twice in
// one process.
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(32768-10000)
		if portsGiven[port] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsGiven[port] = true
		return port, nil
	}
	return 0, errors.New("no free port on 127.0.0.1 in 10000-32767 after 1000 tries")
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// APIServerAddr is kube-apiserver's host:port on loopback (it serves TLS with a certificate for
// 127.0.0.1 and localhost, signed by CAFile).
func (c *Cluster) APIServerAddr() string { return "127.0.0.1:" + strconv.Itoa(c.ports["apiserver"]) }

// CAFile is the path of the cluster CA's certificate (PEM).
func (c *Cluster) CAFile() string { return c.pki.path("ca.crt") }

// PIDs maps each component running now ("etcd", "kube-apiserver", …) to its process id, for
// memory accounting; stopped components are left out.
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range c.procs {
		if pid := p.PID(); pid != 0 {
			out[p.Name] = pid
		}
	}
	return out
}
