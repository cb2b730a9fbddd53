package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// runContainer runs container i until it stops for good under the pod's restartPolicy, or until
// the pod is deleted: image lookup (ErrImagePull / ImagePullBackOff), configuration
// (CreateContainerConfigError), the process, its probes, its exit, and restarts with back-off.
func (p *pod) runContainer(i int) {
	defer p.running.Done()
	c := p.specs[i].DeepCopy() // containers are immutable but for image, which is ignored
	pulls, backoffs, restarts := 0, 0, 0
	for !p.stopping() && !p.sidecarsStopping(i) {
		exe, ok := p.prov.a.image(c.Image)
		if !ok {
			p.setWaiting(i, "ErrImagePull", fmt.Sprintf("image %q is not in the node agent's image table (nodeagent.Options.Images)", c.Image))
			if !p.sleep(time.Second) {
				return
			}
			pulls++
			delay := p.prov.a.backoff(pulls)
			p.setWaiting(i, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: not in the node agent's image table", c.Image))
			p.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: not in the node agent's image table", c.Image))
			if !p.sleep(delay) {
				return
			}
			continue
		}
		proc, err := p.startContainer(i, c, exe, restarts)
		var cfgErr *configError
		switch {
		case errors.As(err, &cfgErr):
			p.setWaiting(i, "CreateContainerConfigError", err.Error())
			p.event(corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
			if !p.sleep(p.prov.a.backoff(1)) {
				return
			}
			continue
		case err != nil:
			t := now()
			p.setTerminated(i, &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: t, FinishedAt: t})
			p.event(corev1.EventTypeWarning, "Failed", fmt.Sprintf("Error: failed to start container %s: %v", c.Name, err))
		default:
			p.event(corev1.EventTypeNormal, "Started", "Started container "+c.Name)
			ctx, cancel := context.WithCancel(context.Background())
			go p.runProbes(ctx, i, c, proc)
			go proc.enforceMemory(memoryLimit(c))
			<-proc.done
			cancel()
			reason := exitReason(proc.exitCode)
			if proc.oomKilled.Load() {
				// As the kubelet reports a container the kernel's OOM killer ended.
				reason = "OOMKilled"
				p.event(corev1.EventTypeWarning, "OOMKilling", fmt.Sprintf("Memory limit of container %s exceeded: killed", c.Name))
			}
			p.setTerminated(i, &corev1.ContainerStateTerminated{
				ExitCode: proc.exitCode, Reason: reason,
				Message:     p.terminationMessage(c, restarts, proc.exitCode),
				StartedAt:   metav1.NewTime(proc.started.Truncate(time.Second)),
				FinishedAt:  metav1.NewTime(proc.finished.Truncate(time.Second)),
				ContainerID: containerID(proc),
			})
			// A container that ran long enough without trouble starts its back-off afresh.
			if proc.finished.Sub(proc.started) >= 2*p.prov.a.opts.BackoffMax {
				backoffs = 0
			}
		}
		if p.stopping() || p.sidecarsStopping(i) || !p.restarts(i, p.lastExitCode(i)) {
			return
		}
		restarts++
		backoffs++
		delay := p.prov.a.backoff(backoffs)
		p.setBackOff(i, restarts, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.Name, p.obj.Name, p.obj.Namespace, p.obj.UID))
		p.event(corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+c.Name)
		if !p.sleep(delay) {
			return
		}
	}
}

