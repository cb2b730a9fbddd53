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
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %.0f (%.0f) | %.0f | %s | %.1f s | %.0f MiB | %s | %s | %s |\n",
			r.n, phase, secs(r.wall), ratio, perRS, r.mgrWrites, r.mgrFailed, sumMap(r.reconciles), p, r.cpu, r.peakRSS/(1<<20), kcmW, kcmWait, pods)
	}
	b.WriteString("\nwall: from the first update request until every object is done (Deployments: observedGeneration current, updated = available = 3, no old pod; RoutingServices: Ready=True for the new generation). Manager columns are deltas of its /metrics over the phase (writes: rest_client_requests_total POST/PUT/PATCH/DELETE; reconcile quantiles from controller_runtime_reconcile_time_seconds{controller=\"routingservice\"}; RSS sampled every second). kube-controller-manager: the same counter and rest_client_rate_limiter_duration_seconds (time its requests waited in client-side rate limiters, summed). Pods created: kube-apiserver's POST pods over the wall time, and the most pods the bench saw appear in one second.\n")
	if meta.kcm != nil && meta.kcm.unreachable != "" {
		fmt.Fprintf(&b, "\nkube-controller-manager's /metrics was not reachable: %s.\n", meta.kcm.unreachable)
	}

	b.WriteString("\nGate latency (schema phase): from the bench seeing the migration Job Complete to it seeing the first ReplicaSet of the new revision, per RoutingService.\n\n")
	b.WriteString("| N | p50 | p99 | max | RoutingServices measured |\n|---|---|---|---|---|\n")
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
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", r.n, ms(percentile(0.5, r.gate)), ms(percentile(0.99, r.gate)), ms(maxd), measured)
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

	b.WriteString("\nWhere the time goes: kube-controller-manager's work queues (mean time an item waited in the queue / mean sync; a sync includes its client's rate-limiter waits), and every 409 Conflict kube-apiserver answered:\n\n")
	b.WriteString("| N | phase | waited for a quiet kube-controller-manager before | replicaset queue | deployment queue | job queue | 409 Conflicts |\n|---|---|---|---|---|---|---|\n")
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
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", r.n, r.phase, drain, strings.Join(cells, " | "), topCounts(r.apiConflicts, 0))
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
