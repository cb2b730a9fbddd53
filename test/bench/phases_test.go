//go:build bench

package bench

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// Phases of one N.
const (
	phaseDeployments = "Deployments v1 → v2"
	phaseImage       = "RoutingServices v1 → v2 (same schema)"
	phaseSchema      = "RoutingServices v2 → v3 + schema 2"
	phaseIdle        = "idle after convergence"
	phaseHung        = "RoutingServices v3 → v4, some with a hung check"
)

// idleWindow is how long the idle phase watches the converged RoutingServices (its wall column).
// benchPhases names the phases to run (-bench.phases, else $BENCH_PHASES; default all): a
// comma-separated subset of deployments, image, schema, hung and idle. Without image, the
// RoutingServices go from v1 straight to v3 + schema 2 in the schema phase, and the hung-check
// phase has no baseline to be compared with. The shorter runs are for iterating on one figure:
// BENCH_N=200 BENCH_PHASES=schema measures the gate at N=200 in about a third of the full run.
var benchPhases = flag.String("bench.phases", "", "comma-separated phases to run: deployments,image,schema,hung,idle (default $BENCH_PHASES, else all)")

// phaseKeys are the phases -bench.phases can name, in the order they run.
var phaseKeys = []string{"deployments", "image", "schema", "hung", "idle"}

// runs reports whether phase key is to run; it fails the test for a name that is not a phase.
func runs(t *testing.T, key string) bool {
	t.Helper()
	s := cmp.Or(*benchPhases, os.Getenv("BENCH_PHASES"))
	if s == "" {
		return true
	}
	found := false
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(phaseKeys, f) {
			t.Fatalf("BENCH_PHASES: %q is not one of %s", f, strings.Join(phaseKeys, ", "))
		}
		found = found || f == key
	}
	return found
}

var idleWindow = flag.Duration("bench.idle", 60*time.Second, "how long the idle phase after the last N watches the converged RoutingServices (issue 13's target: 5m)")

type bench struct {
	w       *watcher
	sampler *sampler
	// rawDir receives each phase's metrics at its two ends and its pods per second.
	rawDir string
}

// sample is one per-second reading of the manager's resident memory (bytes) and of how busy the
// machine's CPUs were over the second before it (0 to 1, from /proc/stat; NaN for the first).
type sample struct {
	at   time.Time
	rss  float64
	busy float64
}

// sampler reads the manager's resident memory every second (the peak of each phase) from
// /proc/<pid>/status, not from its /metrics: rendering /metrics costs the manager CPU that grows
// with N (its per-RoutingService series: ~500 KB at N=50), and a scrape every second would charge
// that to every phase. The phases' metrics are read only at their two ends.
type sampler struct {
	mu      sync.Mutex
	samples []sample
}

func startSampler(ctx context.Context, pid int) *sampler {
	s := &sampler{}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		prevBusy, prevTotal, _ := cpuJiffies()
		for {
			busy := math.NaN()
			if b, total, err := cpuJiffies(); err == nil {
				if total > prevTotal && prevTotal > 0 {
					busy = (b - prevBusy) / (total - prevTotal)
				}
				prevBusy, prevTotal = b, total
			}
			if rss, err := residentBytes(pid); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, sample{at: time.Now(), rss: rss, busy: busy})
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// cpuJiffies reads the machine's CPU time from the first line of /proc/stat (Linux): busy (all
// but idle and iowait) and total, in clock ticks summed over the CPUs.
func cpuJiffies() (busy, total float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var idle float64
	for i, v := range f[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, 0, err
		}
		total += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return total - idle, total, nil
}

// residentBytes reads VmRSS of process pid from /proc (Linux), in bytes.
func residentBytes(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// within returns the samples taken in [from, to].
func (s *sampler) within(from, to time.Time) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sample
	for _, x := range s.samples {
		if !x.at.Before(from) && !x.at.After(to) {
			out = append(out, x)
		}
	}
	return out
}

// snapshot is everything read at one phase boundary.
type snapshot struct {
	at  time.Time
	mgr model.Vector
	kcm model.Vector
	api model.Vector
	w   counts
	// cpu: CPU-seconds each process on the machine that the bench knows has used so far (the
	// cluster's components, the manager, the bench itself), from /proc/<pid>/stat.
	cpu map[string]float64
}

// cpuProcesses are the processes whose CPU time a snapshot reads, in the order the report
// prints them.
var cpuProcesses = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "manager", "bench"}

