package main

import (
	"context"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schemagate/schemagate/test/postgres"
	"github.com/schemagate/schemagate/test/procmem"
)

// BenchmarkProbe is what one migration probe costs, step by step as its pod runs them, on this
// machine's PostgreSQL: a fresh scratch server (initdb and start, as the probe-scratch sidecar),
// probe copy (a schema-only pg_dump of "production" at the edge router's schema 1, through
// psql, and the catalog), the team's migration to schema 2 (golang-migrate, in the test's
// process: not counted in the memory), and probe report. It reports the time of each step and the
// peak memory (PSS, shared pages counted once) of the scratch server's processes and of the
// probe's own steps (schemagate-schema, pg_dump, psql). `make bench` prints the table.
func BenchmarkProbe(b *testing.B) {
	production := newDatabase(b)
	migrateExample(b, production, 1)
	binary(b) // built before the clock and the sampling start
	self, shared := os.Getpid(), pg.PID()
	var scratchPID atomic.Int64
	groups := func() map[string][]int {
		skip := map[int]bool{self: true}
		for _, p := range procmem.Tree(shared) {
			skip[p] = true
		}
		var scratch, steps []int
		pid := int(scratchPID.Load())
		if pid != 0 {
			scratch = procmem.Tree(pid)
		}
		for _, p := range procmem.Tree(self) {
			switch {
			case skip[p] || slices.Contains(scratch, p):
			case pid == 0:
				scratch = append(scratch, p) // initdb and the server starting
			default:
				steps = append(steps, p)
			}
		}
		return map[string][]int{"scratch": scratch, "steps": steps}
	}
	var start, copyStep, migration, report time.Duration
	peak := map[string]int64{}
	n := 0
	for b.Loop() {
		n++
		w := procmem.Watch(5*time.Millisecond, groups)
		t0 := time.Now()
		scratch, err := postgres.Start(context.Background(), postgres.Options{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		scratchPID.Store(int64(scratch.PID()))
		t1 := time.Now()
		catalog := b.TempDir() + "/before.json"
		if r := runBinary(b, []string{"DATABASE_URL=" + scratch.URL("postgres"), "SOURCE_DATABASE_URL=" + production}, "probe", "copy", "--catalog", catalog); r.code != exitClean {
			b.Fatalf("probe copy: exit %d\n%s", r.code, r.stderr)
		}
		t2 := time.Now()
		migrateExample(b, scratch.URL("postgres"), 2)
		t3 := time.Now()
		if r := runBinary(b, []string{"DATABASE_URL=" + scratch.URL("postgres")}, "probe", "report", "--catalog", catalog, "--report-path", "-"); r.code != exitClean {
			b.Fatalf("probe report: exit %d\n%s", r.code, r.stderr)
		}
		t4 := time.Now()
		for k, v := range w.Stop() {
			peak[k] = max(peak[k], v)
		}
		scratchPID.Store(0)
		if err := scratch.Close(); err != nil {
			b.Fatal(err)
		}
		start, copyStep, migration, report = start+t1.Sub(t0), copyStep+t2.Sub(t1), migration+t3.Sub(t2), report+t4.Sub(t3)
	}
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(n) }
	b.ReportMetric(ms(start), "scratch-start-ms/op")
	b.ReportMetric(ms(copyStep), "copy-ms/op")
	b.ReportMetric(ms(migration), "migrate-ms/op")
	b.ReportMetric(ms(report), "report-ms/op")
	b.ReportMetric(float64(peak["scratch"])/(1<<20), "scratch-peak-MiB")
	b.ReportMetric(float64(peak["steps"])/(1<<20), "steps-peak-MiB")
}
