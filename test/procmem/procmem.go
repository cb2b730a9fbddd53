// Package procmem measures the memory of groups of processes on Linux, for benchmarks that
// report what a step costs: each process's proportional set size (PSS, /proc/<pid>/smaps_rollup),
// so that pages several processes share (a PostgreSQL server's shared buffers) are counted once
// across them, summed per group and sampled until stopped; the peak of each group is kept.
package procmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Tree is root and every process descended from it, read from /proc now.
func Tree(root int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parent(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// parent is pid's parent, from /proc/<pid>/stat (its command may hold spaces and parentheses).
func parent(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// PSS is pid's proportional set size in bytes; 0 when it is gone or cannot be read.
func PSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// Watcher samples groups of processes until Stop.
type Watcher struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak map[string]int64
}

// Watch samples, every interval (and once at once), the groups groups returns: each group's PSS
// summed over its processes, keeping each group's peak.
func Watch(interval time.Duration, groups func() map[string][]int) *Watcher {
	w := &Watcher{stop: make(chan struct{}), done: make(chan struct{}), peak: map[string]int64{}}
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			w.sample(groups())
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *Watcher) sample(groups map[string][]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, pids := range groups {
		var sum int64
		for _, pid := range pids {
			sum += PSS(pid)
		}
		w.peak[name] = max(w.peak[name], sum)
	}
}

// Stop ends the sampling and returns each group's peak, in bytes.
func (w *Watcher) Stop() map[string]int64 {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}
