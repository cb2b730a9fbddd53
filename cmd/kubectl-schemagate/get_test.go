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

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	{"contract-pending", "2026-12-02T03:10:00Z", func(w *world) {
		// v2 (runs on [2, 3]) promoted everywhere after the expand to 2; v1's ReplicaSets are
		// scaled to 0; the contract to 3 waits for the rollback window.
		w.migration("2", 1, "2026-12-02T02:52:00Z", "2026-12-02T02:52:10Z", "complete")
		for i, s := range []string{"us-east", "eu-west", "ap-south"} {
			w.replicaSet(s, "cc447w65w7", "app:v1", 0, []string{"2026-12-02T02:50:00Z", "2026-12-02T02:50:01Z", "2026-12-02T02:50:02Z"}[i], podSpec{})
			w.replicaSet(s, "4c59v6bw28", "app:v2", 3, []string{"2026-12-02T02:53:00Z", "2026-12-02T02:58:00Z", "2026-12-02T03:03:00Z"}[i], podSpec{ready: 3})
		}
	}},
	{"rollback-refused", "2026-12-02T03:21:00Z", func(w *world) {
		// After the contract to 3, the spec was reverted to v1 (runs on [1, 2]): refused, every
		// shard holds on v2.
		w.migration("2", 1, "2026-12-02T02:52:00Z", "2026-12-02T02:52:10Z", "complete")
		for i, s := range []string{"us-east", "eu-west", "ap-south"} {
			w.replicaSet(s, "cc447w65w7", "app:v1", 0, []string{"2026-12-02T02:50:00Z", "2026-12-02T02:50:01Z", "2026-12-02T02:50:02Z"}[i], podSpec{})
			w.replicaSet(s, "4c59v6bw28", "app:v2", 3, []string{"2026-12-02T02:53:00Z", "2026-12-02T02:58:00Z", "2026-12-02T03:03:00Z"}[i], podSpec{ready: 3})
		}
	}},
	{"stale-generation", "2026-11-30T06:52:10Z", func(w *world) {
		// Generation 2 was just applied; the status still describes generation 1.
		w.migration("1", 1, "2026-11-30T06:51:53Z", "2026-11-30T06:51:53Z", "complete")
		for i, s := range []string{"us-east", "eu-west", "ap-south"} {
			w.replicaSet(s, "cc447w65w7", "app:v1", 3, []string{"2026-11-30T06:51:53Z", "2026-11-30T06:51:54Z", "2026-11-30T06:51:55Z"}[i], podSpec{ready: 3})
		}
	}},
	{"clusters", "2026-11-30T06:52:00Z", func(w *world) {
		// progressing, with eu-west in cluster eu-1 (answering) and ap-south in cluster ap-1
		// (gone for a minute): only us-east's ReplicaSets are in this cluster.
		inClusters(w)
		w.migration("1", 1, "2026-11-30T06:51:53Z", "2026-11-30T06:51:53Z", "complete")
		w.migration("2", 1, "2026-11-30T06:51:55Z", "2026-11-30T06:51:57Z", "complete")
		w.replicaSet("us-east", "cc447w65w7", "app:v1", 3, "2026-11-30T06:51:53Z", podSpec{ready: 3})
		w.replicaSet("us-east", "4c59v6bw28", "app:v2", 1, "2026-11-30T06:51:58Z", podSpec{others: 1, notReady: "ContainerCreating"})
	}},
}

// goldenBase names the captured RoutingService a golden state starts from, when it is not the
// state's own.
var goldenBase = map[string]string{"clusters": "progressing"}