// processCPU reads every process in cpuProcesses' CPU-seconds so far (user + system).
func processCPU() map[string]float64 {
	pids := cluster.PIDs()
	pids["manager"], pids["bench"] = manager.PID(), os.Getpid()
	out := map[string]float64{}
	for _, name := range cpuProcesses {
		if secs, err := cpuSeconds(pids[name]); err == nil {
			out[name] = secs
		}
	}
	return out
}

// cpuSeconds reads process pid's user and system time from /proc/<pid>/stat (Linux), in seconds,
// at the kernel's USER_HZ of 100 ticks per second (what Linux reports on every architecture Go
// builds this for).
func cpuSeconds(pid int) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count fields after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseFloat(f[11], 64) // field 14
	stime, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return (utime + stime) / 100, nil
}

func (b *bench) snap(ctx context.Context, t *testing.T) snapshot {
	t.Helper()
	s := snapshot{at: time.Now(), w: b.w.snapshot(), cpu: processCPU()}
	var err error
	if s.mgr, err = mgrMetrics.scrape(ctx); err != nil {
		t.Fatalf("the manager's metrics: %v", err)
	}
	if s.api, err = apiMetrics.scrape(ctx); err != nil {
		t.Fatalf("kube-apiserver's metrics: %v", err)
	}
	if kcmMetrics.unreachable == "" {
		if s.kcm, err = kcmMetrics.scrape(ctx); err != nil {
			t.Logf("kube-controller-manager's metrics: %v", err)
		}
	}
	return s
}

// phaseResult is one row of the table.
type phaseResult struct {
	n       int
	phase   string
	objects int // Deployments or RoutingServices changed
	wall    time.Duration
	// Manager: writes (POST/PUT/PATCH/DELETE) and those not answered 2xx; reconciles by result;
	// reconcile duration quantiles (s); CPU seconds; peak resident memory (bytes).
	mgrWrites, mgrFailed float64
	reconciles           map[string]float64
	p50, p99             float64
	// queueP50, queueP99: how long a RoutingService waited in the manager's work queue (s).
	queueP50, queueP99 float64
	cpu, peakRSS       float64
	// kube-controller-manager: writes, and the seconds its clients waited in their client-side
	// rate limiters (summed over requests) for how many requests; kcmOK false when unreachable.
	kcmOK                      bool
	kcmWrites                  float64
	kcmThrottled, kcmThrottleN float64
	// Pods: created (kube-apiserver's POST pods), the most first seen by the bench in one second.
	podCreates float64
	podPeak    int
	// The watcher's breakdown of writes to schemagate's objects, and status writes by the
	// fields they changed.
	breakdown     map[string]int
	statusChanges map[string]int
	// Gate latency (the schema phase): from the migration Job seen Complete to the first
	// ReplicaSet of the new revision seen, over the RoutingServices; gateMissing lists those
	// without both.
	gate        []time.Duration
	gateAt      []time.Time // when the bench saw each gate's evidence, in gate's order
	gateMissing []string
	// The same inside the manager (schemagate_gate_latency_seconds, over the phase): p50 and p99
	// of the hops from receiving the evidence to a reconcile deciding with it (queued) and to
	// that reconcile's writes applied (acted), in seconds; and the reconciles skipped on a stale
	// cache (schemagate_stale_cache_skips_total).
	gateQueued, gateActed [2]float64
	staleSkips            float64
	// freshReads: reconciles that read past the stale cache because evidence waited
	// (schemagate_gate_fresh_reads_total).
	freshReads float64
	// The floor under the gate: kube-apiserver's own latency for creating ReplicaSets (every
	// client's; apiserver_request_duration_seconds) over the phase: p50, p99 (s) and the share
	// of requests over 100 ms, from bucket bounds.
	apiCreateRS latencySummary
	// The machine's CPUs over the phase (every process on it, from /proc/stat each second): the
	// mean busy share, and the share of seconds at least 95 % busy.
	cpuBusy, cpuSaturated float64
	// samples: the per-second readings over the phase (the gates' busy share, gateBursts).
	samples []sample
	// procCPU: CPU-seconds each process used over the phase (cpuProcesses).
	procCPU map[string]float64
	// drain is how long the phase waited for a quiet kube-controller-manager before it began.
	drain time.Duration
	// Idle: manager writes and reconciles after the first 5 s of the window.
	lateWrites, lateReconciles float64
	// start is when the phase began (its first snapshot); others is how long the RoutingServices
	// without a hung check took to be Ready (every phase records it).
	start  time.Time
	others time.Duration
	// The hung-check phase: how many RoutingServices had the check, the others' time in the
	// same-schema phase (baseline), when the hung ones had all stalled with ShardCheckFailed
	// (0: not within 5 min), and how many connections the silent server accepted.
	hung       int
	baseline   time.Duration
	hungFailed time.Duration
	hungConns  int
	// profile summarises the manager's CPU and allocation profiles over the phase.
	profile profileSummary
	// kube-apiserver: every client's writes by "VERB resource[/subresource]", answered 2xx, and
	// those answered 409 Conflict.
	apiWrites, apiConflicts map[string]float64
	// kube-controller-manager's work queues (replicaset, deployment, job): mean time an item
	// waited in the queue and mean time a sync took (s), over the phase.
	kcmQueue map[string][2]float64
}

