package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakekube "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

var samplePath = filepath.Join("..", "..", "config", "samples", "routing_v1alpha1_routingservice.yaml")

func planOffline(t *testing.T, o planOptions, stdin, name string) (string, error) {
	t.Helper()
	streams, in, out, _ := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	o.offline = true
	err := o.run(context.Background(), genericclioptions.NewConfigFlags(false), streams, name)
	return out.String(), err
}

// plan -f on the sample, offline: a new RoutingService, every shard created, exit 2 with
// --exit-code; -o json is data.
func TestPlanOffline(t *testing.T) {
	out, err := planOffline(t, planOptions{file: samplePath, exitCode: true}, "", "")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != planRollout {
		t.Fatalf("err %v, want exit %d", err, planRollout)
	}
	for _, want := range []string{"RoutingService default/edge-router, not in the cluster", "1.  us-east   create: 3 pods", "Migration: a Job brings the database to schema 1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = planOffline(t, planOptions{file: samplePath, output: "json"}, "", "")
	if err != nil || !strings.Contains(out, `"nextRevision"`) || !strings.Contains(out, `"action": "create"`) {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
}

// Bad input: a file that is not a RoutingService, several without a name, an invalid one (the
// API server's messages, offline), an unknown output.
func TestPlanBadInput(t *testing.T) {
	sample, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
	second := strings.Replace(string(sample), "name: edge-router", "name: edge-router-2", 1)
	invalid := strings.Replace(string(sample), `version: "1"`, `version: "v1"`, 1)
	cases := []struct {
		name, stdin, pick, output, want string
	}{
		{"not a RoutingService", deployment, "", "", "holds no RoutingService (routing.schemagate.io/v1alpha1/RoutingService); it holds: apps/v1 Deployment"},
		{"several", string(sample) + "---\n" + second, "", "", "holds 2 RoutingServices (edge-router, edge-router-2): name one"},
		{"no such name", string(sample), "other", "", `holds no RoutingService named "other"`},
		{"invalid", invalid, "", "", `spec.schema.version: Invalid value: "v1": spec.schema.version in body should match`},
		{"empty", "", "", "", "- is empty"},
		{"output", string(sample), "", "wide", "--output must be json or yaml"},
		{"newer version", strings.Replace(string(sample), "v1alpha1", "v1beta1", 1), "", "", "this plugin reads routing.schemagate.io/v1alpha1: upgrade the plugin"},
		{"typo'd field", strings.Replace(string(sample), "    replicas: 3\n", "    replica: 3\n", 1), "", "",
			"spec.shards[0].replica: Forbidden: unknown field"},
		{"condition that does not compile", strings.Replace(string(sample), "successCondition: result < 0.01", "successCondition: result <", 1), "", "",
			"spec.strategy.checks[0].prometheus.successCondition: Invalid value: \"result <\": does not compile"},
		{"condition that is not a bool", strings.Replace(string(sample), "successCondition: result < 0.01", "successCondition: result * 2.0", 1), "", "",
			"yields double, not bool"},
		{"failure condition over an unknown variable", strings.Replace(string(sample), "successCondition: result < 0.01", "successCondition: result < 0.01\n        failureCondition: ratio > 0.05", 1), "", "",
			"spec.strategy.checks[0].prometheus.failureCondition"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := planOffline(t, planOptions{file: "-", output: c.output}, c.stdin, c.pick)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	// Several, with a name: the one named.
	out, err := planOffline(t, planOptions{file: "-"}, string(sample)+"---\n"+second, "edge-router-2")
	if err != nil || !strings.Contains(out, "default/edge-router-2") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// planAt runs `kubectl schemagate plan ARGS` (args without "plan") against cl, the manager's first decision computed
// at now, and returns what it printed and its exit code (as run maps them).
func planAt(cl *clients, now time.Time, args ...string) result {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: &out, ErrOut: &errOut}
	o := &planOptions{connect: func() (*clients, error) { return cl, nil }, now: func() time.Time { return now }}
	cmd := newPlanCommandWith(o, genericclioptions.NewConfigFlags(false), streams)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	code := 0
	var ee *exitError
	switch err := cmd.Execute(); {
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintln(&errOut, "error:", ee.err)
		}
		code = ee.code
	case err != nil:
		fmt.Fprintln(&errOut, "error:", err)
		code = 1
	}
	return result{out: out.String(), err: errOut.String(), code: code}
}

// contractPendingWorld is the contract-pending state (v2, on [2, 3], serves every shard; v1 on
// [1, 2] scaled to 0; the contract to 3 waits for its window) as plan reads it: each revision's
// ReplicaSets record its range, and the migration Job to 2 left its pod's schema report. It
// returns the world and a manifest file of the live object with edit applied to its spec.
func contractPendingWorld(t *testing.T, edit func(spec, schema map[string]any)) (*world, string) {
	t.Helper()
	w := newWorld(t, "contract-pending", "2026-12-02T03:10:00Z")
	goldenState(t, "contract-pending").build(w)
	for i := range w.objs.ReplicaSets {
		rs := &w.objs.ReplicaSets[i]
		lo, hi := "2", "3"
		if rs.Labels["schemagate.io/revision"] == "cc447w65w7" {
			lo, hi = "1", "2"
		}
		rs.Annotations["schemagate.io/schema-min"], rs.Annotations["schemagate.io/schema-max"] = lo, hi
	}
	for i := range w.objs.Pods {
		if p := &w.objs.Pods[i]; p.Labels["app.kubernetes.io/component"] == "migration" && p.Status.Phase == corev1.PodSucceeded {
			p.Status.ContainerStatuses[0].State.Terminated.Message = `{"schemagate":"schema-report/v1","version":"2","dirty":false,"tool":"golang-migrate","time":"2026-12-02T02:52:10Z"}`
		}
	}
	return w, manifestOf(t, w, edit)
}

// manifestOf writes a manifest file of w's live object with edit applied to its spec.
func manifestOf(t *testing.T, w *world, edit func(spec, schema map[string]any)) string {
	t.Helper()
	manifest := w.u.DeepCopy()
	delete(manifest.Object, "status")
	manifest.SetResourceVersion("")
	manifest.SetUID("")
	manifest.SetCreationTimestamp(metav1.Time{})
	manifest.SetGeneration(0)
	spec := manifest.Object["spec"].(map[string]any)
	edit(spec, spec["schema"].(map[string]any))
	b, err := yaml.Marshal(manifest.Object)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rsvc.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// plan against the cluster reads the ReplicaSets' schema ranges, and the manager's own planner
// decides the gate on what plan read: with v2 (runs on [2, 3]) serving every shard, a v3 that
// needs schema 4 (runs on [4, 4]) is refused before merge (IncompatibleRevision, in the planner's
// words, naming v2, its range and its shards), and plan exits 3 with or without --exit-code. A
// ReplicaSet's record wins over the status (here the status says v2 runs on [2, 9], and is
// ignored by both). plan's own model also said the expand waits for the live contract to 3
// (WaitingForContract): the manifest drops that contract, whose Job never started, and the
// planner does not wait for it, so the plan no longer says so.
func TestPlanReadsTheReplicaSetRanges(t *testing.T) {
	w, file := contractPendingWorld(t, func(spec, schema map[string]any) {
		spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "app:v3"
		schema["version"] = "4"
		schema["compatibility"] = map[string]any{"min": "4", "max": "4"}
		delete(schema, "contract")
	})
	revs := w.u.Object["status"].(map[string]any)["schema"].(map[string]any)["revisions"].([]any)
	revs[0].(map[string]any)["max"] = "9"
	refused := "the migration to schema 4 is refused before its Job exists: revision 4c59v6bw28 (runs on [2, 3]) serves us-east, eu-west, ap-south; revision 247vvv29w7 (runs on [4, 4]) cannot run on the database's schema 2 either"
	for _, args := range [][]string{{"-f", file, "--exit-code"}, {"-f", file}} {
		res := planAt(w.clients(), w.now, args...)
		if res.code != planRefused {
			t.Fatalf("%v: exit %d, want %d\n%s\n%s", args, res.code, planRefused, res.out, res.err)
		}
		for _, want := range []string{
			"compared with the live object",
			"4c59v6bw28  [2, 3]  serves us-east, eu-west, ap-south; the stable revision, where a rollback returns (range from replicasets)",
			"Manager's first decision (its planner, on what plan read):\n  SchemaReady:  False IncompatibleRevision: " + refused,
			"  Stalled:      True IncompatibleRevision: " + refused,
			"  Migration:    starts no migration Job\n  Shards:       touches no shard yet\n",
			"! spec.schema.version: manager's decision (SchemaReady=False IncompatibleRevision): " + refused,
		} {
			if !strings.Contains(res.out, want) {
				t.Errorf("%v: plan lacks %q:\n%s", args, want, res.out)
			}
		}
		if strings.Contains(res.out, "WaitingForContract") || strings.Contains(res.out, "(IncompatibleRevision): revision") {
			t.Errorf("%v: plan's own model still decides the gate:\n%s", args, res.out)
		}
		if want := "error: the manager would refuse story-lc7mq/rs-a or stop on it: Stalled=True IncompatibleRevision: " + refused; !strings.Contains(res.err, want) {
			t.Errorf("%v: stderr lacks %q:\n%s", args, want, res.err)
		}
	}
	// -o json carries the lifecycle and the decision as data, with the same exit code.
	res := planAt(w.clients(), w.now, "-f", file, "-o", "json")
	var p struct {
		Lifecycle struct {
			Database  string `json:"database"`
			Revisions []struct {
				Revision, Min, Max, Source string
			} `json:"revisions"`
		} `json:"lifecycle"`
		Decision struct {
			SchemaReady     struct{ Status, Reason string } `json:"schemaReady"`
			Stalled         *struct{ Reason string }        `json:"stalled"`
			StartsMigration bool                            `json:"startsMigration"`
		} `json:"decision"`
		Refused string `json:"refused"`
	}
	if err := json.Unmarshal([]byte(res.out), &p); err != nil {
		t.Fatalf("%v\n%s", err, res.out)
	}
	if p.Lifecycle.Database != "2" || len(p.Lifecycle.Revisions) == 0 || p.Lifecycle.Revisions[0].Max != "3" || p.Lifecycle.Revisions[0].Source != "replicasets" {
		t.Errorf("-o json lifecycle %+v", p.Lifecycle)
	}
	if d := p.Decision; res.code != planRefused || d.SchemaReady.Reason != "IncompatibleRevision" || d.Stalled == nil || d.StartsMigration || p.Refused == "" {
		t.Errorf("-o json: exit %d, decision %+v, refused %q", res.code, d, p.Refused)
	}
}

// The manager's first decision in plan against the cluster, one case per verdict: a migration
// the planner starts (exit 2 with --exit-code: a rollout, nothing refused), and a list plan may
// not read (a note on stderr, no decision and the line that says why; plan's own reading of the
// ranges then decides the gate, and still refuses what it finds refused).
func TestPlanDecision(t *testing.T) {
	expand := func(spec, schema map[string]any) {
		spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "app:v3"
		schema["version"] = "3"
		schema["compatibility"] = map[string]any{"min": "3", "max": "4"}
		delete(schema, "contract")
	}
	breaking := func(spec, schema map[string]any) {
		expand(spec, schema)
		schema["version"] = "4"
		schema["compatibility"] = map[string]any{"min": "4", "max": "4"}
	}
	cases := []struct {
		name   string
		edit   func(spec, schema map[string]any)
		forbid string // a resource whose list the API server refuses
		code   int
		out    []string
		err    string
	}{
		{"v2 runs on 3: the migration starts", expand, "", planRollout,
			[]string{"  SchemaReady:  False Migrating: migration Job rs-a-schema-", "  Migration:    starts migration Job rs-a-schema-", "  Shards:       touches no shard yet"}, ""},
		{"jobs not readable", expand, "jobs", planRollout,
			[]string{"Manager's first decision: not computed: plan could not list its Jobs\n"},
			"note: cannot list the Jobs of story-lc7mq/rs-a (jobs is forbidden: User \"ci\" cannot list resource \"jobs\"); the manager's first decision is not computed\n"},
		{"controllerrevisions not readable, refused by plan's own model", breaking, "controllerrevisions", planRefused,
			[]string{"Manager's first decision: not computed: plan could not list its ControllerRevisions\n",
				"! spec.schema.version: the migration to schema 4 is refused before its Job exists (IncompatibleRevision): revision 4c59v6bw28 runs on [2, 3]"},
			"error: the manager would refuse story-lc7mq/rs-a or stop on it: IncompatibleRevision, by plan's own reading of the ranges"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, file := contractPendingWorld(t, c.edit)
			cl := w.clients()
			if c.forbid != "" {
				cl.kube.(*fakekube.Clientset).PrependReactor("list", c.forbid, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: c.forbid}, "", errors.New(`User "ci" cannot list resource "`+c.forbid+`"`))
				})
			}
			res := planAt(cl, w.now, "-f", file, "--exit-code")
			if res.code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", res.code, c.code, res.out, res.err)
			}
			for _, want := range c.out {
				if !strings.Contains(res.out, want) {
					t.Errorf("plan lacks %q:\n%s", want, res.out)
				}
			}
			if !strings.Contains(res.err, c.err) {
				t.Errorf("stderr lacks %q:\n%s", c.err, res.err)
			}
		})
	}
}

// plan names the clusters an apply touches when a shard names one: offline every shard is
// created, each in its cluster; -o json carries each shard's cluster.
func TestPlanClusters(t *testing.T) {
	sample, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(string(sample), "  - name: eu-west\n", "  - name: eu-west\n    cluster: {name: eu-1}\n", 1)
	if manifest == string(sample) {
		t.Fatal("the sample has no shard eu-west")
	}
	out, err := planOffline(t, planOptions{file: "-"}, manifest, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Clusters:  the apply touches this cluster (us-east, ap-south), eu-1 (eu-west)\n"; !strings.Contains(out, want) {
		t.Errorf("plan lacks %q:\n%s", want, out)
	}
	out, err = planOffline(t, planOptions{file: "-", output: "json"}, manifest, "")
	if err != nil || !strings.Contains(out, `"cluster": "eu-1"`) {
		t.Errorf("-o json: %v\n%s", err, out)
	}
	// Without a cluster, no Clusters line.
	if out, err := planOffline(t, planOptions{file: samplePath}, "", ""); err != nil || strings.Contains(out, "Clusters:") {
		t.Errorf("without clusters: %v\n%s", err, out)
	}
}