// inClusters puts w's eu-west in cluster eu-1, Reachable, and ap-south in cluster ap-1 (namespace
// edge-ap), Unreachable for a minute, with ClustersReachable=False.
func inClusters(w *world) {
	w.t.Helper()
	shards := w.u.Object["spec"].(map[string]any)["shards"].([]any)
	shards[1].(map[string]any)["cluster"] = map[string]any{"name": "eu-1"}
	shards[2].(map[string]any)["cluster"] = map[string]any{"name": "ap-1", "namespace": "edge-ap"}
	status := w.u.Object["status"].(map[string]any)
	ss := status["shards"].([]any)
	ss[1].(map[string]any)["cluster"] = map[string]any{"name": "eu-1", "state": "Reachable", "lastContactTime": "2026-11-30T06:51:58Z"}
	ss[2].(map[string]any)["cluster"] = map[string]any{"name": "ap-1", "state": "Unreachable",
		"message":         "GET https://ap-1.example:6443/version: dial tcp 203.0.113.7:6443: i/o timeout",
		"lastContactTime": "2026-11-30T06:50:50Z", "unreachableSince": "2026-11-30T06:51:00Z"}
	status["conditions"] = append(status["conditions"].([]any), map[string]any{
		"type": "ClustersReachable", "status": "False", "reason": "ClusterUnreachable", "observedGeneration": int64(2),
		"lastTransitionTime": "2026-11-30T06:51:00Z",
		"message":            "cluster ap-1 (shard ap-south) is Unreachable since 2026-11-30T06:51:00Z",
	})
	if err := unstructuredSet(w, shards, "spec", "shards"); err != nil {
		w.t.Fatal(err)
	}
}

// goldenState is the golden state named state.
func goldenState(t *testing.T, state string) struct {
	state string
	now   string
	build func(w *world)
} {
	t.Helper()
	for _, gs := range goldenStates {
		if gs.state == state {
			return gs
		}
	}
	t.Fatalf("no golden state %s", state)
	return goldenStates[0]
}

