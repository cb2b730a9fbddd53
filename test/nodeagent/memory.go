package nodeagent

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A container's memory limit (resources.limits.memory), enforced on its process as the kernel's
// OOM killer enforces a cgroup's memory.max under a kubelet: once the process's resident set
// passes the limit it is killed with SIGKILL, and its termination is reported as the kubelet
// reports one (reason OOMKilled, exit code 137), after which restartPolicy applies. The agent runs
// processes without a cgroup of their own (a cgroup needs a delegated hierarchy, which neither a
// developer's machine nor CI is sure to have), so it polls: a process can overshoot the limit by
// what it allocates in one memoryPoll, and the kill comes within one memoryPoll of the overshoot.

// memoryPoll is how often a limited process's resident set is read.
const memoryPoll = 50 * time.Millisecond

// memoryLimit is c's memory limit in bytes, or 0 when it has none.
func memoryLimit(c *corev1.Container) int64 {
	q, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok || q.Sign() <= 0 {
		return 0
	}
	return q.Value()
}

// enforceMemory kills proc's process group once its resident set passes limit bytes, and marks
// it OOM-killed; it returns when the process ends.
func (p *process) enforceMemory(limit int64) {
	if limit <= 0 {
		return
	}
	t := time.NewTicker(memoryPoll)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		if rss, ok := residentBytes(p.pid()); ok && rss > limit {
			p.oomKilled.Store(true)
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			return
		}
	}
}

// residentBytes reads VmRSS of pid from /proc, in bytes.
func residentBytes(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := s.Bytes()
		if !bytes.HasPrefix(line, []byte("VmRSS:")) {
			continue
		}
		f := bytes.Fields(line[len("VmRSS:"):])
		if len(f) < 1 {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}
