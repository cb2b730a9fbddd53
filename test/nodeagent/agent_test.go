//go:build e2e

package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var bg = context.Background()

// httpClient talks to pods directly, never through a proxy.
var httpClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// serverContainer serves HTTP on port "http" (8080), with a readiness probe on /ready: without
// one a container is ready as soon as its process runs, before it listens.
func serverContainer(name string, args ...string) corev1.Container {
	return corev1.Container{
		Name: name, Image: serverImage, Args: args,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1,
		},
	}
}

func exitContainer(name string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: exitImage, Args: args}
}

func httpGet(path string, port int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}}}
}

// call sends a GET to a pod and returns the status code.
func call(t *testing.T, ip string, port int, path string, out any) int {
	t.Helper()
	resp, err := httpClient.Get(fmt.Sprintf("http://%s:%d%s", ip, port, path))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

func TestReadinessFollowsTheProbe(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	c := serverContainer("web", "--ready=false")
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	createPod(t, ns, processPod("web", regions[0], c))
	p := waitPod(t, ns, "web", 30*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || !netip.MustParsePrefix(podCIDR).Contains(ip) || p.Status.HostIP != "127.0.0.1" || p.Spec.NodeName != procNode(regions[0]) {
		t.Fatalf("podIP %q hostIP %q node %q", p.Status.PodIP, p.Status.HostIP, p.Spec.NodeName)
	}
	// The process runs and answers, but /ready says 503: the pod must stay unready.
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		if p, _ = client.CoreV1().Pods(ns).Get(bg, "web", metav1.GetOptions{}); podReady(p) {
			t.Fatal("Ready while the readiness endpoint answers 503")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := call(t, p.Status.PodIP, 8080, "/ready", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready answered %d", code)
	}
	flip := time.Now()
	call(t, p.Status.PodIP, 8080, "/set-ready?v=true", nil)
	waitPod(t, ns, "web", 10*time.Second, "Ready", podReady)
	t.Logf("Ready %.1fs after /ready turned 200", time.Since(flip).Seconds())
	flip = time.Now()
	call(t, p.Status.PodIP, 8080, "/set-ready?v=false", nil)
	waitPod(t, ns, "web", 10*time.Second, "unready", func(p *corev1.Pod) bool { return !podReady(p) })
	t.Logf("unready %.1fs after /ready turned 503", time.Since(flip).Seconds())
}

func TestDownwardAPIEnvAndCommand(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"color": "blue"}}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(bg, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	c := serverContainer("env")
	// command names the image's entrypoint (by base name): it replaces it, and drops its args.
	c.Command = []string{"/usr/local/bin/" + filepath.Base(self)}
	c.Args = []string{"--port=$(PORT)", "--ready=true"}
	c.Ports[0].ContainerPort = 8081
	c.Env = []corev1.EnvVar{
		{Name: "PORT", Value: "8081"},
		{Name: "MY_POD_IP", ValueFrom: field("status.podIP")},
		{Name: "MY_NAME", ValueFrom: field("metadata.name")},
		{Name: "MY_NAMESPACE", ValueFrom: field("metadata.namespace")},
		{Name: "MY_APP", ValueFrom: field("metadata.labels['app']")},
		{Name: "MY_NODE", ValueFrom: field("spec.nodeName")},
		{Name: "MY_HOST_IP", ValueFrom: field("status.hostIP")},
		{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "color"}}},
		{Name: "GREETING", Value: "hello $(MY_NAME) in $(COLOR), $$(MY_NAME) stays"},
	}
	createPod(t, ns, processPod("env", regions[1], c))
	p := waitPod(t, ns, "env", 30*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && podReady(p) })
	var got struct {
		Env  map[string]string
		Args []string
	}
	call(t, p.Status.PodIP, 8081, "/env", &got)
	want := map[string]string{
		"POD_IP": p.Status.PodIP, "MY_POD_IP": p.Status.PodIP, "MY_NAME": "env", "MY_NAMESPACE": ns, "MY_APP": "env",
		"MY_NODE": procNode(regions[1]), "MY_HOST_IP": "127.0.0.1", "COLOR": "blue", "HOSTNAME": "env",
		"GREETING":                 "hello env in blue, $(MY_NAME) stays",
		"TERMINATION_MESSAGE_PATH": filepath.Join(agent.StateDir(), "pods", fmt.Sprintf("%s_env_%s", ns, p.UID), "env", "termination-log"),
	}
	for k, v := range want {
		if got.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, got.Env[k], v)
		}
	}
	if strings.Join(got.Args, " ") != "--port=8081 --ready=true" {
		t.Errorf("args %q", got.Args)
	}
}