// startContainer starts run number run of container c as exe. The process is registered under
// the pod's lock, so that a deletion beginning at the same moment either sees it or is seen.
func (p *pod) startContainer(i int, c *corev1.Container, exe Executable, run int) (*process, error) {
	dir := filepath.Join(p.dir, c.Name)
	termLog := filepath.Join(dir, "termination-log")
	// Each run starts with an empty termination message, as each new container does.
	if err := os.WriteFile(termLog, nil, 0o600); err != nil {
		return nil, err
	}
	p.mu.Lock()
	pe := podEnv{pod: p.obj.DeepCopy(), podIP: p.ip, configMaps: p.prov.a.configMaps, secrets: p.prov.a.secrets}
	p.mu.Unlock()
	env, vars, err := pe.environment(c, exe, termLog)
	if err != nil {
		return nil, err
	}
	// Mount paths are rewritten before the command is looked up (a program in a volume).
	mounts, err := p.mounts(c)
	if err != nil {
		return nil, err
	}
	rc := c.DeepCopy()
	for i := range rc.Command {
		rc.Command[i] = mounts.Replace(rc.Command[i])
	}
	for i := range rc.Args {
		rc.Args[i] = mounts.Replace(rc.Args[i])
	}
	for i := range env {
		env[i] = mounts.Replace(env[i])
	}
	for k, v := range vars {
		vars[k] = mounts.Replace(v)
	}
	args, err := argv(rc, exe, vars)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.envs[c.Name] = env
	p.mu.Unlock()
	proc, err := startProcess(args, env, dir, logFile(dir, run))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.procs[i], p.logIndex[i] = proc, run
	deleting, grace := p.deleting, p.grace
	s := &p.statuses[i]
	s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(proc.started.Truncate(time.Second))}}
	s.ContainerID, s.ImageID = containerID(proc), "process://"+exe.Path
	// Without a startup probe the container counts as started at once; without a readiness
	// probe it is ready as soon as it has started (runProbes sets both otherwise).
	*s.Started = c.StartupProbe == nil
	s.Ready = c.StartupProbe == nil && c.ReadinessProbe == nil
	p.mu.Unlock()
	p.notify()
	if deleting {
		go proc.terminate(grace)
	}
	return proc, nil
}

// restarts reports whether container i, which exited with code, restarts: a native sidecar
// always, a regular init container on failure unless the pod's policy is Never, any other under
// the pod's policy.
func (p *pod) restarts(i int, code int32) bool {
	switch {
	case p.sidecar(i):
		return true
	case i < p.nInit:
		return code != 0 && p.obj.Spec.RestartPolicy != corev1.RestartPolicyNever
	}
	switch p.obj.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

func (p *pod) lastExitCode(i int) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.statuses[i].State.Terminated; t != nil {
		return t.ExitCode
	}
	return 0
}

func (p *pod) setWaiting(i int, reason, message string) {
	p.mu.Lock()
	s := &p.statuses[i]
	s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
	s.Ready, *s.Started = false, false
	p.mu.Unlock()
	p.notify()
}

func (p *pod) setTerminated(i int, t *corev1.ContainerStateTerminated) {
	p.mu.Lock()
	s := &p.statuses[i]
	s.State = corev1.ContainerState{Terminated: t}
	s.Ready, *s.Started = false, false
	p.procs[i] = nil
	p.mu.Unlock()
	p.notify()
}

// setBackOff moves a terminated container to waiting for its restart, keeping its last state.
func (p *pod) setBackOff(i, restarts int, message string) {
	p.mu.Lock()
	s := &p.statuses[i]
	s.LastTerminationState = s.State
	s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: message}}
	s.RestartCount = int32(restarts)
	p.mu.Unlock()
	p.notify()
}

func (p *pod) setReady(i int, ready bool) {
	p.mu.Lock()
	changed := p.statuses[i].Ready != ready && p.statuses[i].State.Running != nil
	if changed {
		p.statuses[i].Ready = ready
	}
	p.mu.Unlock()
	if changed {
		p.notify()
	}
}

func (p *pod) setStarted(i int) {
	p.mu.Lock()
	changed := !*p.statuses[i].Started && p.statuses[i].State.Running != nil
	if changed {
		*p.statuses[i].Started = true
	}
	p.mu.Unlock()
	if changed {
		p.notify()
	}
}

func exitReason(code int32) string {
	if code == 0 {
		return "Completed"
	}
	return "Error"
}

func containerID(proc *process) string { return "process://" + strconv.Itoa(proc.pid()) }

// mounts maps the mount paths of c's emptyDir volumes to the pod's directories for them: a
// process sees the host's file system, so a path under a mount path in c's command, args or
// environment is rewritten to the volume's directory (pod/volumes/<name>), which every container
// of the pod that mounts the volume shares. Other kinds of volume are not mounted.
func (p *pod) mounts(c *corev1.Container) (*strings.Replacer, error) {
	empty := map[string]bool{}
	for _, v := range p.obj.Spec.Volumes {
		if v.EmptyDir != nil {
			empty[v.Name] = true
		}
	}
	var pairs []string
	for _, m := range c.VolumeMounts {
		if !empty[m.Name] || m.MountPath == "" || m.MountPath == "/" {
			continue
		}
		dir := filepath.Join(p.dir, "volumes", m.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		pairs = append(pairs, strings.TrimSuffix(m.MountPath, "/"), dir)
	}
	return strings.NewReplacer(pairs...), nil
}