// TestGetGolden renders `get NAME --no-color` for each captured state through the whole command
// (fake clients) and compares it with testdata/<state>.golden; -update rewrites them.
func TestGetGolden(t *testing.T) {
	for _, gs := range goldenStates {
		t.Run(gs.state, func(t *testing.T) {
			base := gs.state
			if b, ok := goldenBase[gs.state]; ok {
				base = b
			}
			w := newWorld(t, base, gs.now)
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
	goldenState(t, "shard-check-inconclusive").build(w)
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
	goldenState(t, "progress-deadline-exceeded").build(w)
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

// The schema lifecycle in get: the database's reported version, the phase and since when, each
// revision's range (assumed ones marked) and the shards it serves, the contract's earliest time,
// and RollbackSafe; RollbackRefused, RollbackSafe=False and DatabaseAhead in red.
func TestGetSchemaLifecycle(t *testing.T) {
	w := newWorld(t, "contract-pending", "2026-12-02T03:10:00Z")
	goldenState(t, "contract-pending").build(w)
	res := runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "--no-color")
	for _, want := range []string{
		"Lifecycle:  RollbackWindow for 5m (since 2026-12-02T03:05:00Z); the database reports schema 2",
		"Contract:   to schema 3 at 2026-12-02T03:15:00Z (in 5m); ContractReady=False RollbackWindow",
		"Ranges:     4c59v6bw28 runs on [2, 3], serves us-east, eu-west, ap-south; cc447w65w7 runs on [1, 2], serves no shard",
		"Rollback:   safe (RollbackAvailable): every revision a rollback would return to runs on schema 2",
	} {
		if !strings.Contains(res.out, want) {
			t.Errorf("contract-pending lacks %q:\n%s", want, res.out)
		}
	}
	res = runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-o", "json")
	var v View
	if err := json.Unmarshal([]byte(res.out), &v); err != nil {
		t.Fatal(err)
	}
	if l := v.Schema.Lifecycle; l == nil || l.Phase != "RollbackWindow" || l.Reported != "2" || l.Contract == nil || l.Contract.EligibleTime == nil ||
		!l.Contract.EligibleTime.Equal(mustTime("2026-12-02T03:15:00Z")) || len(l.Revisions) != 2 || l.Revisions[0].Max != "3" || l.RollbackSafe != "True" {
		t.Errorf("-o json lifecycle %+v", v.Schema.Lifecycle)
	}

	// An assumed range is marked, with the open end.
	w = newWorld(t, "contract-pending", "2026-12-02T03:10:00Z")
	if err := unstructuredSet(w, []any{
		map[string]any{"revision": "4c59v6bw28", "min": "2", "assumed": true, "shards": []any{"us-east"}},
	}, "status", "schema", "revisions"); err != nil {
		t.Fatal(err)
	}
	res = runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "--no-color")
	if !strings.Contains(res.out, "Ranges:     4c59v6bw28 runs on [2, ∞) (assumed: no range declared), serves us-east") {
		t.Errorf("assumed range:\n%s", res.out)
	}

	// Red on a terminal: the refused rollback, RollbackSafe=False, and a database ahead.
	w = newWorld(t, "rollback-refused", "2026-12-02T03:21:00Z")
	goldenState(t, "rollback-refused").build(w)
	out := colored(t, w)
	for _, want := range []string{"\x1b[31mRollbackRefused\x1b[0m", "\x1b[31munsafe (RollbackUnsafe)\x1b[0m"} {
		if !strings.Contains(out, want) {
			t.Errorf("rollback-refused lacks %q:\n%s", want, out)
		}
	}
	w = newWorld(t, "contract-pending", "2026-12-02T03:10:00Z")
	conds := w.u.Object["status"].(map[string]any)["conditions"].([]any)
	for _, c := range conds {
		if c := c.(map[string]any); c["type"] == "Stalled" {
			c["status"], c["reason"] = "True", "DatabaseAhead"
			c["message"] = "the database reports schema 4; revision 4c59v6bw28 runs on [2, 3] and serves us-east, eu-west, ap-south: nothing scales up on it"
		}
	}
	if err := unstructuredSet(w, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if err := unstructuredSet(w, "4", "status", "schema", "reportedVersion"); err != nil {
		t.Fatal(err)
	}
	out = colored(t, w)
	for _, want := range []string{"\x1b[31mDatabaseAhead\x1b[0m: the database reports schema 4", "the database reports schema \x1b[31m4\x1b[0m"} {
		if !strings.Contains(out, want) {
			t.Errorf("database ahead lacks %q:\n%s", want, out)
		}
	}
}

// unstructuredSet sets a field of w's RoutingService, in both its forms.
func unstructuredSet(w *world, value any, path ...string) error {
	if err := unstructured.SetNestedField(w.u.Object, value, path...); err != nil {
		return err
	}
	r, err := toTyped(w.u)
	if err != nil {
		return err
	}
	w.r = r
	return nil
}

// colored is get's output for w on a terminal, in colour.
func colored(t *testing.T, w *world) string {
	t.Helper()
	var out bytes.Buffer
	streams := genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: &out, ErrOut: &out}
	a := newApp(genericclioptions.NewConfigFlags(false), streams)
	a.now = func() time.Time { return w.now }
	a.connect = func() (*clients, error) { return w.clients(), nil }
	a.getenv = func(string) string { return "" }
	a.tty = func(io.Writer) bool { return true }
	run([]string{"get", "rs-a", "-n", w.r.Namespace}, streams, a)
	return out.String()
}

// docs/kubectl-schemagate.md shows the header of the contract-pending view as the golden has it.
func TestDocsShowTheLifecycleHeader(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubectl-schemagate.md"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "contract-pending.golden"))
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitAfter(string(golden), "\n")[:12], "")
	if !strings.Contains(string(doc), head) {
		t.Fatalf("docs/kubectl-schemagate.md does not show the first 12 lines of testdata/contract-pending.golden:\n%s", head)
	}
}

// A shard in another cluster: the cluster's state in green while Reachable and in red otherwise,
// and -o json carries it with its last contact; a cluster the status does not report yet (or
// reports under another name, before the controller saw a move) is Unknown.
func TestGetClusters(t *testing.T) {
	w := newWorld(t, "progressing", "2026-11-30T06:52:00Z")
	goldenState(t, "clusters").build(w)
	out := colored(t, w)
	for _, want := range []string{"\x1b[32mReachable\x1b[0m", "\x1b[31mUnreachable\x1b[0m"} {
		if !strings.Contains(out, want) {
			t.Errorf("coloured output lacks %q:\n%s", want, out)
		}
	}
	res := runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-o", "json")
	var v View
	if err := json.Unmarshal([]byte(res.out), &v); err != nil {
		t.Fatalf("%v\n%s", err, res.out)
	}
	if v.Shards[0].Cluster != nil {
		t.Errorf("us-east runs here, not in %+v", v.Shards[0].Cluster)
	}
	eu, ap := v.Shards[1].Cluster, v.Shards[2].Cluster
	if eu == nil || eu.Name != "eu-1" || eu.Namespace != "story-4nqss" || eu.State != "Reachable" || eu.LastContactAge != "2s" || eu.UnreachableSince != nil {
		t.Errorf("eu-west's cluster %+v", eu)
	}
	if ap == nil || ap.Name != "ap-1" || ap.Namespace != "edge-ap" || ap.State != "Unreachable" || ap.LastContactAge != "70s" || ap.UnreachableFor != "60s" ||
		ap.LastContact == nil || !ap.LastContact.Equal(mustTime("2026-11-30T06:50:50Z")) || !strings.Contains(ap.Message, "i/o timeout") {
		t.Errorf("ap-south's cluster %+v", ap)
	}

	ss := w.u.Object["status"].(map[string]any)["shards"].([]any)
	delete(ss[1].(map[string]any), "cluster")
	ss[2].(map[string]any)["cluster"].(map[string]any)["name"] = "ap-0"
	if err := unstructuredSet(w, ss, "status", "shards"); err != nil {
		t.Fatal(err)
	}
	res = runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "--no-color")
	for _, want := range []string{
		"│  └─ Cluster/eu-1                          Unknown            no contact yet: the status does not report this cluster yet",
		"   └─ Cluster/ap-1                          Unknown            namespace edge-ap; no contact yet: the status does not report this cluster yet",
	} {
		if !strings.Contains(res.out, want) {
			t.Errorf("output lacks %q:\n%s", want, res.out)
		}
	}
}