func TestJobCompletes(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := processPod("", regions[0], exitContainer("migrate", "--lines=3", "--after=500ms"))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "migrate"}}, Spec: pod.Spec},
		},
	}
	start := time.Now()
	if _, err := client.BatchV1().Jobs(ns).Create(bg, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		j, err := client.BatchV1().Jobs(ns).Get(bg, "migrate", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return fmt.Sprintf("job not complete: %+v", j.Status)
	})
	t.Logf("Job complete %.1fs after creation", time.Since(start).Seconds())
	pods, err := client.CoreV1().Pods(ns).List(bg, metav1.ListOptions{LabelSelector: "job=migrate"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("job pods: %v %d", err, len(pods.Items))
	}
	p := pods.Items[0]
	term := p.Status.ContainerStatuses[0].State.Terminated
	if p.Status.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 || term.Reason != "Completed" || term.StartedAt.IsZero() || term.FinishedAt.IsZero() {
		t.Fatalf("pod %s: %s", p.Status.Phase, describeContainers(&p))
	}
	// kubectl logs: the API server asks the Node's kubelet endpoint, which the agent serves.
	logs, err := client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "migrate", TailLines: new(int64(2))}).DoRaw(bg)
	if err != nil || string(logs) != "log line 2\nlog line 3\n" {
		t.Fatalf("logs: %v %q", err, logs)
	}
}

func TestExitCodeAndTerminationMessage(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	logs := exitContainer("logs", "--code=4", "--lines=100")
	logs.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	noCmd := exitContainer("nocmd")
	noCmd.Command = []string{"no-such-program-on-this-host"}
	pod := processPod("fail", regions[1], exitContainer("msg", "--code=3", "--message-bytes=5000"), logs, noCmd)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, ns, pod)
	p := waitPod(t, ns, "fail", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	for _, s := range p.Status.ContainerStatuses[:2] {
		term := s.State.Terminated
		if term == nil || term.Reason != "Error" || s.RestartCount != 0 {
			t.Fatalf("%s: %s", s.Name, describeContainers(p))
		}
		switch s.Name {
		case "msg":
			// The kubelet keeps the last 4096 bytes of the file.
			var full strings.Builder
			for full.Len() < 5000-3 {
				full.WriteByte('0' + byte(full.Len()%10))
			}
			want := (full.String() + "END")[5000-4096:]
			if term.ExitCode != 3 || term.Message != want {
				t.Errorf("msg: exit %d, message of %d bytes: %.20q…%q", term.ExitCode, len(term.Message), term.Message, term.Message[max(len(term.Message)-10, 0):])
			}
		case "logs":
			lines := strings.Split(strings.TrimSuffix(term.Message, "\n"), "\n")
			if term.ExitCode != 4 || len(lines) != 80 || lines[0] != "log line 21" || lines[79] != "log line 100" {
				t.Errorf("logs: exit %d, %d lines from %q", term.ExitCode, len(lines), lines[0])
			}
		}
	}
	// A command that cannot be run: exit code 128, reason StartError, as with a container runtime.
	if term := p.Status.ContainerStatuses[2].State.Terminated; term == nil || term.ExitCode != 128 || term.Reason != "StartError" || !strings.Contains(term.Message, "no-such-program") {
		t.Errorf("nocmd: %s %+v", describeContainers(p), term)
	}
}

