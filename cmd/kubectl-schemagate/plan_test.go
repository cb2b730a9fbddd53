package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
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

// plan against the cluster reads the ReplicaSets' schema ranges: with v2 (runs on [2, 3]) serving
// every shard and its contract to 3 pending, a v3 that needs schema 4 (runs on [4, 4]) is flagged
// before merge: its migration would be refused, naming v2, its range and its shards, and it waits
// for the pending contract. A ReplicaSet's record wins over the status (here the status says v2
// runs on [2, 9], and is ignored).
func TestPlanReadsTheReplicaSetRanges(t *testing.T) {
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
	revs := w.u.Object["status"].(map[string]any)["schema"].(map[string]any)["revisions"].([]any)
	revs[0].(map[string]any)["max"] = "9"

	manifest := w.u.DeepCopy()
	delete(manifest.Object, "status")
	manifest.SetResourceVersion("")
	manifest.SetUID("")
	manifest.SetCreationTimestamp(metav1.Time{})
	manifest.SetGeneration(0)
	spec := manifest.Object["spec"].(map[string]any)
	spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "app:v3"
	schema := spec["schema"].(map[string]any)
	schema["version"] = "4"
	schema["compatibility"] = map[string]any{"min": "4", "max": "4"}
	delete(schema, "contract")
	b, err := yaml.Marshal(manifest.Object)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rsvc.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res := runWith(w.clients(), w.now, "plan", "-f", file, "--exit-code")
	if res.code != planRollout {
		t.Fatalf("exit %d, want %d\n%s\n%s", res.code, planRollout, res.out, res.err)
	}
	for _, want := range []string{
		"compared with the live object",
		"4c59v6bw28  [2, 3]  serves us-east, eu-west, ap-south; the stable revision, where a rollback returns (range from replicasets)",
		"! spec.schema.version: the migration to schema 4 is refused before its Job exists (IncompatibleRevision): revision 4c59v6bw28 runs on [2, 3] and serves us-east, eu-west, ap-south",
		"! spec.schema.version: the live contract to 3 has not run: the expand to 4 waits for it (WaitingForContract)",
	} {
		if !strings.Contains(res.out, want) {
			t.Errorf("plan lacks %q:\n%s", want, res.out)
		}
	}
	// -o json carries the lifecycle as data.
	res = runWith(w.clients(), w.now, "plan", "-f", file, "-o", "json")
	var p struct {
		Lifecycle struct {
			Database  string `json:"database"`
			Revisions []struct {
				Revision, Min, Max, Source string
			} `json:"revisions"`
		} `json:"lifecycle"`
	}
	if err := json.Unmarshal([]byte(res.out), &p); err != nil {
		t.Fatalf("%v\n%s", err, res.out)
	}
	if p.Lifecycle.Database != "2" || len(p.Lifecycle.Revisions) == 0 || p.Lifecycle.Revisions[0].Max != "3" || p.Lifecycle.Revisions[0].Source != "replicasets" {
		t.Errorf("-o json lifecycle %+v", p.Lifecycle)
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
