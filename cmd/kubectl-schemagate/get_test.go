package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// The states of the golden tests: a RoutingService captured from a real run, the clock, and the
// ReplicaSets, Jobs and Pods that go with it (what the ReplicaSet and Job controllers would have
// made at that moment).
var goldenStates = []struct {
	state string
	now   string
	build func(w *world)
}{
	{"healthy", "2026-11-30T06:56:53Z", func(w *world) {
		w.migration("1", 1, "2026-11-30T06:51:53Z", "2026-11-30T06:51:53Z", "complete")
		w.replicaSet("us-east", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:53Z", podSpec{ready: 3})
		w.replicaSet("eu-west", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:54Z", podSpec{ready: 3})
		w.replicaSet("ap-south", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:55Z", podSpec{ready: 3, restarts: 1})
	}},
	{"migrating", "2026-11-30T06:52:20Z", func(w *world) {
		w.migration("1", 1, "2026-11-30T06:52:09Z", "2026-11-30T06:52:09Z", "complete")
		w.migration("2", 1, "2026-11-30T06:52:13Z", "", "running")
		for i, s := range []string{"us-east", "eu-west", "ap-south"} {
			w.replicaSet(s, "cc447w65w7", "app:v1", 3, []string{"2026-11-30T06:52:09Z", "2026-11-30T06:52:10Z", "2026-11-30T06:52:11Z"}[i], podSpec{ready: 3})
		}
	}},
	{"progressing", "2026-11-30T06:52:00Z", func(w *world) {
		w.migration("1", 1, "2026-11-30T06:51:53Z", "2026-11-30T06:51:53Z", "complete")
		w.migration("2", 1, "2026-11-30T06:51:55Z", "2026-11-30T06:51:57Z", "complete")
		w.replicaSet("us-east", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:53Z", podSpec{ready: 3})
		w.replicaSet("us-east", "4c59v6bw28", "app:v2", 1, "2026-11-30T06:51:58Z", podSpec{others: 1, notReady: "ContainerCreating"})
		w.replicaSet("eu-west", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:54Z", podSpec{ready: 3})
		w.replicaSet("ap-south", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:55Z", podSpec{ready: 3})
	}},
	{"paused", "2026-11-30T06:52:40Z", func(*world) {
		// A first rollout created paused: no migration has started and nothing is scaled.
	}},
	{"migration-failed", "2026-11-30T06:52:20Z", func(w *world) {
		w.migration("1", 1, "2026-11-30T06:52:09Z", "2026-11-30T06:52:09Z", "complete")
		w.migration("2", 1, "2026-11-30T06:52:13Z", "2026-11-30T06:52:16Z", "failed")
		for i, s := range []string{"us-east", "eu-west", "ap-south"} {
			w.replicaSet(s, "cc447w65w7", "app:v1", 3, []string{"2026-11-30T06:52:09Z", "2026-11-30T06:52:10Z", "2026-11-30T06:52:11Z"}[i], podSpec{ready: 3})
		}
	}},
	{"progress-deadline-exceeded", "2026-11-30T06:52:05Z", func(w *world) {
		w.migration("1", 1, "2026-11-30T06:51:53Z", "2026-11-30T06:51:53Z", "complete")
		w.replicaSet("us-east", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:53Z", podSpec{ready: 3})
		w.replicaSet("us-east", "47x4dwczzw", "app:broken", 0, "2026-11-30T06:51:57Z", podSpec{others: 1, notReady: "Terminating"})
		w.replicaSet("eu-west", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:54Z", podSpec{ready: 3})
		w.replicaSet("ap-south", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:55Z", podSpec{ready: 3})
	}},
	{"shard-check-failed", "2026-12-01T00:07:41Z", func(w *world) {
		w.migration("1", 1, "2026-12-01T00:07:32Z", "2026-12-01T00:07:32Z", "complete")
		w.replicaSet("us-east", "zb6776478b", "app:v1", 3, "2026-12-01T00:07:32Z", podSpec{ready: 3})
		w.replicaSet("us-east", "429598z825", "app:v2", 0, "2026-12-01T00:07:36Z", podSpec{})
		w.replicaSet("eu-west", "zb6776478b", "app:v1", 3, "2026-12-01T00:07:33Z", podSpec{ready: 3})
		w.replicaSet("eu-west", "429598z825", "app:v2", 0, "2026-12-01T00:07:38Z", podSpec{})
		w.replicaSet("ap-south", "zb6776478b", "app:v1", 3, "2026-12-01T00:07:34Z", podSpec{ready: 3})
	}},
	{"shard-check-inconclusive", "2026-12-01T00:09:21Z", func(w *world) {
		w.migration("1", 1, "2026-12-01T00:09:08Z", "2026-12-01T00:09:09Z", "complete")
		w.checkJob("1", 1, "2026-12-01T00:09:10Z", "2026-12-01T00:09:11Z", "complete")
		w.replicaSet("us-east", "5w4wbfbv24", "schemagate.local/edge-router:v1", 0, "2026-12-01T00:09:10Z", podSpec{})
		w.replicaSet("us-east", "x7v8b476c9", "schemagate.local/edge-router:v2", 2, "2026-12-01T00:09:16Z", podSpec{ready: 2})
		w.replicaSet("eu-west", "5w4wbfbv24", "schemagate.local/edge-router:v1", 2, "2026-12-01T00:09:11Z", podSpec{ready: 2})
		w.replicaSet("ap-south", "5w4wbfbv24", "schemagate.local/edge-router:v1", 2, "2026-12-01T00:09:12Z", podSpec{ready: 2})
	}},
	{"stale-generation", "2026-11-30T06:52:10Z", func(w *world) {
		// Generation 2 was just applied; the status still describes generation 1.
		w.migration("1", 1, "2026-11-30T06:51:53Z", "2026-11-30T06:51:53Z", "complete")
		for i, s := range []string{"us-east", "eu-west", "ap-south"} {
			w.replicaSet(s, "cc447w65w7", "app:v1", 3, []string{"2026-11-30T06:51:53Z", "2026-11-30T06:51:54Z", "2026-11-30T06:51:55Z"}[i], podSpec{ready: 3})
		}
	}},
}

// TestGetGolden renders `get NAME --no-color` for each captured state through the whole command
// (fake clients) and compares it with testdata/<state>.golden; -update rewrites them.
func TestGetGolden(t *testing.T) {
	for _, gs := range goldenStates {
		t.Run(gs.state, func(t *testing.T) {
			w := newWorld(t, gs.state, gs.now)
			gs.build(w)
			res := runWith(w.clients(), w.now, "get", w.r.Name, "-n", w.r.Namespace, "--no-color")
			if res.code != 0 || res.err != "" {
				t.Fatalf("exit %d, stderr %q", res.code, res.err)
			}
			golden := filepath.Join("testdata", gs.state+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(res.out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run `go test ./cmd/kubectl-schemagate/ -run TestGetGolden -update`)", err)
			}
			if res.out != string(want) {
				t.Errorf("get output differs from %s (-update rewrites it)\n--- got:\n%s\n--- want:\n%s", golden, res.out, want)
			}
			if strings.Contains(res.out, "\x1b[") {
				t.Errorf("--no-color output has escape codes")
			}
		})
	}
}

// TestGetJSON checks that -o json prints the view the tree is drawn from.
func TestGetJSON(t *testing.T) {
	w := newWorld(t, "shard-check-inconclusive", "2026-12-01T00:09:21Z")
	goldenStates[7].build(w)
	res := runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-o", "json")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.err)
	}
	var v View
	if err := json.Unmarshal([]byte(res.out), &v); err != nil {
		t.Fatalf("%v\n%s", err, res.out)
	}
	if v.State != StateProgressing || v.Reason != "ShardCheckInconclusive" || v.Done {
		t.Errorf("state %s %s done=%v", v.State, v.Reason, v.Done)
	}
	us := v.Shards[0]
	if us.Name != "us-east" || us.Step != "Baking" || !us.Current || us.Timer == nil || us.Timer.Kind != "bake" ||
		!strings.HasPrefix(us.Timer.Text, "held: check no-data is inconclusive") {
		t.Errorf("us-east %+v timer %+v", us, us.Timer)
	}
	if len(us.Checks) != 1 || us.Checks[0].Phase != "Inconclusive" || us.Checks[0].Required != 2 || us.Checks[0].Last == nil ||
		us.Checks[0].Last.Phase != "Inconclusive" {
		t.Errorf("checks %+v", us.Checks)
	}
	if len(us.RSs) != 2 || us.RSs[1].Revision != "x7v8b476c9" || strings.Join(us.RSs[1].Tags, ",") != "update,serving" || len(us.RSs[1].Pods) != 2 {
		t.Errorf("replica sets %+v", us.RSs)
	}
	if len(v.Jobs) != 2 || v.Jobs[0].Component != "migration" || v.Jobs[1].Component != "check" || len(v.Jobs[0].Pods) != 1 {
		t.Errorf("jobs %+v", v.Jobs)
	}
	res = runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-o", "yaml")
	if res.code != 0 || !strings.Contains(res.out, "state: Progressing") {
		t.Errorf("yaml: exit %d\n%s", res.code, res.out)
	}
	if res := runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-o", "wide"); res.code != 1 || !strings.Contains(res.err, "--output must be json or yaml") {
		t.Errorf("-o wide: %+v", res)
	}
}

// TestDoneOnlyForTheCurrentGeneration: Ready=True of generation 1 says nothing about generation 2.
func TestDoneOnlyForTheCurrentGeneration(t *testing.T) {
	for state, want := range map[string]Summary{
		"healthy":                    {State: StateReady, Reason: "RolloutComplete", Done: true},
		"stale-generation":           {State: StatePending, Reason: "NotObserved"},
		"no-status":                  {State: StatePending, Reason: "NotObserved"},
		"migrating":                  {State: StateProgressing, Reason: "Migrating"},
		"paused":                     {State: StatePaused, Reason: "Paused"},
		"migration-failed":           {State: StateStalled, Reason: "MigrationFailed", Done: true},
		"progress-deadline-exceeded": {State: StateStalled, Reason: "ProgressDeadlineExceeded", Done: true},
		"shard-check-inconclusive":   {State: StateProgressing, Reason: "ShardCheckInconclusive"},
	} {
		r, err := toTyped(captured(t, state))
		if err != nil {
			t.Fatal(err)
		}
		got := Summarize(r)
		if got.State != want.State || got.Reason != want.Reason || got.Done != want.Done {
			t.Errorf("%s: %+v, want %+v", state, got, want)
		}
	}
}

// On a terminal a frame overwrites the previous one line by line (no clear between frames, so no
// flicker); elsewhere frames are appended, and only when they changed.
func TestScreen(t *testing.T) {
	var b strings.Builder
	s := &screen{w: &b, tty: true}
	s.draw("a\nb\n")
	s.draw("c\n")
	if want := "\x1b[H\x1b[2Ja\x1b[K\nb\x1b[K\n\x1b[J" + "\x1b[Hc\x1b[K\n\x1b[J"; b.String() != want {
		t.Errorf("tty: %q, want %q", b.String(), want)
	}
	b.Reset()
	s = &screen{w: &b}
	s.draw("a\n")
	s.draw("a\n")
	s.draw("b\n")
	if want := "a\n\nb\n"; b.String() != want {
		t.Errorf("not a tty: %q, want %q", b.String(), want)
	}
}

// Colours only on a terminal, and neither with --no-color nor with NO_COLOR set.
func TestColors(t *testing.T) {
	w := newWorld(t, "progress-deadline-exceeded", "2026-11-30T06:52:05Z")
	goldenStates[5].build(w)
	for _, tc := range []struct {
		tty     bool
		noColor string
		args    []string
		colored bool
	}{
		{true, "", nil, true},
		{true, "1", nil, false},
		{true, "", []string{"--no-color"}, false},
		{false, "", nil, false},
	} {
		var out bytes.Buffer
		streams := genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: &out, ErrOut: &out}
		a := newApp(genericclioptions.NewConfigFlags(false), streams)
		a.now = func() time.Time { return w.now }
		a.connect = func() (*clients, error) { return w.clients(), nil }
		a.getenv = func(k string) string {
			if k == "NO_COLOR" {
				return tc.noColor
			}
			return ""
		}
		a.tty = func(io.Writer) bool { return tc.tty }
		if code := run(append([]string{"get", "rs-a", "-n", w.r.Namespace}, tc.args...), streams, a); code != 1 && code != 0 {
			t.Fatalf("exit %d: %s", code, out.String())
		}
		if got := strings.Contains(out.String(), "\x1b[31mStalled\x1b[0m"); got != tc.colored {
			t.Errorf("tty %v NO_COLOR %q %v: coloured %v, want %v", tc.tty, tc.noColor, tc.args, got, tc.colored)
		}
	}
}