func TestNodesAreRegisteredWithLeases(t *testing.T) {
	t.Parallel()
	for _, r := range regions {
		n, err := client.CoreV1().Nodes().Get(bg, procNode(r), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels[NodeLabel] != NodeLabelValue || n.Labels[RegionLabel] != r || n.Annotations["kwok.x-k8s.io/node"] != "" || !nodeSchedulable(n) ||
			n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 || len(n.Status.Addresses) != 1 || n.Status.Addresses[0].Address != "127.0.0.1" {
			t.Fatalf("node %s: labels %v annotations %v taints %v status %+v", n.Name, n.Labels, n.Annotations, n.Spec.Taints, n.Status)
		}
		// The node lifecycle controller watches leases: the agent renews them (every 10 s).
		eventually(t, 15*time.Second, func() string {
			l, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(bg, n.Name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != n.Name || l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > 12*time.Second {
				return fmt.Sprintf("lease %+v", l.Spec)
			}
			return ""
		})
	}
	// kwok's Node is there too, and it is kwok's.
	kwokNodes, err := client.CoreV1().Nodes().List(bg, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil || len(kwokNodes.Items) != 1 || kwokNodes.Items[0].Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Fatalf("kwok nodes: %v %+v", err, kwokNodes)
	}
}

func TestOnFailureRestartsThenSucceeds(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	pod := processPod("flaky", regions[0], exitContainer("c", "--code=1", "--fail-first"))
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	createPod(t, ns, pod)
	p := waitPod(t, ns, "flaky", 30*time.Second, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	s := p.Status.ContainerStatuses[0]
	if s.RestartCount != 1 || s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ExitCode != 1 || s.State.Terminated.ExitCode != 0 {
		t.Fatalf("%s", describeContainers(p))
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	createPod(t, ns, processPod("crash", regions[1], exitContainer("c", "--code=2")))
	// Back-off here starts at 1 s and doubles (Options.BackoffInitial): restarts come after
	// about 1 s, then 2 s, then 4 s.
	var seen []time.Time
	sawBackOff := false
	eventually(t, 40*time.Second, func() string {
		p, err := client.CoreV1().Pods(ns).Get(bg, "crash", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Sprint("no status ", err)
		}
		s := p.Status.ContainerStatuses[0]
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			t.Fatalf("phase %s under restartPolicy Always", p.Status.Phase)
		}
		if w := s.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
			if s.LastTerminationState.Terminated == nil || s.LastTerminationState.Terminated.ExitCode != 2 {
				t.Fatalf("in back-off without the last exit: %+v", s.LastTerminationState)
			}
		}
		for len(seen) < int(s.RestartCount) {
			seen = append(seen, time.Now())
		}
		if len(seen) >= 4 && sawBackOff {
			return ""
		}
		return fmt.Sprintf("%d restarts so far: %s", s.RestartCount, describeContainers(p))
	})
	gaps := []time.Duration{seen[1].Sub(seen[0]), seen[2].Sub(seen[1]), seen[3].Sub(seen[2])}
	t.Logf("gaps between restarts: %v", gaps)
	// Each gap is measured between two polls of the API (100 ms apart), hence the slack.
	if gaps[0] < 700*time.Millisecond || gaps[1] < 1500*time.Millisecond || gaps[2] < 3500*time.Millisecond ||
		gaps[1] < gaps[0]+500*time.Millisecond || gaps[2] < gaps[1]+time.Second {
		t.Fatalf("back-off does not double: %v", gaps)
	}
}

// A container past its memory limit is killed and reported as the kubelet reports an OOM kill:
// last termination OOMKilled, exit code 137, a restart under restartPolicy Always, Ready again.
func TestMemoryLimitOOMKills(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	c := serverContainer("c")
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("96Mi")}
	createPod(t, ns, processPod("hungry", regions[0], c))
	p := waitPod(t, ns, "hungry", 30*time.Second, "Ready", podReady)
	if s := p.Status.ContainerStatuses[0]; s.RestartCount != 0 {
		t.Fatalf("restarted below its limit: %s", describeContainers(p))
	}
	call(t, p.Status.PodIP, 8080, "/grow?mb=32", nil) // well below the limit: nothing happens
	time.Sleep(500 * time.Millisecond)
	if p, _ := client.CoreV1().Pods(ns).Get(bg, "hungry", metav1.GetOptions{}); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("killed below its limit: %s", describeContainers(p))
	}
	// The request may not be answered: the process dies while it allocates.
	go func() { _, _ = http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/grow?mb=160") }()
	p = waitPod(t, ns, "hungry", 30*time.Second, "OOM-killed, restarted and Ready", func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount == 1 && podReady(p)
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.Reason != "OOMKilled" || last.ExitCode != 137 {
		t.Fatalf("last termination %+v, want OOMKilled with exit code 137", last)
	}
}

func TestLivenessFailureRestartsTheContainer(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	c := serverContainer("c")
	c.LivenessProbe = httpGet("/healthz", 8080)
	c.LivenessProbe.PeriodSeconds, c.LivenessProbe.FailureThreshold = 1, 2
	grace := int64(1)
	pod := processPod("live", regions[0], c)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	createPod(t, ns, pod)
	p := waitPod(t, ns, "live", 30*time.Second, "Ready", podReady)
	call(t, p.Status.PodIP, 8080, "/set-live?v=false", nil)
	p = waitPod(t, ns, "live", 20*time.Second, "restarted and Ready", func(p *corev1.Pod) bool {
		return p.Status.ContainerStatuses[0].RestartCount == 1 && podReady(p)
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil {
		t.Fatalf("no last state: %s", describeContainers(p))
	}
	// The new process is live again (it starts healthy).
	if code := call(t, p.Status.PodIP, 8080, "/healthz", nil); code != http.StatusOK {
		t.Fatalf("/healthz after restart: %d", code)
	}
	eventually(t, 10*time.Second, func() string {
		evs, _ := client.CoreV1().Events(ns).List(bg, metav1.ListOptions{FieldSelector: "involvedObject.name=live,reason=Killing"})
		if evs == nil || len(evs.Items) == 0 {
			return "no Killing event"
		}
		return ""
	})
}

func TestDeleteSendsSIGTERMThenSIGKILL(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	grace := int64(3)
	stubborn := processPod("stubborn", regions[0], serverContainer("c", "--ignore-sigterm", "--child"))
	stubborn.Spec.TerminationGracePeriodSeconds = &grace
	polite := processPod("polite", regions[0], serverContainer("c"))
	polite.Spec.TerminationGracePeriodSeconds = new(int64(30))
	createPod(t, ns, stubborn)
	createPod(t, ns, polite)
	p := waitPod(t, ns, "stubborn", 30*time.Second, "Ready", podReady)
	waitPod(t, ns, "polite", 30*time.Second, "Ready", podReady)
	var info struct{ PID, Child int }
	call(t, p.Status.PodIP, 8080, "/env", &info)
	if pid := agent.ContainerPID(ns, "stubborn", "c"); pid != info.PID || !alive(info.PID) || !alive(info.Child) {
		t.Fatalf("agent pid %d, server %d, child %d", pid, info.PID, info.Child)
	}
	logPath, err := agent.LogPath(ns, "stubborn", "c", false)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	for _, name := range []string{"stubborn", "polite"} {
		if err := client.CoreV1().Pods(ns).Delete(bg, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, func() string {
		if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "\nSIGTERM received") || !strings.Contains(string(b), "child: SIGTERM received") {
			return "the server and its child have not both logged SIGTERM"
		}
		return ""
	})
	t.Logf("SIGTERM after %.1fs", time.Since(start).Seconds())
	// The polite pod exits on SIGTERM and is removed at once, long before its 30 s grace.
	eventually(t, 5*time.Second, func() string {
		if _, err := client.CoreV1().Pods(ns).Get(bg, "polite", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprint("polite pod still there: ", err)
		}
		return ""
	})
	t.Logf("polite pod removed after %.1fs", time.Since(start).Seconds())
	time.Sleep(time.Until(start.Add(2 * time.Second)))
	if !alive(info.PID) || !alive(info.Child) {
		t.Fatalf("killed before the grace period: server alive %v, child alive %v", alive(info.PID), alive(info.Child))
	}
	eventually(t, 10*time.Second, func() string {
		if alive(info.PID) || alive(info.Child) {
			return fmt.Sprintf("server alive %v, child alive %v", alive(info.PID), alive(info.Child))
		}
		return ""
	})
	killed := time.Since(start)
	if killed < time.Duration(grace)*time.Second {
		t.Fatalf("killed after %s, before the %ds grace", killed, grace)
	}
	eventually(t, 10*time.Second, func() string {
		if _, err := client.CoreV1().Pods(ns).Get(bg, "stubborn", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Sprint("stubborn pod still there: ", err)
		}
		return ""
	})
	t.Logf("SIGKILL (process group gone) after %.1fs; pod removed after %.1fs", killed.Seconds(), time.Since(start).Seconds())
}

func TestUnknownImageWaitsInImagePullBackOff(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	c := serverContainer("c")
	c.Image = missingImage
	createPod(t, ns, processPod("missing", regions[1], c))
	reasons := map[string]bool{}
	p := waitPod(t, ns, "missing", 30*time.Second, "in ImagePullBackOff", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		reasons[w.Reason] = true
		return w.Reason == "ImagePullBackOff" && strings.Contains(w.Message, missingImage)
	})
	if p.Status.Phase != corev1.PodPending || !reasons["ImagePullBackOff"] {
		t.Fatalf("phase %s, reasons seen %v", p.Status.Phase, reasons)
	}
	if !reasons["ErrImagePull"] {
		t.Logf("ErrImagePull came and went between polls (reasons seen: %v)", reasons)
	}
	// Once the image is in the table, the next retry starts it.
	exe, _ := agent.image(serverImage)
	agent.SetImage(missingImage, exe)
	waitPod(t, ns, "missing", 30*time.Second, "Ready", podReady)
}

func TestKwokAndProcessNodesStayApart(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	kwokPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fake"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"type": "kwok"},
			Containers:   []corev1.Container{{Name: "c", Image: "whatever:v1"}},
		},
	}
	createPod(t, ns, kwokPod)
	createPod(t, ns, processPod("real", regions[0], serverContainer("c")))
	fake := waitPod(t, ns, "fake", 30*time.Second, "Running (kwok)", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	waitPod(t, ns, "real", 30*time.Second, "Ready", podReady)
	if !strings.HasPrefix(fake.Status.PodIP, "10.244.") || agent.findPod(ns, "fake") != nil {
		t.Fatalf("kwok's pod: IP %s, known to the agent: %v", fake.Status.PodIP, agent.findPod(ns, "fake") != nil)
	}
	time.Sleep(2 * time.Second) // kwok's stages fire after ~1 s: they would have by now
	real, _ := client.CoreV1().Pods(ns).Get(bg, "real", metav1.GetOptions{})
	if ip, err := netip.ParseAddr(real.Status.PodIP); err != nil || !netip.MustParsePrefix(podCIDR).Contains(ip) || !strings.HasPrefix(real.Status.ContainerStatuses[0].ContainerID, "process://") {
		t.Fatalf("the process pod's status was rewritten: %+v", real.Status)
	}
}

// kube-controller-manager's EndpointSlice controller does select the ready pod, but the API
// server refuses to store any EndpointSlice (or Endpoints) address in 127.0.0.0/8
// (ValidateEndpointIP, k8s.io/kubernetes pkg/apis/core/validation): loopback pod addresses and
// EndpointSlices cannot go together. This pins that finding: if it ever changes, this fails and
// EndpointSlices become usable for discovering process-backed pods.
func TestEndpointSlicesRefuseLoopbackAddresses(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	for _, name := range []string{"web-a", "web-b"} {
		c := serverContainer("c", "--ready=false")
		c.ReadinessProbe = httpGet("/ready", 8080)
		c.ReadinessProbe.PeriodSeconds = 1
		p := processPod(name, regions[0], c)
		p.Labels["app"] = "web"
		createPod(t, ns, p)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}
	if _, err := client.CoreV1().Services(ns).Create(bg, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := waitPod(t, ns, "web-a", 30*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	waitPod(t, ns, "web-b", 30*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// Running is the process started, not yet listening: ask until it answers.
	eventually(t, 10*time.Second, func() string {
		resp, err := http.Get("http://" + net.JoinHostPort(a.Status.PodIP, "8080") + "/set-ready?v=true")
		if err != nil {
			return err.Error()
		}
		_ = resp.Body.Close()
		return ""
	})
	waitPod(t, ns, "web-a", 10*time.Second, "Ready", podReady)
	eventually(t, 15*time.Second, func() string {
		evs, err := client.CoreV1().Events(ns).List(bg, metav1.ListOptions{FieldSelector: "involvedObject.name=web,involvedObject.kind=Service,reason=FailedToUpdateEndpointSlices"})
		if err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, a.Status.PodIP) && strings.Contains(e.Message, "may not be in the loopback range") {
				t.Logf("kube-controller-manager: %s", e.Message)
				return ""
			}
		}
		return fmt.Sprintf("no FailedToUpdateEndpointSlices event naming %s yet (%d events)", a.Status.PodIP, len(evs.Items))
	})
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(bg, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		if len(s.Endpoints) > 0 {
			t.Fatalf("an EndpointSlice with loopback endpoints was stored: %+v", s.Endpoints)
		}
	}
}

// Init containers run first, in order; a native sidecar (an init container with restartPolicy
// Always) starts before the containers and keeps running beside them; once the containers have
// exited, the agent stops the sidecar as the kubelet does, the pod succeeds and the Job
// completes. A plain second container that never exits keeps the pod running instead.
func TestNativeSidecarStopsWhenTheContainersExit(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	proxy := serverContainer("proxy")
	proxy.ReadinessProbe = nil
	proxy.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	pod := processPod("", regions[0], exitContainer("migrate", "--after=1500ms", "--message=done"))
	pod.Spec.InitContainers = []corev1.Container{exitContainer("setup", "--after=200ms"), proxy}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate"},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32),
			Template:     corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"job": "migrate"}}, Spec: pod.Spec},
		},
	}
	if _, err := client.BatchV1().Jobs(ns).Create(bg, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		j, err := client.BatchV1().Jobs(ns).Get(bg, "migrate", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return fmt.Sprintf("job not complete: %+v", j.Status)
	})
	pods, err := client.CoreV1().Pods(ns).List(bg, metav1.ListOptions{LabelSelector: "job=migrate"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("job pods: %v %d", err, len(pods.Items))
	}
	p := pods.Items[0]
	if p.Status.Phase != corev1.PodSucceeded || len(p.Status.InitContainerStatuses) != 2 || len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s, %d init and %d container statuses", p.Status.Phase, len(p.Status.InitContainerStatuses), len(p.Status.ContainerStatuses))
	}
	setup, side, main := p.Status.InitContainerStatuses[0].State.Terminated, p.Status.InitContainerStatuses[1].State.Terminated, p.Status.ContainerStatuses[0].State.Terminated
	if setup == nil || setup.ExitCode != 0 || main == nil || main.ExitCode != 0 || main.Message != "done" || side == nil {
		t.Fatalf("setup %+v, proxy %+v, migrate %+v", setup, side, main)
	}
	if side.StartedAt.After(main.StartedAt.Time) || side.FinishedAt.Before(&main.FinishedAt) || !setup.FinishedAt.Time.Add(2*time.Second).After(main.StartedAt.Time) {
		t.Fatalf("order: setup %s–%s, proxy %s–%s, migrate %s–%s", setup.StartedAt, setup.FinishedAt, side.StartedAt, side.FinishedAt, main.StartedAt, main.FinishedAt)
	}

	// The same proxy as a plain second container: the pod keeps running after migrate exits.
	plain := processPod("plain", regions[0], exitContainer("migrate", "--after=200ms"), serverContainer("proxy"))
	plain.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, ns, plain)
	waitPod(t, ns, "plain", 30*time.Second, "migrate exited, proxy running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 2 && p.Status.ContainerStatuses[0].State.Terminated != nil && p.Status.ContainerStatuses[1].State.Running != nil
	})
	time.Sleep(2 * time.Second)
	if got, err := client.CoreV1().Pods(ns).Get(bg, "plain", metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.PodRunning {
		t.Fatalf("plain sidecar pod: %v %v; want Running", err, got.Status.Phase)
	}
}

