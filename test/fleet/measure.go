package fleet

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// components are the columns of the memory table, in order.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// Usage is one process's memory, in KiB, from /proc/<pid>/status: Peak is VmHWM (the most it
// ever held resident), RSS is VmRSS now.
type Usage struct {
	PID       int
	Peak, RSS int64
}

// Measurement is the fleet's start time and memory.
type Measurement struct {
	// Start is the wall time Start took (every cluster and agent up).
	Start time.Duration
	// Clusters maps "hub" and each region to its components' usage by name.
	Clusters map[string]map[string]Usage
	// Order is hub, then the regions as in Options.Regions.
	Order []string
	// Self is this test process (node agents, proxies, the test itself); Pods the other children
	// of this process (the node agents' containers).
	Self Usage
	Pods []Usage
}

// Measure samples /proc for every process of the fleet now. Peaks are each process's own, so their
// sum bounds the fleet's peak from above (processes need not peak together).
func (f *Fleet) Measure() Measurement {
	m := Measurement{Start: f.started, Clusters: map[string]map[string]Usage{}}
	ours := map[int]bool{}
	add := func(name string, pids map[string]int) {
		m.Order = append(m.Order, name)
		u := map[string]Usage{}
		for comp, pid := range pids {
			u[comp] = usage(pid)
			ours[pid] = true
		}
		m.Clusters[name] = u
	}
	if f.Hub.Cluster != nil {
		add("hub", f.Hub.PIDs())
	}
	for _, r := range f.Regions {
		if r.Cluster != nil {
			add(r.Name, r.PIDs())
		}
	}
	self := os.Getpid()
	m.Self = usage(self)
	for _, pid := range children(self) {
		if !ours[pid] {
			m.Pods = append(m.Pods, usage(pid))
		}
	}
	return m
}

// Total is the sum of every peak (KiB).
func (m Measurement) Total() int64 {
	t := m.Self.Peak
	for _, c := range m.Clusters {
		for _, u := range c {
			t += u.Peak
		}
	}
	for _, p := range m.Pods {
		t += p.Peak
	}
	return t
}

// String is the table: one row per cluster, peak RSS in MiB per component, then this process
// and the pods, and the total.
func (m Measurement) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet start: %.1fs (wall, clusters started concurrently)\n", m.Start.Seconds())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "peak RSS (MiB)\tetcd\tkube-apiserver\tkcm\tscheduler\tcluster\t")
	for _, name := range m.Order {
		var sum int64
		row := name + "\t"
		for _, comp := range components {
			u := m.Clusters[name][comp]
			sum += u.Peak
			row += mib(u.Peak) + "\t"
		}
		fmt.Fprintln(w, row+mib(sum)+"\t")
	}
	var pods int64
	for _, p := range m.Pods {
		pods += p.Peak
	}
	fmt.Fprintf(w, "test process (agents, proxies)\t\t\t\t\t%s\t\n", mib(m.Self.Peak))
	fmt.Fprintf(w, "pods (%d processes)\t\t\t\t\t%s\t\n", len(m.Pods), mib(pods))
	fmt.Fprintf(w, "total\t\t\t\t\t%s\t\n", mib(m.Total()))
	_ = w.Flush()
	return b.String()
}

func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 0, 64) }

// usage reads VmHWM and VmRSS of pid (zeros if it is gone).
func usage(pid int) Usage {
	u := Usage{PID: pid}
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return u
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmHWM":
			u.Peak = n
		case "VmRSS":
			u.RSS = n
		}
	}
	return u
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces, so cut after its closing parenthesis.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
				out = append(out, child)
			}
		}
	}
	sort.Ints(out)
	return out
}