// docs/kubectl-schemagate.md shows the shards in other clusters as testdata/clusters.golden has them.
func TestDocsShowTheClusters(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubectl-schemagate.md"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "clusters.golden"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(golden), "\n"), "\n")
	tail := strings.Join(lines[len(lines)-4:], "") + "\n"
	if !strings.Contains(string(doc), "```\n"+tail+"```") {
		t.Fatalf("docs/kubectl-schemagate.md does not show the last 4 lines of testdata/clusters.golden:\n%s", tail)
	}
}

// An autoscaled shard shows the size its scaler set and who set it, and why a promotion holds a
// scale-down, in the tree and in -o json.
func TestGetAutoscaledShard(t *testing.T) {
	w := newWorld(t, "progressing", "2026-11-30T06:52:00Z")
	ss := w.u.Object["status"].(map[string]any)["shards"].([]any)
	us := ss[0].(map[string]any)
	us["replicas"] = int64(7)
	us["scaling"] = map[string]any{"routingShard": "rs-a-us-east", "desiredReplicas": int64(7), "scaledBy": "kube-controller-manager"}
	if err := unstructuredSet(w, ss, "status", "shards"); err != nil {
		t.Fatal(err)
	}
	res := runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "--no-color")
	if want := "7 replicas: "; !strings.Contains(res.out, want) {
		t.Errorf("output lacks %q:\n%s", want, res.out)
	}
	if want := "autoscaled (RoutingShard rs-a-us-east, set by kube-controller-manager)"; !strings.Contains(res.out, want) {
		t.Errorf("output lacks %q:\n%s", want, res.out)
	}
	us["scaling"].(map[string]any)["desiredReplicas"] = int64(4)
	us["scaling"].(map[string]any)["held"] = "the scaler asks for 4 pods; the shard keeps the 7 its promotion started with until it has baked"
	if err := unstructuredSet(w, ss, "status", "shards"); err != nil {
		t.Fatal(err)
	}
	res = runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-o", "json")
	var v View
	if err := json.Unmarshal([]byte(res.out), &v); err != nil {
		t.Fatalf("%v\n%s", err, res.out)
	}
	if sc := v.Shards[0].Scaling; v.Shards[0].Replicas != 7 || sc == nil || sc.Desired != 4 || sc.ScaledBy != "kube-controller-manager" || !strings.Contains(sc.Held, "until it has baked") {
		t.Errorf("us-east: replicas %d, scaling %+v", v.Shards[0].Replicas, v.Shards[0].Scaling)
	}
	if v.Shards[1].Scaling != nil {
		t.Errorf("eu-west is not autoscaled: %+v", v.Shards[1].Scaling)
	}
	res = runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "--no-color")
	if want := "; 4 asked, held: the scaler asks for 4 pods"; !strings.Contains(res.out, want) {
		t.Errorf("output lacks %q:\n%s", want, res.out)
	}
}
