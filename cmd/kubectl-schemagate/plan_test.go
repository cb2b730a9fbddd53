package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
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
