// Package traffic is the test-only load generator of issue 9: it sends a bounded, steady rate of
// HTTP requests per region over a fixed set of domains to each region's ready backends, found in
// EndpointSlices as a client would (there is no kube-proxy here), and counts per second and per
// region the answers: 200, 404, 5xx, connection errors (no ready backend counts as one), and which
// revision answered (the X-Revision response header). It only ever sends to 127.0.0.0/8.
package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Backends returns the addresses ("127.0.0.7:8080") of a region's ready backends.
type Backends func(ctx context.Context, region string) ([]string, error)

// Options configure a Generator.
type Options struct {
	// Regions are the regions to send to, each at Rate requests per second.
	Regions []string
	// Rate is requests per second per region (default 20).
	Rate int
	// Domains are the Host headers, used in turn.
	Domains []string
	// Backends finds each region's ready backends (see EndpointSliceBackends).
	Backends Backends
	// Timeout bounds one request (default 1 s).
	Timeout time.Duration
}

// Second is what one region answered in one second.
type Second struct {
	At        time.Time
	Region    string
	OK        int
	NotFound  int
	ServerErr int
	ConnErr   int
	// Revisions counts the X-Revision of the answers that came back (any status).
	Revisions map[string]int
}

// Totals sum a region over the whole run.
type Totals struct {
	Requests, OK, NotFound, ServerErr, ConnErr int
	// MaxGap is the longest time without a 200 while requests were being sent, in seconds.
	MaxGap time.Duration
	// Revisions counts who answered.
	Revisions map[string]int
	// NotFoundBy counts the 404s by who answered them (X-Revision).
	NotFoundBy map[string]int
	// Latencies are the times of the requests that got an answer (any status), in order.
	Latencies []time.Duration
}

// Latency is the q-quantile (0 < q ≤ 1) of the answered requests' times, nearest rank; 0 with
// none.
func (t Totals) Latency(q float64) time.Duration {
	if len(t.Latencies) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), t.Latencies...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	rank := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Errors are the answers that are neither 200 nor 404.
func (t Totals) Errors() int { return t.ServerErr + t.ConnErr }

// Report is a finished run.
type Report struct {
	Regions []string
	Totals  map[string]*Totals
	Seconds []Second
}

// Generator sends requests until Stop.
type Generator struct {
	opts   Options
	client *http.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	start   time.Time
	totals  map[string]*Totals
	seconds map[string]map[int64]*Second
	lastOK  map[string]time.Time
}

// Start begins sending. The context bounds the whole run.
func Start(ctx context.Context, opts Options) *Generator {
	if opts.Rate <= 0 {
		opts.Rate = 20
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	g := &Generator{
		opts:    opts,
		client:  &http.Client{Timeout: opts.Timeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}},
		cancel:  cancel,
		start:   time.Now(),
		totals:  map[string]*Totals{},
		seconds: map[string]map[int64]*Second{},
		lastOK:  map[string]time.Time{},
	}
	for _, r := range opts.Regions {
		g.totals[r] = &Totals{Revisions: map[string]int{}, NotFoundBy: map[string]int{}}
		g.seconds[r] = map[int64]*Second{}
		g.lastOK[r] = g.start
		g.wg.Add(1)
		go g.region(ctx, r)
	}
	return g
}

// Stop ends the run and returns its report.
func (g *Generator) Stop() Report {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	rep := Report{Regions: append([]string(nil), g.opts.Regions...), Totals: g.totals}
	for _, r := range g.opts.Regions {
		if gap := now.Sub(g.lastOK[r]); gap > g.totals[r].MaxGap {
			g.totals[r].MaxGap = gap
		}
		for _, s := range g.seconds[r] {
			rep.Seconds = append(rep.Seconds, *s)
		}
	}
	sort.Slice(rep.Seconds, func(i, j int) bool {
		if !rep.Seconds[i].At.Equal(rep.Seconds[j].At) {
			return rep.Seconds[i].At.Before(rep.Seconds[j].At)
		}
		return rep.Seconds[i].Region < rep.Seconds[j].Region
	})
	return rep
}

// Snapshot returns the totals so far (for a line per second in the demo).
func (g *Generator) Snapshot() map[string]Totals {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]Totals{}
	for r, t := range g.totals {
		c := *t
		c.Revisions, c.NotFoundBy = maps.Clone(t.Revisions), maps.Clone(t.NotFoundBy)
		c.Latencies = append([]time.Duration(nil), t.Latencies...)
		out[r] = c
	}
	return out
}

// region sends Rate requests per second to one region, one at a time on a ticker, round-robin over
// its ready backends and the domains. A request that is due while the previous one is still out
// is sent concurrently, so a slow backend does not lower the rate.
func (g *Generator) region(ctx context.Context, region string) {
	defer g.wg.Done()
	tick := time.NewTicker(time.Second / time.Duration(g.opts.Rate))
	defer tick.Stop()
	var inflight sync.WaitGroup
	defer inflight.Wait()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n++
		domain := ""
		if len(g.opts.Domains) > 0 {
			domain = g.opts.Domains[n%len(g.opts.Domains)]
		}
		inflight.Add(1)
		go func(n int) {
			defer inflight.Done()
			began := time.Now()
			code, rev := g.send(ctx, region, domain, n)
			if ctx.Err() != nil && code == 0 {
				return // the run ended, not the backend
			}
			g.record(region, code, rev, time.Since(began))
		}(n)
	}
}

