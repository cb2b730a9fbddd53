package nodeagent

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// process is one run of a container: a child in its own process group, killed with the agent.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	// exitCode is valid once done is closed: the code, or 128+signal as the kubelet reports it.
	exitCode int32
	started  time.Time
	finished time.Time

	killOnce sync.Once
	// oomKilled: the memory watchdog killed it for passing its container's memory limit
	// (memory.go); its termination is then reported as OOMKilled.
	oomKilled atomic.Bool
}

// spawnRequest asks the spawner thread to start cmd.
type spawnRequest struct {
	cmd *exec.Cmd
	err chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnRequest
)

// spawn starts cmd from one OS thread that lives as long as the agent's process. Pdeathsig is
// delivered when the thread that forked the child exits, not the process, so forking from
// whatever thread a goroutine happens to run on could kill a child early if that thread ended.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread stays until the process exits
			for r := range spawnCh {
				r.err <- r.cmd.Start()
			}
		}()
	})
	r := spawnRequest{cmd: cmd, err: make(chan error, 1)}
	spawnCh <- r
	return <-r.err
}

// startProcess runs argv with env in dir, appending stdout and stderr to logPath.
func startProcess(argv, env []string, dir, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group (so that everything the container starts is signalled together), and
	// killed if the agent's process dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		_ = f.Close()
		return nil, err
	}
	p := &process{cmd: cmd, log: f, done: make(chan struct{}), started: time.Now()}
	go p.wait()
	return p, nil
}

func (p *process) wait() {
	err := p.cmd.Wait()
	p.finished = time.Now()
	p.exitCode = exitCode(p.cmd.ProcessState, err)
	_ = p.log.Close()
	// The group may still hold children the container left behind: they die with it.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	close(p.done)
}

func exitCode(st *os.ProcessState, err error) int32 {
	if st == nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			st = ee.ProcessState
		}
	}
	if st == nil {
		return 128
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(st.ExitCode())
}

// pid is the process's id, which is also its process group's id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM to the process group, then SIGKILL after grace, and waits for the
// process to end. Concurrent calls share the first one's deadline.
func (p *process) terminate(grace time.Duration) {
	p.killOnce.Do(func() {
		if p.exited() {
			return
		}
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		go func() {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-p.done:
			case <-t.C:
				_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			}
		}()
	})
	<-p.done
}

// kill sends SIGKILL to the process group at once and waits for the process.
func (p *process) kill() {
	if !p.exited() {
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	}
	<-p.done
}