// A readiness gate holds Ready until someone else sets its condition True, and the agent's own
// status writes (the readiness probe flips ContainersReady) never undo that condition.
func TestReadinessGateHoldsReadyUntilItsConditionIsTrue(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	const gate = corev1.PodConditionType("example.com/checked")
	c := serverContainer("web")
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	pod := processPod("gated", regions[0], c)
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	createPod(t, ns, pod)
	containersReady := func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.ContainersReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	p := waitPod(t, ns, "gated", 30*time.Second, "containers ready", containersReady)
	if podReady(p) {
		t.Fatal("Ready before its readiness gate's condition was set")
	}
	setGate := func(status corev1.ConditionStatus) {
		t.Helper()
		now := time.Now().UTC().Format(time.RFC3339)
		patch := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"conditions":[{"type":%q,"status":%q,"reason":"CheckPassed","message":"m","lastProbeTime":%q,"lastTransitionTime":%q}]}}`, p.UID, gate, status, now, now)
		if _, err := client.CoreV1().Pods(ns).Patch(bg, "gated", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	setGate(corev1.ConditionFalse)
	time.Sleep(1500 * time.Millisecond)
	if p, _ = client.CoreV1().Pods(ns).Get(bg, "gated", metav1.GetOptions{}); podReady(p) {
		t.Fatal("Ready while its readiness gate is False")
	}
	setGate(corev1.ConditionTrue)
	waitPod(t, ns, "gated", 10*time.Second, "Ready once the gate is True", podReady)
	// The probe fails and passes again: the agent writes status twice, and the gate stays.
	call(t, p.Status.PodIP, 8080, "/set-ready?v=false", nil)
	waitPod(t, ns, "gated", 10*time.Second, "unready", func(p *corev1.Pod) bool { return !podReady(p) })
	call(t, p.Status.PodIP, 8080, "/set-ready?v=true", nil)
	p = waitPod(t, ns, "gated", 10*time.Second, "Ready again with its gate kept", podReady)
	for _, c := range p.Status.Conditions {
		if c.Type == gate && c.Status != corev1.ConditionTrue {
			t.Fatalf("the gate's condition is %s after the agent's writes", c.Status)
		}
	}
}

// An emptyDir volume is one directory for every container of the pod that mounts it, reached
// through its mount path in their commands and environment; an exec probe runs its command with
// the container's environment, and a native sidecar's startup probe holds the containers after
// it until it passes.
func TestEmptyDirAndExecProbe(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	shell := func(name, script string) corev1.Container {
		c := exitContainer(name)
		c.Command, c.Args = []string{"sh", "-c", script}, nil
		c.VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
		return c
	}
	side := shell("side", "sleep 1; touch $SHARED/ready; exec sleep 60")
	side.Env = []corev1.EnvVar{{Name: "SHARED", Value: "/shared"}}
	side.RestartPolicy = new(corev1.ContainerRestartPolicyAlways)
	side.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/shared/ready"}}},
		PeriodSeconds: 1, FailureThreshold: 30}
	pod := processPod("shared", regions[0], shell("read", "test -f /shared/ready && cat /shared/greeting > $TERMINATION_MESSAGE_PATH"))
	pod.Spec.InitContainers = []corev1.Container{shell("write", "echo hello > /shared/greeting"), side}
	pod.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, ns, pod)
	waitPod(t, ns, "shared", 30*time.Second, "read exited with the greeting", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Terminated != nil
	})
	got, err := client.CoreV1().Pods(ns).Get(bg, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if term := got.Status.ContainerStatuses[0].State.Terminated; term.ExitCode != 0 || term.Message != "hello\n" {
		t.Fatalf("read: exit %d, message %q", term.ExitCode, term.Message)
	}
	if _, err := os.Stat("/shared"); err == nil {
		t.Fatal("/shared exists on the host: the mount path was not rewritten")
	}
}
