//go:build e2e

// The node agent on a real local control plane (test/localcluster): the real scheduler binds
// pods to process-backed Nodes, the real Job and EndpointSlice controllers react to the statuses
// the agent reports, and kwok keeps its own fake Node beside them. Run with
// `go test -tags e2e ./test/nodeagent/ -count=1 -v` (uses bin/k8s, or $SCHEMAGATE_BIN/k8s).
package nodeagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/schemagate/schemagate/test/localcluster"
)

var (
	agent  *Agent
	client kubernetes.Interface
	// runToken marks this run's helper processes, to find any left behind.
	runToken string
	podCIDR  string
)

// Test images: the test binary itself, in one of helperMain's modes.
const (
	serverImage  = "schemagate.local/test-server:v1"
	exitImage    = "schemagate.local/test-exit:v1"
	missingImage = "schemagate.local/missing:v9"
)

// The agent's Nodes, and kwok's one.
var regions = []string{"us-east-1", "eu-west-1"}

func procNode(region string) string { return "proc-" + region }

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	binDir := filepath.Join("..", "..", "bin", "k8s")
	if d := os.Getenv("SCHEMAGATE_BIN"); d != "" {
		binDir = filepath.Join(d, "k8s")
	}
	state, err := os.MkdirTemp("", "nodeagent-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: binDir, StateDir: filepath.Join(state, "cluster"), Log: os.Stdout,
		Regions: []string{"kwok-region"}, NodesPerRegion: 1,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cluster:", err)
		return 1
	}
	defer cluster.Stop()
	if client, err = kubernetes.NewForConfig(cluster.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	runToken = hex.EncodeToString(b)
	helper := func(mode string) Executable {
		return Executable{Path: self, Env: []string{helperEnv + "=" + mode, "NODEAGENT_RUN=" + runToken}}
	}
	var nodes []NodeSpec
	for _, r := range regions {
		nodes = append(nodes, NodeSpec{Name: procNode(r), Region: r})
	}
	// A range of its own: other agents and programs may be using loopback addresses too.
	podCIDR = fmt.Sprintf("127.%d.%d.0/20", 64+int(b[0])%64, 16*(int(b[1])%16))
	agentStart := time.Now()
	agent, err = Start(ctx, cluster.Config, Options{
		PodCIDR:        podCIDR,
		Nodes:          nodes,
		Images:         map[string]Executable{serverImage: helper("serve"), exitImage: helper("exit")},
		StateDir:       filepath.Join(state, "agent"),
		BackoffInitial: time.Second, BackoffMax: 8 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "node agent:", err)
		return 1
	}
	fmt.Printf("  %-24s ready in %4.1fs  (%d nodes, pods in %s)\n", "node agent", time.Since(agentStart).Seconds(), len(nodes), podCIDR)
	code := m.Run()

	stopStart := time.Now()
	agent.Stop()
	agent.Stop() // idempotent
	fmt.Printf("agent stopped in %.1fs\n", time.Since(stopStart).Seconds())
	if left := helperProcesses(runToken); len(left) > 0 {
		fmt.Printf("FAIL: helper processes left running after Stop: %v\n", left)
		code = 1
	}
	if code != 0 || os.Getenv("SCHEMAGATE_KEEP_LOGS") != "" {
		fmt.Println("logs kept in", state)
	} else {
		cluster.Stop()
		_ = os.RemoveAll(state)
	}
	fmt.Printf("nodeagent e2e wall time %.1fs\n", time.Since(start).Seconds())
	return code
}

// helperProcesses lists the processes whose environment carries this run's token.
func helperProcesses(token string) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "NODEAGENT_RUN="+token) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// eventually polls check every 100ms until it returns "" or timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = check(); last == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not within %s: %s", timeout, last)
}

// waitPod waits until cond holds for the pod and returns it.
func waitPod(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, timeout, func() string {
		var err error
		if p, err = client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		if cond(p) {
			return ""
		}
		return fmt.Sprintf("pod %s/%s not %s: phase %s, %s", ns, name, what, p.Status.Phase, describeContainers(p))
	})
	return p
}

func describeContainers(p *corev1.Pod) string {
	var parts []string
	for _, s := range p.Status.ContainerStatuses {
		st := "?"
		switch {
		case s.State.Running != nil:
			st = "running"
		case s.State.Waiting != nil:
			st = "waiting " + s.State.Waiting.Reason
		case s.State.Terminated != nil:
			st = fmt.Sprintf("terminated %d %s", s.State.Terminated.ExitCode, s.State.Terminated.Reason)
		}
		parts = append(parts, fmt.Sprintf("%s: %s ready=%v restarts=%d", s.Name, st, s.Ready, s.RestartCount))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// processPod is a pod for the agent's Node in region.
func processPod(name, region string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{NodeLabel: NodeLabelValue, RegionLabel: region},
			Containers:   containers,
		},
	}
}

func createPod(t *testing.T, ns string, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