// result computes a phase's row from its two snapshots.
func (b *bench) result(n int, phase string, objects int, s0, s1 snapshot) phaseResult {
	r := phaseResult{n: n, phase: phase, objects: objects, wall: s1.at.Sub(s0.at), start: s0.at, reconciles: map[string]float64{},
		breakdown: map[string]int{}, statusChanges: map[string]int{}}
	delta := func(v0, v1 model.Vector, name string, want map[string]string, keep func(model.Metric) bool) float64 {
		return sum(v1, name, want, keep) - sum(v0, name, want, keep)
	}
	r.mgrWrites = delta(s0.mgr, s1.mgr, "rest_client_requests_total", nil, isWrite)
	r.mgrFailed = delta(s0.mgr, s1.mgr, "rest_client_requests_total", nil, failedWrite)
	ctl := map[string]string{"controller": "routingservice"}
	for _, res := range []string{"success", "error", "requeue", "requeue_after"} {
		r.reconciles[res] = delta(s0.mgr, s1.mgr, "controller_runtime_reconcile_total", map[string]string{"controller": "routingservice", "result": res}, nil)
	}
	bs := bucketDelta(buckets(s0.mgr, "controller_runtime_reconcile_time_seconds", ctl), buckets(s1.mgr, "controller_runtime_reconcile_time_seconds", ctl))
	r.p50, r.p99 = quantile(0.5, bs), quantile(0.99, bs)
	// Time from an event (a watch, a requeue, a measurement's end) to a worker taking the
	// RoutingService: the manager's work queue.
	qs := bucketDelta(buckets(s0.mgr, "workqueue_queue_duration_seconds", map[string]string{"name": "routingservice"}),
		buckets(s1.mgr, "workqueue_queue_duration_seconds", map[string]string{"name": "routingservice"}))
	r.queueP50, r.queueP99 = quantile(0.5, qs), quantile(0.99, qs)
	for hop, into := range map[string]*[2]float64{"queued": &r.gateQueued, "acted": &r.gateActed} {
		gs := bucketDelta(buckets(s0.mgr, "schemagate_gate_latency_seconds", map[string]string{"hop": hop}),
			buckets(s1.mgr, "schemagate_gate_latency_seconds", map[string]string{"hop": hop}))
		*into = [2]float64{quantile(0.5, gs), quantile(0.99, gs)}
	}
	r.staleSkips = delta(s0.mgr, s1.mgr, "schemagate_stale_cache_skips_total", nil, nil)
	r.freshReads = delta(s0.mgr, s1.mgr, "schemagate_gate_fresh_reads_total", nil, nil)
	createRS := map[string]string{"verb": "POST", "resource": "replicasets", "subresource": ""}
	r.apiCreateRS = summarize(bucketDelta(buckets(s0.api, "apiserver_request_duration_seconds", createRS),
		buckets(s1.api, "apiserver_request_duration_seconds", createRS)))
	r.cpu = delta(s0.mgr, s1.mgr, "process_cpu_seconds_total", nil, nil)
	r.peakRSS = math.Max(sum(s0.mgr, "process_resident_memory_bytes", nil, nil), sum(s1.mgr, "process_resident_memory_bytes", nil, nil))
	r.procCPU = map[string]float64{}
	for name, v := range s1.cpu {
		if v0, ok := s0.cpu[name]; ok {
			r.procCPU[name] = v - v0
		}
	}
	samples := b.sampler.within(s0.at, s1.at)
	r.samples = samples
	var busySeconds, saturated float64
	for _, x := range samples {
		r.peakRSS = math.Max(r.peakRSS, x.rss)
		if !math.IsNaN(x.busy) {
			busySeconds++
			r.cpuBusy += x.busy
			if x.busy >= 0.95 {
				saturated++
			}
		}
	}
	if busySeconds > 0 {
		r.cpuBusy, r.cpuSaturated = r.cpuBusy/busySeconds, saturated/busySeconds
	}
	if s0.kcm != nil && s1.kcm != nil {
		r.kcmOK = true
		r.kcmWrites = delta(s0.kcm, s1.kcm, "rest_client_requests_total", nil, isWrite)
		r.kcmThrottled = delta(s0.kcm, s1.kcm, "rest_client_rate_limiter_duration_seconds_sum", nil, nil)
		r.kcmThrottleN = delta(s0.kcm, s1.kcm, "rest_client_rate_limiter_duration_seconds_count", nil, nil)
	}
	if r.kcmOK {
		r.kcmQueue = map[string][2]float64{}
		for _, q := range []string{"replicaset", "deployment", "job"} {
			want := map[string]string{"name": q}
			mean := func(m string) float64 {
				n := delta(s0.kcm, s1.kcm, m+"_count", want, nil)
				if n == 0 {
					return 0
				}
				return delta(s0.kcm, s1.kcm, m+"_sum", want, nil) / n
			}
			r.kcmQueue[q] = [2]float64{mean("workqueue_queue_duration_seconds"), mean("workqueue_work_duration_seconds")}
		}
	}
	r.apiWrites, r.apiConflicts = apiWrites(s0.api, s1.api)
	b.dump(r, s0, s1)
	r.podCreates = delta(s0.api, s1.api, "apiserver_request_total", map[string]string{"verb": "POST", "resource": "pods", "subresource": ""}, nil)
	_, r.podPeak = b.w.podRate(s0.at, s1.at)
	for k, v := range s1.w.writes {
		if d := v - s0.w.writes[k]; d != 0 {
			r.breakdown[k] = d
		}
	}
	for k, v := range s1.w.statusChanges {
		if d := v - s0.w.statusChanges[k]; d != 0 {
			r.statusChanges[k] = d
		}
	}
	return r
}

