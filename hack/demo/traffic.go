package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/traffic"
)

// load is the demo's client traffic: rate requests per second per region over the 20 seeded
// domains, to each region's ready router pods (found from the pods, as the EndpointSlice
// controller would: the API server refuses the pods' loopback addresses in EndpointSlices). Each
// act has its own generator, so each gets its own row in the final table; a line per second shows
// what every region answered in that second.
type load struct {
	c        client.Reader
	ns, name string
	rate     int

	mu   sync.Mutex
	gen  *traffic.Generator
	prev map[string]traffic.Totals
	// carry is what the previous generator answered after the last line: the next line adds it.
	carry map[string]traffic.Totals
}

func newLoad(c client.Reader, ns, name string, rate int) *load {
	return &load{c: c, ns: ns, name: name, rate: rate}
}

func (l *load) selectors() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range regions {
		out[r.Shard] = map[string]string{rollout.LabelName: l.name, rollout.LabelShard: r.Shard}
	}
	return out
}

// waitServed waits until every region has a ready router pod.
func (l *load) waitServed(ctx context.Context, timeout time.Duration) error {
	backends := traffic.PodBackends(l.c, l.ns, l.selectors(), routerPort, time.Nanosecond)
	deadline := time.Now().Add(timeout)
	for _, r := range regions {
		for {
			if addrs, _ := backends(ctx, r.Shard); len(addrs) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("region %s has no ready router pod after %s", r.Shard, timeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// start begins a new generator (ending the previous one and returning its report, if any).
func (l *load) start(ctx context.Context) (traffic.Report, bool) {
	var domains []string
	for i := 0; i < 20; i++ {
		domains = append(domains, fmt.Sprintf("d%02d.example", i))
	}
	var names []string
	for _, r := range regions {
		names = append(names, r.Shard)
	}
	next := traffic.Start(ctx, traffic.Options{Regions: names, Rate: l.rate, Domains: domains,
		Backends: traffic.PodBackends(l.c, l.ns, l.selectors(), routerPort, 200*time.Millisecond)})
	l.mu.Lock()
	old, prev := l.gen, l.prev
	l.gen, l.prev = next, nil
	l.mu.Unlock()
	if old == nil {
		return traffic.Report{}, false
	}
	rep := old.Stop()
	carry := map[string]traffic.Totals{}
	for r, t := range rep.Totals {
		carry[r] = delta(*t, prev[r])
	}
	l.mu.Lock()
	l.carry = carry
	l.mu.Unlock()
	return rep, true
}

// stop ends the current generator and returns its report.
func (l *load) stop() traffic.Report {
	l.mu.Lock()
	g := l.gen
	l.gen = nil
	l.mu.Unlock()
	if g == nil {
		return traffic.Report{}
	}
	return g.Stop()
}

// snapshot is the current generator's totals so far.
func (l *load) snapshot() map[string]traffic.Totals {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == nil {
		return nil
	}
	return l.gen.Snapshot()
}

// printEverySecond prints, once a second until ctx ends, what each region answered in that second.
func (l *load) printEverySecond(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		l.mu.Lock()
		if l.gen == nil {
			l.mu.Unlock()
			continue
		}
		now := l.gen.Snapshot()
		prev, carry := l.prev, l.carry
		l.prev, l.carry = now, nil
		l.mu.Unlock()
		var parts []string
		for _, r := range regions {
			parts = append(parts, describeSecond(r.Shard, add(delta(now[r.Shard], prev[r.Shard]), carry[r.Shard])))
		}
		printf("  %s  %-11s %s\n", time.Now().Format("15:04:05.0"), "traffic", strings.Join(parts, " │ "))
	}
}

// delta is what happened between two snapshots of a region.
func delta(now, before traffic.Totals) traffic.Totals {
	d := traffic.Totals{
		Requests: now.Requests - before.Requests, OK: now.OK - before.OK, NotFound: now.NotFound - before.NotFound,
		ServerErr: now.ServerErr - before.ServerErr, ConnErr: now.ConnErr - before.ConnErr, Revisions: map[string]int{},
	}
	for rev, n := range now.Revisions {
		if n -= before.Revisions[rev]; n > 0 {
			d.Revisions[rev] = n
		}
	}
	return d
}

// add sums two deltas.
func add(a, b traffic.Totals) traffic.Totals {
	sum := traffic.Totals{Requests: a.Requests + b.Requests, OK: a.OK + b.OK, NotFound: a.NotFound + b.NotFound,
		ServerErr: a.ServerErr + b.ServerErr, ConnErr: a.ConnErr + b.ConnErr, Revisions: map[string]int{}}
	for _, m := range []map[string]int{a.Revisions, b.Revisions} {
		for rev, n := range m {
			sum.Revisions[rev] += n
		}
	}
	return sum
}

// describeSecond: "us-east 20 req 20×200 0×404 0 err (v1 12, v2 8)".
func describeSecond(region string, t traffic.Totals) string {
	return fmt.Sprintf("%s %d req %d×200 %d×404 %d err %s", region, t.Requests, t.OK, t.NotFound, t.Errors(), revisions(t.Revisions, true))
}

// revisions names who answered: "(v2)" when one revision did, else "(v1 12, v2 8)".
func revisions(counts map[string]int, short bool) string {
	var revs []string
	for rev := range counts {
		revs = append(revs, rev)
	}
	sort.Strings(revs)
	if len(revs) == 0 {
		return "(nobody)"
	}
	if len(revs) == 1 && short {
		return "(" + revs[0] + ")"
	}
	var parts []string
	for _, rev := range revs {
		parts = append(parts, fmt.Sprintf("%s %d", rev, counts[rev]))
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// cleanRollout checks a report: every region answered, never a 404 nor an error, and want answered.
func cleanRollout(rep traffic.Report, want string) error {
	var bad []string
	for _, r := range rep.Regions {
		t := rep.Totals[r]
		if t.NotFound > 0 || t.Errors() > 0 || t.Revisions[want] == 0 {
			bad = append(bad, fmt.Sprintf("%s: %d requests, %d×404, %d errors, answered by %s", r, t.Requests, t.NotFound, t.Errors(), revisions(t.Revisions, false)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("want no 404, no error and answers from %s in every region; %s", want, strings.Join(bad, "; "))
	}
	return nil
}

// servedOnlyBy checks the traffic since before: every region answered 200 only, and only from want.
func servedOnlyBy(before, now map[string]traffic.Totals, want string) error {
	var bad []string
	for _, r := range regions {
		d := delta(now[r.Shard], before[r.Shard])
		if d.OK == 0 || d.OK != d.Requests || len(d.Revisions) != 1 || d.Revisions[want] == 0 {
			bad = append(bad, describeSecond(r.Shard, d))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("at the end, want every request answered 200 by %s: %s", want, strings.Join(bad, "; "))
	}
	return nil
}

// tableRow is one act's traffic report.
type tableRow struct {
	scenario string
	rep      traffic.Report
}

// tables writes the reports as one table (the header once).
func tables(rows ...tableRow) string {
	var b strings.Builder
	for i, row := range rows {
		var t strings.Builder
		row.rep.Table(&t, row.scenario)
		s := t.String()
		if i > 0 { // drop the header and its rule
			for range 2 {
				if j := strings.IndexByte(s, '\n'); j >= 0 {
					s = s[j+1:]
				}
			}
		}
		b.WriteString(s)
	}
	return b.String()
}

// readyReason asks a pod's router why it is not ready (GET /ready on its loopback address).
func readyReason(ctx context.Context, podIP string) string {
	if err := loopback(podIP); err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/ready", podIP, routerPort), nil)
	if err != nil {
		return err.Error()
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var body strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	body.Write(buf[:n])
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(body.String()))
}

// loopback refuses any address outside 127.0.0.0/8: the demo never sends traffic elsewhere.
func loopback(ip string) error {
	if a := net.ParseIP(ip); a == nil || a.To4() == nil || !a.IsLoopback() {
		return fmt.Errorf("not asking %q: not in 127.0.0.0/8", ip)
	}
	return nil
}
