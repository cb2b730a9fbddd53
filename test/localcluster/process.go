package localcluster

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is one program started by the cluster (or beside it, like the manager), logging to a
// file. It runs in its own process group and is killed with its parent.
type Process struct {
	Name string
	Path string
	Args []string
	// Log is the file that receives its stdout and stderr.
	Log string
	// Env is added to this process's environment (NAME=value), after the parent's.
	Env  []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProcess starts path with args, logging to logFile.
func StartProcess(name, path string, args []string, logFile string) (*Process, error) {
	p := &Process{Name: name, Path: path, Args: args, Log: logFile}
	return p, p.Start()
}

// Start starts (or restarts) the process.
func (p *Process) Start() error {
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group, and killed with its parent, so that nothing outlives the cluster even
	// if the program that started it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return nil
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill sends SIGKILL to the process group at once (a crash, for chaos tests) and waits for it.
func (p *Process) Kill() {
	if !p.Running() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Tail returns the last n bytes of the log, for error messages.
func (p *Process) Tail(n int64) string {
	f, err := os.Open(p.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

func binary(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s not found in %s: run hack/build-binaries.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok", name, dir)
	}
	return p, nil
}

// PID is the process id of the running process, 0 when it is not running.
func (p *Process) PID() int {
	if !p.Running() {
		return 0
	}
	return p.cmd.Process.Pid
}
