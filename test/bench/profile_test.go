//go:build bench

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// pprofURL is the manager's /debug/pprof/ base (--pprof-bind-address on loopback).
var pprofURL string

// profileSlice is the length of one CPU profile: a phase is covered by consecutive slices,
// merged by `go tool pprof` when the phase ends.
const profileSlice = 10 * time.Second

// profiler records the manager's CPU profile over a phase, as consecutive profileSlice slices,
// and its allocations between the phase's two ends.
type profiler struct {
	url         string
	dir, prefix string
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	cpu         []string
	allocsStart string
}

// startProfile begins profiling the manager for a phase; files go to dir as prefix-*.pb.gz.
// url is the manager's /debug/pprof/ base ("": no profile).
// Profiling is best-effort: a failed fetch leaves that slice out (the report says how many
// slices it merged).
func startProfile(ctx context.Context, url, dir, prefix string) *profiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &profiler{url: url, dir: dir, prefix: prefix, cancel: cancel}
	p.allocsStart = p.fetch(ctx, "allocs", prefix+"-allocs-start.pb.gz")
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if f := p.fetch(ctx, fmt.Sprintf("profile?seconds=%d", int(profileSlice.Seconds())), fmt.Sprintf("%s-cpu-%03d.pb.gz", prefix, i)); f != "" {
				p.cpu = append(p.cpu, f)
			}
		}
	}()
	return p
}

// fetch saves one /debug/pprof/ answer under dir/name and returns its path ("" on failure, or
// when ctx ended before the profile was complete).
func (p *profiler) fetch(ctx context.Context, what, name string) string {
	if p.url == "" {
		return ""
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+what, nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	path := filepath.Join(p.dir, name)
	f, err := os.Create(path)
	if err != nil {
		return ""
	}
	_, err = io.Copy(f, io.LimitReader(resp.Body, 64<<20))
	if cerr := f.Close(); err != nil || cerr != nil {
		_ = os.Remove(path)
		return ""
	}
	return path
}

// profileSummary is what a phase's profiles say: the functions with the most CPU (flat, merged
// over the slices) and the most bytes allocated during the phase.
type profileSummary struct {
	slices      int
	cpuTop      []string
	cpuOurs     []string
	allocTop    []string
	allocsTotal string
}

// stop ends the phase's profiling (the slice in flight is dropped) and summarises it with
// `go tool pprof -top` against the manager binary; the full outputs are kept beside the profiles.
func (p *profiler) stop(ctx context.Context, binary string) profileSummary {
	p.cancel()
	p.wg.Wait()
	s := profileSummary{slices: len(p.cpu)}
	end := p.fetch(ctx, "allocs", p.prefix+"-allocs-end.pb.gz")
	if len(p.cpu) > 0 {
		out := pprofTop(ctx, filepath.Join(p.dir, p.prefix+"-cpu-top.txt"), append([]string{"-top", "-nodecount=25", binary}, p.cpu...)...)
		s.cpuTop = topLines(out, 5)
		// Cumulative, schemagate's own functions: which of its steps the CPU is spent under.
		cum := pprofTop(ctx, filepath.Join(p.dir, p.prefix+"-cpu-cum.txt"), append([]string{"-top", "-cum", "-nodecount=60", binary}, p.cpu...)...)
		s.cpuOurs = oursCum(cum, 6)
	}
	if p.allocsStart != "" && end != "" {
		out := pprofTop(ctx, filepath.Join(p.dir, p.prefix+"-allocs-top.txt"), "-top", "-nodecount=25", "-sample_index=alloc_space", "-base", p.allocsStart, binary, end)
		s.allocTop = topLines(out, 4)
		for _, l := range strings.Split(out, "\n") {
			// "Showing nodes accounting for 3118.65MB, 60.64% of 5143.02MB total"
			if _, total, ok := strings.Cut(l, "% of "); ok && strings.HasPrefix(l, "Showing nodes") {
				s.allocsTotal = strings.TrimSpace(total)
			}
		}
	}
	return s
}

// pprofTop runs `go tool pprof args...`, writes its output to out and returns it ("" on failure).
func pprofTop(ctx context.Context, out string, args ...string) string {
	cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof"}, args...)...)
	b, err := cmd.CombinedOutput()
	_ = os.WriteFile(out, b, 0o644)
	if err != nil {
		return ""
	}
	return string(b)
}

// topLines returns the first n rows of a `pprof -top` table as "flat% function".
func topLines(out string, n int) []string {
	var rows []string
	inTable := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 5 && f[0] == "flat" {
			inTable = true
			continue
		}
		if !inTable || len(f) < 6 {
			continue
		}
		rows = append(rows, f[1]+" "+strings.Join(f[5:], " "))
		if len(rows) == n {
			break
		}
	}
	return rows
}

// oursCum returns the first n rows of a `pprof -top -cum` table whose function is schemagate's
// own (its module path), as "cum% function".
func oursCum(out string, n int) []string {
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || !strings.Contains(f[5], "github.com/schemagate/schemagate/") {
			continue
		}
		rows = append(rows, f[4]+" "+strings.TrimPrefix(strings.Join(f[5:], " "), "github.com/schemagate/schemagate/"))
		if len(rows) == n {
			break
		}
	}
	return rows
}
