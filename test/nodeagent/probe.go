package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// runProbes runs container i's probes for one run of its process, until ctx ends (the process
// has exited): the startup probe first, then readiness and liveness side by side, as the kubelet
// does. Readiness comes only from a probe that answered; a failing liveness or startup probe
// restarts the container (SIGTERM, grace, SIGKILL) and the restart policy decides what follows.
func (p *pod) runProbes(ctx context.Context, i int, c *corev1.Container, proc *process) {
	if c.StartupProbe != nil {
		if !p.probeLoop(ctx, i, c, proc, "Startup", c.StartupProbe) {
			return
		}
		p.setStarted(i)
		if c.ReadinessProbe == nil {
			p.setReady(i, true)
		}
	}
	if c.ReadinessProbe != nil {
		go p.probeLoop(ctx, i, c, proc, "Readiness", c.ReadinessProbe)
	}
	if c.LivenessProbe != nil {
		go p.probeLoop(ctx, i, c, proc, "Liveness", c.LivenessProbe)
	}
}

// probeLoop probes every periodSeconds after initialDelaySeconds. For Startup it returns true on
// the first success; it returns false when ctx ends or the probe killed the container.
func (p *pod) probeLoop(ctx context.Context, i int, c *corev1.Container, proc *process, kind string, pr *corev1.Probe) bool {
	period := seconds(pr.PeriodSeconds, 10)
	timeout := seconds(pr.TimeoutSeconds, 1)
	successThreshold, failureThreshold := max(pr.SuccessThreshold, 1), max(pr.FailureThreshold, 1)
	if kind != "Readiness" {
		successThreshold = 1
	}
	delay := time.Until(proc.started.Add(time.Duration(pr.InitialDelaySeconds) * time.Second))
	if !sleepCtx(ctx, delay) {
		return false
	}
	var successes, failures int32
	for {
		err := p.probeOnce(ctx, c, pr, timeout)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
			p.event(corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %v", kind, err))
		}
		switch {
		case kind == "Readiness" && successes >= successThreshold:
			p.setReady(i, true)
		case kind == "Readiness" && failures >= failureThreshold:
			p.setReady(i, false)
		case kind == "Startup" && err == nil:
			return true
		case failures >= failureThreshold: // Liveness or Startup
			p.event(corev1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, strings.ToLower(kind)))
			grace := p.killGrace(pr)
			go proc.terminate(grace)
			return false
		}
		if !sleepCtx(ctx, period) {
			return false
		}
	}
}

// killGrace is the grace period for a container a probe kills: the probe's own, else the pod's.
func (p *pod) killGrace(pr *corev1.Probe) time.Duration {
	if pr.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pr.TerminationGracePeriodSeconds) * time.Second
	}
	return podGrace(p.obj)
}

// probeOnce runs one probe: nil when it succeeded.
func (p *pod) probeOnce(ctx context.Context, c *corev1.Container, pr *corev1.Probe, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		return p.httpProbe(ctx, c, pr.HTTPGet)
	case pr.TCPSocket != nil:
		host, err := p.probeHost(pr.TCPSocket.Host)
		if err != nil {
			return err
		}
		port, err := probePort(pr.TCPSocket.Port, c)
		if err != nil {
			return err
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case pr.Exec != nil:
		return p.execProbe(ctx, c, pr.Exec)
	default:
		return errors.New("only httpGet and tcpSocket probes are supported by the node agent")
	}
}

func (p *pod) httpProbe(ctx context.Context, c *corev1.Container, g *corev1.HTTPGetAction) error {
	host, err := p.probeHost(g.Host)
	if err != nil {
		return err
	}
	port, err := probePort(g.Port, c)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/nodeagent")
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.CopyN(io.Discard, resp.Body, 10<<10)
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// probeClient never uses a proxy and follows redirects only within 127.0.0.0/8 (a redirect
// elsewhere counts as success, as the kubelet counts it).
var probeClient = &http.Client{
	Transport: &http.Transport{
		Proxy: nil, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes skip verification, as the kubelet's do
	},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 || !isLoopback(req.URL.Hostname()) {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

// probeHost is the address a probe goes to: the pod's, or the probe's host if that is a
// loopback address (the agent sends nothing outside 127.0.0.0/8).
func (p *pod) probeHost(host string) (string, error) {
	if host == "" {
		return p.ip, nil
	}
	if !isLoopback(host) {
		return "", fmt.Errorf("probe host %q is not a loopback address; the node agent only probes 127.0.0.0/8", host)
	}
	return host, nil
}

func isLoopback(host string) bool {
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// probePort resolves a probe's port, by number or by the name of one of the container's ports.
func probePort(port intstr.IntOrString, c *corev1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.Name, port.StrVal)
}

func seconds(v, def int32) time.Duration {
	if v <= 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// execProbe runs an exec probe's command as a process on the host, with the container's
// environment and mount paths (mounts) and in its directory: exit 0 passes.
func (p *pod) execProbe(ctx context.Context, c *corev1.Container, e *corev1.ExecAction) error {
	if len(e.Command) == 0 {
		return errors.New("exec probe without a command")
	}
	mounts, err := p.mounts(c)
	if err != nil {
		return err
	}
	argv := make([]string, len(e.Command))
	for i, a := range e.Command {
		argv[i] = mounts.Replace(a)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	p.mu.Lock()
	env := p.envs[c.Name]
	p.mu.Unlock()
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Env, cmd.Dir = env, filepath.Join(p.dir, c.Name)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("exec probe %s: %v: %s", strings.Join(e.Command, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