// send makes one request; code 0 is a connection error (or no ready backend).
func (g *Generator) send(ctx context.Context, region, domain string, n int) (int, string) {
	backends, err := g.opts.Backends(ctx, region)
	if err != nil || len(backends) == 0 {
		return 0, ""
	}
	addr := backends[n%len(backends)]
	if err := loopbackOnly(addr); err != nil {
		return 0, ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		return 0, ""
	}
	req.Host = domain
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Revision")
}

func (g *Generator) record(region string, code int, rev string, took time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	t := g.totals[region]
	sec := now.Unix()
	s := g.seconds[region][sec]
	if s == nil {
		s = &Second{At: time.Unix(sec, 0), Region: region, Revisions: map[string]int{}}
		g.seconds[region][sec] = s
	}
	t.Requests++
	if code != 0 {
		t.Latencies = append(t.Latencies, took)
	}
	switch {
	case code == http.StatusOK:
		t.OK++
		s.OK++
		if gap := now.Sub(g.lastOK[region]); gap > t.MaxGap {
			t.MaxGap = gap
		}
		g.lastOK[region] = now
	case code == http.StatusNotFound:
		t.NotFound++
		s.NotFound++
		if rev != "" {
			t.NotFoundBy[rev]++
		}
	case code == 0:
		t.ConnErr++
		s.ConnErr++
	default:
		t.ServerErr++
		s.ServerErr++
	}
	if rev != "" {
		t.Revisions[rev]++
		s.Revisions[rev]++
	}
}

// loopbackOnly refuses any address outside 127.0.0.0/8: tests never send traffic elsewhere.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return errors.New("traffic: refusing to send to " + addr + ": not in 127.0.0.0/8")
	}
	return nil
}

// Table writes a small table of the run: one row per region with requests, 200s, 404s, errors,
// the longest time without a good answer, and who answered (with the 404s each answered:
// "v1×120 (404×80)").
func (r Report) Table(w io.Writer, scenario string) {
	fmt.Fprintf(w, "| scenario | region | requests | 200 | 404 | errors | max s without 200 | answered by |\n|---|---|---|---|---|---|---|---|\n")
	for _, region := range r.Regions {
		t := r.Totals[region]
		var revs []string
		for rev, n := range t.Revisions {
			s := rev + "×" + strconv.Itoa(n)
			if nf := t.NotFoundBy[rev]; nf > 0 {
				s += " (404×" + strconv.Itoa(nf) + ")"
			}
			revs = append(revs, s)
		}
		sort.Strings(revs)
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %.1f | %v |\n", scenario, region, t.Requests, t.OK, t.NotFound, t.Errors(), t.MaxGap.Seconds(), revs)
	}
}

// LatencyTable writes one row per region with requests, p50 and p99 latency of the answered
// requests, and errors (neither 200 nor 404).
func (r Report) LatencyTable(w io.Writer, scenario string) {
	fmt.Fprintf(w, "| scenario | region | requests | p50 ms | p99 ms | 404 | errors |\n|---|---|---|---|---|---|---|\n")
	for _, region := range r.Regions {
		t := r.Totals[region]
		fmt.Fprintf(w, "| %s | %s | %d | %.1f | %.1f | %d | %d |\n", scenario, region, t.Requests,
			float64(t.Latency(0.5).Microseconds())/1000, float64(t.Latency(0.99).Microseconds())/1000, t.NotFound, t.Errors())
	}
}

// SecondsTable writes one row per second from `from` to `to` (both inclusive, truncated to the
// second), and per region "200/404/errors" that second: the per-second view of an outage, where
// a region that stopped answering shows as a row of errors or as a missing second ("-").
func (r Report) SecondsTable(w io.Writer, from, to time.Time) {
	fmt.Fprintf(w, "| second |")
	for _, region := range r.Regions {
		fmt.Fprintf(w, " %s 200/404/err |", region)
	}
	fmt.Fprintf(w, "\n|---|")
	for range r.Regions {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintln(w)
	at := map[int64]map[string]Second{}
	for _, s := range r.Seconds {
		k := s.At.Unix()
		if at[k] == nil {
			at[k] = map[string]Second{}
		}
		at[k][s.Region] = s
	}
	start, end := from.Truncate(time.Second), to.Truncate(time.Second)
	for t := start; !t.After(end); t = t.Add(time.Second) {
		fmt.Fprintf(w, "| +%ds |", int(t.Sub(start).Seconds()))
		for _, region := range r.Regions {
			s, ok := at[t.Unix()][region]
			if !ok {
				fmt.Fprintf(w, " - |")
				continue
			}
			fmt.Fprintf(w, " %d/%d/%d |", s.OK, s.NotFound, s.ServerErr+s.ConnErr)
		}
		fmt.Fprintln(w)
	}
}