// dump writes a phase's raw evidence under rawDir: the samples of each source at both ends (the
// manager's without the Go runtime's, kube-controller-manager's client and work queue metrics,
// kube-apiserver's request counts) and the pods first seen per second.
func (b *bench) dump(r phaseResult, s0, s1 snapshot) {
	if b.rawDir == "" {
		return
	}
	slug := phaseSlug(r.n, r.phase)
	keep := map[string]func(string) bool{
		"manager": func(n string) bool { return !strings.HasPrefix(n, "go_") },
		"kcm": func(n string) bool {
			return strings.HasPrefix(n, "rest_client_") || strings.HasPrefix(n, "workqueue_") || strings.HasPrefix(n, "process_")
		},
		"apiserver": func(n string) bool { return n == "apiserver_request_total" },
	}
	for _, end := range []struct {
		name string
		s    snapshot
	}{{"begin", s0}, {"end", s1}} {
		for src, v := range map[string]model.Vector{"manager": end.s.mgr, "kcm": end.s.kcm, "apiserver": end.s.api} {
			var lines []string
			for _, x := range v {
				if keep[src](string(x.Metric[model.MetricNameLabel])) {
					lines = append(lines, fmt.Sprintf("%s %v", x.Metric, x.Value))
				}
			}
			sort.Strings(lines)
			_ = os.WriteFile(filepath.Join(b.rawDir, fmt.Sprintf("%s.%s.%s.txt", slug, end.name, src)), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		}
	}
	var csv strings.Builder
	csv.WriteString("second,pods_first_seen\n")
	for i, c := range b.w.podsPerSecond(s0.at, s1.at) {
		fmt.Fprintf(&csv, "%d,%d\n", i, c)
	}
	_ = os.WriteFile(filepath.Join(b.rawDir, slug+".pods-per-second.csv"), []byte(csv.String()), 0o644)
}

// apiWrites is kube-apiserver's count of write requests over a phase by "VERB resource" (with
// "/subresource" when there is one), answered 2xx and answered 409.
func apiWrites(v0, v1 model.Vector) (ok, conflicts map[string]float64) {
	ok, conflicts = map[string]float64{}, map[string]float64{}
	add := func(v model.Vector, sign float64) {
		for _, s := range v {
			m := s.Metric
			if m[model.MetricNameLabel] != "apiserver_request_total" {
				continue
			}
			switch m["verb"] {
			case "POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION":
			default:
				continue
			}
			key := string(m["verb"]) + " " + string(m["resource"])
			if m["subresource"] != "" {
				key += "/" + string(m["subresource"])
			}
			switch code := string(m["code"]); {
			case code == "409":
				conflicts[key] += sign * float64(s.Value)
			case len(code) == 3 && code[0] == '2':
				ok[key] += sign * float64(s.Value)
			}
		}
	}
	add(v1, 1)
	add(v0, -1)
	for _, m := range []map[string]float64{ok, conflicts} {
		for k, v := range m {
			if v == 0 {
				delete(m, k)
			}
		}
	}
	return ok, conflicts
}

// timeout bounds a wait for n objects' rollouts.
func timeout(n int) time.Duration { return 5*time.Minute + time.Duration(n)*4*time.Second }

// quiet waits, before a phase, until kube-controller-manager and the manager have written nothing
// for 3 s (at most 3 min), and returns how long that took. kube-controller-manager's controllers
// post their Events through their own rate-limited clients, so a busy step leaves a backlog of
// Events that drains for a minute or more afterwards and would eat into the next phase's budget.
// Without kube-controller-manager's metrics it waits 3 s.
func (b *bench) quiet(ctx context.Context) time.Duration {
	start := time.Now()
	if kcmMetrics.unreachable != "" {
		time.Sleep(3 * time.Second)
		return time.Since(start)
	}
	last, still := -1.0, 0
	for time.Since(start) < 3*time.Minute {
		k, err1 := kcmMetrics.scrape(ctx)
		m, err2 := mgrMetrics.scrape(ctx)
		if err1 == nil && err2 == nil {
			writes := sum(k, "rest_client_requests_total", nil, isWrite) + sum(m, "rest_client_requests_total", nil, isWrite)
			if writes == last {
				still++
			} else {
				still = 0
			}
			last = writes
			if still >= 3 {
				return time.Since(start)
			}
		}
		time.Sleep(time.Second)
	}
	logf("kube-controller-manager or the manager still writing after %s; starting anyway", time.Since(start).Round(time.Second))
	return time.Since(start)
}

// deployments runs the Deployment phase for N: 3N Deployments (N per region) at v1, then all to v2.
func (b *bench) deployments(ctx context.Context, t *testing.T, n int) phaseResult {
	ns := fmt.Sprintf("bench-deploy-%d", n)
	count := 3 * n
	if err := createNamespace(ctx, k8s, ns); err != nil {
		t.Fatal(err)
	}
	setup := time.Now()
	if err := parallel(count, func(i int) error {
		return k8s.Create(ctx, deployment(ns, regions[i%3], i/3))
	}); err != nil {
		t.Fatal(err)
	}
	if err := until(ctx, timeout(count), "Deployments at v1", func() (bool, string) {
		return deploymentsComplete(ctx, b.w.cache, ns, count, imageV1)
	}); err != nil {
		t.Fatal(err)
	}
	logf("N=%d: %d Deployments complete at v1 (setup %.1fs)", n, count, time.Since(setup).Seconds())
	drain := b.quiet(ctx)

	var list appsv1.DeploymentList
	if err := b.w.cache.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.StrategicMergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":%q}]}}}}`, imageV2)))
	s0 := b.snap(ctx, t)
	if err := parallel(len(list.Items), func(i int) error {
		return k8s.Patch(ctx, list.Items[i].DeepCopy(), patch)
	}); err != nil {
		t.Fatal(err)
	}
	logf("N=%d: %d Deployments updated to v2 in %.1fs", n, count, time.Since(s0.at).Seconds())
	if err := until(ctx, timeout(count), "Deployments at v2", func() (bool, string) {
		return deploymentsComplete(ctx, b.w.cache, ns, count, imageV2)
	}); err != nil {
		t.Fatal(err)
	}
	s1 := b.snap(ctx, t)
	r := b.result(n, phaseDeployments, count, s0, s1)
	r.drain = drain
	logf("N=%d: %s: %.1fs (after %.1fs waiting for a quiet kube-controller-manager)", n, phaseDeployments, r.wall.Seconds(), drain.Seconds())
	b.cleanup(ctx, t, ns)
	return r
}

// routingServices runs the RoutingService phases for N: N RoutingServices at v1 (setup), v1 → v2,
// v2 → v3 with schema 2, and, for the last N, the idle window.
func (b *bench) routingServices(ctx context.Context, t *testing.T, n int, last bool) []phaseResult {
	ns := fmt.Sprintf("bench-rsvc-%d", n)
	if err := createNamespace(ctx, k8s, ns); err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	gens := map[string]int64{}
	var mu sync.Mutex
	setup := time.Now()
	if err := parallel(n, func(i int) error {
		r := routingService(ns, i)
		names[i] = r.Name
		if err := k8s.Create(ctx, r); err != nil {
			return err
		}
		mu.Lock()
		gens[r.Name] = r.Generation
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wait := func(what string) {
		t.Helper()
		if err := until(ctx, timeout(3*n), what, func() (bool, string) {
			return routingServicesReady(ctx, b.w.cache, ns, gens)
		}); err != nil {
			t.Fatal(err)
		}
	}
	wait("RoutingServices Ready at v1")
	logf("N=%d: %d RoutingServices Ready at v1 (setup %.1fs)", n, n, time.Since(setup).Seconds())

	// others are the RoutingServices the hung-check phase leaves without a check: each phase
	// records when they alone were all Ready, the hung-check phase's baseline.
	hungN := hungCount(n)
	others := func() map[string]int64 {
		out := map[string]int64{}
		mu.Lock()
		defer mu.Unlock()
		for _, name := range names[hungN:] {
			out[name] = gens[name]
		}
		return out
	}
	change := func(phase string, mutate func(i int, r *routingv1alpha1.RoutingService), done func() map[string]int64) phaseResult {
		t.Helper()
		drain := b.quiet(ctx)
		prof := startProfile(ctx, pprofURL, b.rawDir, phaseSlug(n, phase))
		s0 := b.snap(ctx, t)
		if err := parallel(n, func(i int) error {
			gen, err := patchRoutingService(ctx, k8s, ns, names[i], func(r *routingv1alpha1.RoutingService) { mutate(i, r) })
			mu.Lock()
			gens[names[i]] = gen
			mu.Unlock()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		logf("N=%d: %d RoutingServices updated in %.1fs", n, n, time.Since(s0.at).Seconds())
		var othersAt time.Time
		if err := until(ctx, timeout(3*n), phase, func() (bool, string) {
			if othersAt.IsZero() {
				if ok, _ := routingServicesReady(ctx, b.w.cache, ns, others()); ok {
					othersAt = time.Now()
				}
			}
			return routingServicesReady(ctx, b.w.cache, ns, done())
		}); err != nil {
			t.Fatal(err)
		}
		s1 := b.snap(ctx, t)
		r := b.result(n, phase, n, s0, s1)
		r.drain = drain
		r.others = othersAt.Sub(s0.at)
		r.profile = prof.stop(ctx, managerBinary)
		logf("N=%d: %s: %.1fs (after %.1fs waiting for a quiet kube-controller-manager)", n, phase, r.wall.Seconds(), drain.Seconds())
		return r
	}
	all := func() map[string]int64 {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(gens)
	}
	var out []phaseResult
	var image phaseResult
	if runs(t, "image") {
		image = change(phaseImage, func(_ int, r *routingv1alpha1.RoutingService) { r.Spec.Template.Spec.Containers[0].Image = imageV2 }, all)
		out = append(out, image)
	}
	if runs(t, "schema") {
		toV2 := story.ToV2(imageV3, migrationV2)
		schema := change(phaseSchema, func(_ int, r *routingv1alpha1.RoutingService) { toV2(r) }, all)
		schema.gate, schema.gateAt, schema.gateMissing = b.w.gateLatencies(ns, names, schemaBumped, imageV3)
		out = append(out, schema)
	}
	if runs(t, "hung") {
		out = append(out, b.hung(ctx, t, n, ns, names, change, others, image.others))
	}
	if !last {
		b.cleanup(ctx, t, ns)
		return out
	}
	if !runs(t, "idle") {
		return out
	}
	// Idle: once, after the last N (the cluster is stopped after it, so nothing is deleted).
	// One more reading of the manager's metrics 5 s in: what it still wrote after that.
	prof := startProfile(ctx, pprofURL, b.rawDir, phaseSlug(n, phaseIdle))
	s0 := b.snap(ctx, t)
	time.Sleep(5 * time.Second)
	s5 := b.snap(ctx, t)
	time.Sleep(*idleWindow - 5*time.Second)
	s1 := b.snap(ctx, t)
	idle := b.result(n, phaseIdle, n, s0, s1)
	idle.profile = prof.stop(ctx, managerBinary)
	idle.lateWrites = sum(s1.mgr, "rest_client_requests_total", nil, isWrite) - sum(s5.mgr, "rest_client_requests_total", nil, isWrite)
	ctl := map[string]string{"controller": "routingservice"}
	idle.lateReconciles = sum(s1.mgr, "controller_runtime_reconcile_total", ctl, nil) - sum(s5.mgr, "controller_runtime_reconcile_total", ctl, nil)
	logf("N=%d: idle: %.0f manager writes, %.0f reconciles in %s", n, idle.mgrWrites, sumMap(idle.reconciles), *idleWindow)
	return append(out, idle)
}

// hung is the hung-check phase: the first hungCount(n) RoutingServices bake with a check that
// never gets an answer; the others' time is compared with baseline, their time in the
// same-schema phase (0: that phase did not run).
func (b *bench) hung(ctx context.Context, t *testing.T, n int, ns string, names []string, change func(string, func(int, *routingv1alpha1.RoutingService), func() map[string]int64) phaseResult, others func() map[string]int64, baseline time.Duration) phaseResult {
	t.Helper()
	hungN := hungCount(n)

	// Hung checks: hungN RoutingServices bake with a check that never gets an answer.
	bh, err := startBlackhole()
	if err != nil {
		t.Fatal(err)
	}
	defer bh.close()
	url := "http://" + bh.ln.Addr().String() + "/health/{{shard}}"
	hung := change(phaseHung, func(i int, r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = imageV4
		if i < hungN {
			r.Spec.Strategy.BakeSeconds = ptr.To(int32(hungBake))
			r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{hungCheck(url)}
		}
	}, others)
	hung.hung, hung.baseline = hungN, baseline
	if err := until(ctx, 5*time.Minute, "the hung RoutingServices stalled", func() (bool, string) {
		return stalledOnCheck(ctx, b.w.cache, ns, names[:hungN])
	}); err != nil {
		t.Errorf("N=%d: %v", n, err)
	} else {
		hung.hungFailed = time.Since(hung.start)
	}
	hung.hungConns = bh.accepted()
	logf("N=%d: %d of %d without a check Ready in %.1fs (%.1fs in the same-schema phase); the %d with a hung check stalled after %.1fs; %d connections to the silent server",
		n, n-hungN, n, hung.others.Seconds(), baseline.Seconds(), hungN, hung.hungFailed.Seconds(), hung.hungConns)
	return hung
}

// cleanup deletes a phase's namespace and waits until it is gone.
func (b *bench) cleanup(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	start := time.Now()
	if err := deleteNamespace(ctx, k8s, ns, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	logf("namespace %s deleted in %.1fs", ns, time.Since(start).Seconds())
}

func sumMap(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// phaseSlug names a phase's raw files: "N<n>-" and the phase's name up to any " (", with every
// character but ASCII letters and digits replaced by "-".
func phaseSlug(n int, phase string) string {
	return fmt.Sprintf("N%d-%s", n, strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			return c
		}
		return '-'
	}, strings.SplitN(phase, " (", 2)[0]))
}
