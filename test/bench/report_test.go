//go:build bench

package bench

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"time"
)

// reportMeta is what the report says about the run.
type reportMeta struct {
	command string
	date    time.Time
	took    time.Duration
	kcm     *source
	nodes   string
	source  string
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func millis(s float64) string {
	if math.IsNaN(s) {
		return "—"
	}
	return fmt.Sprintf("%.0f ms", s*1000)
}

// render writes the results as Markdown: the main table, gate latency, and the breakdown of the
// manager's writes.
func render(results []phaseResult, meta reportMeta) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` — %s, %s, %d CPUs, %s; manager from %s; took %s.\n\n", meta.command, meta.date.UTC().Format("2006-01-02 15:04 UTC"),
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), meta.nodes, meta.source, meta.took.Round(time.Second))

	b.WriteString("| N | phase | wall | × Deployments | manager writes / RoutingService | manager writes (not 2xx) | reconciles | reconcile p50 / p99 | manager CPU | manager peak RSS | kube-controller-manager writes | its client rate-limiter wait | pods created (mean / peak per s) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	deployWall := map[int]time.Duration{}
	for _, r := range results {
		if r.phase == phaseDeployments {
			deployWall[r.n] = r.wall
		}
	}
	for _, r := range results {
		ratio, perRS := "—", "—"
		if r.phase != phaseIdle && deployWall[r.n] > 0 {
			ratio = fmt.Sprintf("%.2f", r.wall.Seconds()/deployWall[r.n].Seconds())
		}
		phase := fmt.Sprintf("%s (%d RoutingServices)", r.phase, r.objects)
		if r.phase == phaseDeployments {
			phase = fmt.Sprintf("%s (%d Deployments)", r.phase, r.objects)
		} else {
			perRS = fmt.Sprintf("%.1f", r.mgrWrites/float64(r.objects))
		}
		p := "—"
		if !math.IsNaN(r.p50) {
			p = millis(r.p50) + " / " + millis(r.p99)
		}
		kcmW, kcmWait := "not reachable", "not reachable"
		if r.kcmOK {
			kcmW = fmt.Sprintf("%.0f", r.kcmWrites)
			mean := 0.0
			if r.kcmThrottleN > 0 {
				mean = r.kcmThrottled / r.kcmThrottleN
			}
			kcmWait = fmt.Sprintf("%.0f s over %.0f requests (mean %.0f ms)", r.kcmThrottled, r.kcmThrottleN, mean*1000)
		}
		pods := "—"
		if r.podCreates > 0 {
			pods = fmt.Sprintf("%.0f (%.1f / %d)", r.podCreates, r.podCreates/r.wall.Seconds(), r.podPeak)
		}
		cpu := fmt.Sprintf("%.1f s", r.cpu)
		switch {
		case r.phase == phaseIdle:
			cpu += fmt.Sprintf(" (%.2f %% of a core)", 100*r.cpu/r.wall.Seconds())
		case r.phase != phaseDeployments:
			cpu += fmt.Sprintf(" (%.3f s / RoutingService)", r.cpu/float64(r.objects))
		}
		rss := fmt.Sprintf("%.0f MiB", r.peakRSS/(1<<20))
		if r.phase != phaseDeployments {
			rss += fmt.Sprintf(" (%.2f / RoutingService)", r.peakRSS/(1<<20)/float64(r.objects))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %.0f (%.0f) | %.0f | %s | %s | %s | %s | %s | %s |\n",
			r.n, phase, secs(r.wall), ratio, perRS, r.mgrWrites, r.mgrFailed, sumMap(r.reconciles), p, cpu, rss, kcmW, kcmWait, pods)
	}
	b.WriteString("\nwall: from the first update request until every object is done (Deployments: observedGeneration current, updated = available = 3, no old pod; RoutingServices: Ready=True for the new generation). Manager columns are deltas of its /metrics over the phase (writes: rest_client_requests_total POST/PUT/PATCH/DELETE; reconcile quantiles from controller_runtime_reconcile_time_seconds{controller=\"routingservice\"}; RSS read from /proc every second, not from /metrics, whose rendering would cost the manager CPU). kube-controller-manager: the same counter and rest_client_rate_limiter_duration_seconds (time its requests waited in client-side rate limiters, summed). Pods created: kube-apiserver's POST pods over the wall time, and the most pods the bench saw appear in one second.\n")
	if meta.kcm != nil && meta.kcm.unreachable != "" {
		fmt.Fprintf(&b, "\nkube-controller-manager's /metrics was not reachable: %s.\n", meta.kcm.unreachable)
	}

	if line := cpuGrowth(results); line != "" {
		b.WriteString("\n" + line + "\n")
	}

	b.WriteString("\nGate latency (schema phase): from the bench seeing the evidence of the migration (its pod's migration container terminated with exit code 0, or the Job Complete, whichever it saw first) to it seeing the first ReplicaSet of the new revision, per RoutingService. Inside the manager (schemagate_gate_latency_seconds over the phase, quantiles from its buckets): from receiving the evidence to a reconcile deciding with it (queued) and to that reconcile's writes applied (acted); and the reconciles of the phase skipped because the cache lacked the manager's own status write, or, while evidence waited, that read the RoutingService from the API server instead (fresh reads). Beside them, what no manager can go below: kube-apiserver's own time to create a ReplicaSet (apiserver_request_duration_seconds, every client's creates over the phase), each gate including one such create. How busy the machine was: the CPU table below.\n\n")
	b.WriteString("| N | p50 | p99 | max | RoutingServices measured | manager: queued p50 / p99 | manager: acted p50 / p99 | stale-cache skips | fresh reads | kube-apiserver: create ReplicaSet p50 / p99 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.phase != phaseSchema {
			continue
		}
		maxd := time.Duration(0)
		for _, d := range r.gate {
			maxd = max(maxd, d)
		}
		measured := fmt.Sprintf("%d of %d", len(r.gate), r.objects)
		if len(r.gateMissing) > 0 {
			measured += " (missing: " + strings.Join(r.gateMissing, ", ") + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s / %s | %s / %s | %.0f | %.0f | %s |\n", r.n, ms(percentile(0.5, r.gate)), ms(percentile(0.99, r.gate)), ms(maxd), measured,
			millis(r.gateQueued[0]), millis(r.gateQueued[1]), millis(r.gateActed[0]), millis(r.gateActed[1]), r.staleSkips, r.freshReads,
			r.apiCreateRS)
	}
	for _, r := range results {
		if r.phase == phaseSchema && len(r.gate) > 0 {
			b.WriteString("\n" + gateBursts(r) + "\n")
		}
	}

	b.WriteString("\nHung checks: in the v3 → v4 rollout, the first RoutingServices (\"hung\") bake 60 s with an http check against a loopback server that accepts connections and never answers (timeout 20 s, 2 errors in a row fail it). The others have no check; their time is compared with the time the same RoutingServices took in the same-schema phase, where none had a check (target ≤ 1.05×).\n\n")
	b.WriteString("| N | hung | others Ready after | same RoutingServices, same-schema phase | × | hung ones stalled with ShardCheckFailed after | connections to the silent server |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		if r.phase != phaseHung {
			continue
		}
		failed := "not within 5 min"
		if r.hungFailed > 0 {
			failed = secs(r.hungFailed)
		}
		fmt.Fprintf(&b, "| %d | %d of %d | %s | %s | %.2f | %s | %d |\n", r.n, r.hung, r.objects, secs(r.others), secs(r.baseline), r.others.Seconds()/r.baseline.Seconds(), failed, r.hungConns)
	}

	b.WriteString("\nWhere the manager's CPU goes (its pprof profile over each phase, `go tool pprof -top`; flat share, top functions; full tables in .state/bench/raw/):\n\n")
	for _, r := range results {
		if r.profile.slices == 0 {
			continue
		}
		fmt.Fprintf(&b, "- N=%d, %s (%d × %s of profile): flat %s", r.n, r.phase, r.profile.slices, profileSlice, strings.Join(r.profile.cpuTop, "; "))
		if len(r.profile.cpuOurs) > 0 {
			fmt.Fprintf(&b, ". schemagate's, cumulative: %s", strings.Join(r.profile.cpuOurs, "; "))
		}
		if len(r.profile.allocTop) > 0 {
			fmt.Fprintf(&b, ". Allocated: %s; most by %s", r.profile.allocsTotal, strings.Join(r.profile.allocTop, "; "))
		}
		b.WriteString("\n")
	}

	b.WriteString("\nIdle: the manager's writes and reconciles in the 60 s after every RoutingService was Ready (target: 0 writes).\n\n")
	b.WriteString("| N | writes | writes after the first 5 s | reconciles (by result) | reconciles after the first 5 s |\n|---|---|---|---|---|\n")
	for _, r := range results {
		if r.phase != phaseIdle {
			continue
		}
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.0f (%s) | %.0f |\n", r.n, r.mgrWrites, r.lateWrites, sumMap(r.reconciles), byResult(r.reconciles), r.lateReconciles)
	}

	kinds := []string{countRSCreate, countRSSpec, countRSMeta, countRSDelete, countJobCreate, countJobSpec, countStatus}
	b.WriteString("\nThe manager's writes by kind (counted by the bench's informers; \"other\" is the rest of its 2xx writes: Events):\n\n")
	b.WriteString("| N | phase | " + strings.Join(kinds, " | ") + " | other | reconciles (by result) |\n|---|---|" + strings.Repeat("---|", len(kinds)+2) + "\n")
	for _, r := range results {
		if r.phase == phaseDeployments {
			continue
		}
		known := 0
		cells := make([]string, 0, len(kinds))
		for _, k := range kinds {
			known += r.breakdown[k]
			c := fmt.Sprintf("%d", r.breakdown[k])
			if k == countStatus && r.breakdown[countStatusNoDiff] > 0 {
				c += fmt.Sprintf(" (%d changing nothing)", r.breakdown[countStatusNoDiff])
			}
			cells = append(cells, c)
		}
		other := r.mgrWrites - r.mgrFailed - float64(known)
		fmt.Fprintf(&b, "| %d | %s | %s | %.0f | %s |\n", r.n, r.phase, strings.Join(cells, " | "), other, byResult(r.reconciles))
	}

	b.WriteString("\nThe machine's CPU by process (CPU-seconds over the phase, from /proc/<pid>/stat; the machine's mean busy share and the share of its seconds at least 95 % busy, from /proc/stat each second):\n\n")
	b.WriteString("| N | phase | wall | " + strings.Join(cpuProcesses, " | ") + " | machine busy (mean / seconds ≥ 95 %) |\n|---|---|---|" + strings.Repeat("---|", len(cpuProcesses)+1) + "\n")
	for _, r := range results {
		cells := []string{}
		for _, name := range cpuProcesses {
			if v, ok := r.procCPU[name]; ok {
				cells = append(cells, fmt.Sprintf("%.1f s", v))
			} else {
				cells = append(cells, "—")
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.0f %% / %.0f %% |\n", r.n, r.phase, secs(r.wall), strings.Join(cells, " | "), 100*r.cpuBusy, 100*r.cpuSaturated)
	}

	b.WriteString("\nWhere the time goes: kube-controller-manager's work queues (mean time an item waited in the queue / mean sync; a sync includes its client's rate-limiter waits), and every 409 Conflict kube-apiserver answered:\n\n")
	b.WriteString("| N | phase | waited for a quiet kube-controller-manager before | schemagate's queue wait p50 / p99 | kube-controller-manager writes per pod created | replicaset queue | deployment queue | job queue | 409 Conflicts |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		cells := []string{}
		for _, q := range []string{"replicaset", "deployment", "job"} {
			if v, ok := r.kcmQueue[q]; ok {
				cells = append(cells, millis(v[0])+" / "+millis(v[1]))
			} else {
				cells = append(cells, "—")
			}
		}
		drain := "—"
		if r.phase != phaseIdle {
			drain = secs(r.drain)
		}
		queue := "—"
		if !math.IsNaN(r.queueP50) && r.phase != phaseDeployments {
			queue = millis(r.queueP50) + " / " + millis(r.queueP99)
		}
		perPod := "—"
		if r.kcmOK && r.podCreates > 0 {
			perPod = fmt.Sprintf("%.1f", r.kcmWrites/r.podCreates)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", r.n, r.phase, drain, queue, perPod, strings.Join(cells, " | "), topCounts(r.apiConflicts, 0))
	}

	b.WriteString("\nkube-apiserver's writes (2xx) per phase, all clients, most frequent first:\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- N=%d, %s: %s\n", r.n, r.phase, topCounts(r.apiWrites, 10))
	}

	b.WriteString("\nRoutingService status writes by the fields they changed (most frequent first):\n\n")
	for _, r := range results {
		if len(r.statusChanges) == 0 {
			continue
		}
		fmt.Fprintf(&b, "- N=%d, %s:", r.n, r.phase)
		type kv struct {
			k string
			v int
		}
		var l []kv
		for k, v := range r.statusChanges {
			l = append(l, kv{k, v})
		}
		sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || (l[i].v == l[j].v && l[i].k < l[j].k) })
		for i, x := range l {
			if i == 6 {
				fmt.Fprintf(&b, " …")
				break
			}
			fmt.Fprintf(&b, " %d× `%s`;", x.v, x.k)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// topCounts prints the largest counts of m, "1234 POST pods, …" (limit 0: all); "none" when empty.
func topCounts(m map[string]float64, limit int) string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var out []string
	for i, k := range keys {
		if limit > 0 && i == limit {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprintf("%.0f %s", m[k], k))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// byResult prints reconciles by controller-runtime's result label, leaving zeros out.
func byResult(m map[string]float64) string {
	var out []string
	for _, k := range sortedKeys(m) {
		if m[k] != 0 {
			out = append(out, fmt.Sprintf("%s %.0f", k, m[k]))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// cpuGrowth compares the manager's CPU seconds per RoutingService at the largest N with those at
// the smallest, per RoutingService phase (target: ≤ 1.2×); "" with a single N.
func cpuGrowth(results []phaseResult) string {
	var parts []string
	for _, phase := range []string{phaseImage, phaseSchema, phaseHung} {
		var lo, hi *phaseResult
		for i := range results {
			r := &results[i]
			if r.phase != phase || r.objects == 0 {
				continue
			}
			if lo == nil || r.n < lo.n {
				lo = r
			}
			if hi == nil || r.n > hi.n {
				hi = r
			}
		}
		if lo == nil || hi == nil || lo.n == hi.n || lo.cpu == 0 {
			continue
		}
		a, b := lo.cpu/float64(lo.objects), hi.cpu/float64(hi.objects)
		parts = append(parts, fmt.Sprintf("%s %.3f s at N=%d → %.3f s at N=%d (%.2f×)", phase, a, lo.n, b, hi.n, b/a))
	}
	if len(parts) == 0 {
		return ""
	}
	return "Manager CPU per RoutingService, smallest N against largest (target ≤ 1.2×): " + strings.Join(parts, "; ") + "."
}

// minRatioN is the smallest N whose ratio to the Deployments is held to 0.9×: below it a phase
// lasts ~15 s and a few seconds of fixed cost (the quiet wait's end, one slow pod) decide it.
const minRatioN = 25

// targets returns the targets a run missed: the same-schema phase slower than 0.9× the
// Deployments at any N from minRatioN, and the RoutingServices without a check slower than 1.05× their
// same-schema time beside hung checks.
func targets(results []phaseResult) []string {
	var missed []string
	deploy := map[int]time.Duration{}
	for _, r := range results {
		if r.phase == phaseDeployments {
			deploy[r.n] = r.wall
		}
	}
	for _, r := range results {
		switch {
		case r.phase == phaseImage && deploy[r.n] > 0 && r.n >= minRatioN:
			if x := r.wall.Seconds() / deploy[r.n].Seconds(); x > 0.9 {
				missed = append(missed, fmt.Sprintf("N=%d: %s took %.2f× the Deployments' time (target ≤ 0.9×)", r.n, r.phase, x))
			}
		case r.phase == phaseHung && r.baseline > 0:
			if x := r.others.Seconds() / r.baseline.Seconds(); x > 1.05 {
				missed = append(missed, fmt.Sprintf("N=%d: the RoutingServices without a check took %.2f× their same-schema time beside %d hung checks (target ≤ 1.05×)", r.n, x, r.hung))
			}
			if r.hungFailed == 0 {
				missed = append(missed, fmt.Sprintf("N=%d: the RoutingServices with a hung check did not all stall with ShardCheckFailed", r.n))
			}
		}
	}
	return missed
}

// gateBursts says how the gates' evidence bunched up: the most evidence the bench saw in any one
// second; for the three slowest gates, how many other gates' evidence it had seen in the second
// before theirs (gates that could be ahead of them in the manager's queue) and how busy the
// machine was while each waited; and the same busy share over the fastest half of the gates and
// over their slowest tenth, to say whether the tail waited on a saturated machine.
func gateBursts(r phaseResult) string {
	busiest := 0
	for _, t0 := range r.gateAt {
		n := 0
		for _, t := range r.gateAt {
			if !t.Before(t0) && t.Sub(t0) < time.Second {
				n++
			}
		}
		busiest = max(busiest, n)
	}
	order := make([]int, len(r.gate))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return r.gate[order[a]] > r.gate[order[b]] })
	var slow []string
	for _, i := range order[:min(3, len(order))] {
		ahead := 0
		for j, t := range r.gateAt {
			if d := r.gateAt[i].Sub(t); j != i && d >= 0 && d < time.Second {
				ahead++
			}
		}
		slow = append(slow, fmt.Sprintf("%s (%d others' evidence in the second before; machine %s busy while it waited)",
			ms(r.gate[i]), ahead, pct(gateBusy(r, order[i:i+1]))))
	}
	line := fmt.Sprintf("Gate evidence at N=%d: at most %d RoutingServices' evidence seen within one second; the slowest gates: %s.", r.n, busiest, strings.Join(slow, ", "))
	if n := len(order); n >= 10 {
		line += fmt.Sprintf(" The machine was %s busy while the slowest tenth of the gates waited, and %s while the fastest half did.",
			pct(gateBusy(r, order[:n/10])), pct(gateBusy(r, order[n/2:])))
	}
	return line
}

// gateBusy is the machine's mean busy share over the seconds the gates idx waited: each
// per-second sample taken from a gate's evidence to one second after its ReplicaSet was seen
// (a sample covers the second before it), pooled over the gates. NaN without samples.
func gateBusy(r phaseResult, idx []int) float64 {
	var sum, n float64
	for _, i := range idx {
		from, to := r.gateAt[i], r.gateAt[i].Add(r.gate[i]+time.Second)
		for _, x := range r.samples {
			if !x.at.Before(from) && !x.at.After(to) && !math.IsNaN(x.busy) {
				sum += x.busy
				n++
			}
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / n
}

// pct formats a share (0 to 1) as a whole percentage; "n/a" for NaN.
func pct(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f %%", 100*x)
}
