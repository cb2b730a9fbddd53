package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "routing_v1alpha1_routingservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// The sample is valid and gets the CRD's defaults; each bad edit gets the message and field path
// the API server's CEL rules and schema give (the envtest suite checks the same edits against a
// real kube-apiserver: test/integration).
func TestObject(t *testing.T) {
	ctx := context.Background()
	obj := sample(t)
	errs, err := Object(ctx, obj)
	if err != nil || len(errs) != 0 {
		t.Fatalf("sample: %v %v", errs, err)
	}
	strategy := obj["spec"].(map[string]any)["strategy"].(map[string]any)
	if strategy["revisionHistoryLimit"] != int64(2) {
		t.Fatalf("defaults not applied: strategy %v", strategy)
	}
	cases := map[string]struct {
		edit func(spec map[string]any)
		want string
	}{
		"empty image": {func(s map[string]any) {
			s["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{map[string]any{"name": "router", "image": ""}}
		}, "spec.template.spec.containers"},
		"bad version":      {func(s map[string]any) { s["schema"].(map[string]any)["version"] = "v2" }, "spec.schema.version"},
		"both zero":        {func(s map[string]any) { s["strategy"].(map[string]any)["maxSurge"] = 0 }, "spec.strategy.maxSurge and spec.strategy.maxUnavailable must not both be 0"},
		"duplicate shards": {func(s map[string]any) { s["shards"] = append(s["shards"].([]any), s["shards"].([]any)[0]) }, "Duplicate value"},
		"check without provider": {func(s map[string]any) {
			s["strategy"].(map[string]any)["checks"] = []any{map[string]any{"name": "none"}}
		}, "exactly one of job, http or prometheus"},
		"negative replicas": {func(s map[string]any) { s["shards"].([]any)[0].(map[string]any)["replicas"] = -1 }, "spec.shards[0].replicas"},
		"unknown evidence":  {func(s map[string]any) { s["schema"].(map[string]any)["evidence"] = "Trust" }, "spec.schema.evidence"},
		// Typo'd field names, which the API server refuses under strict field validation.
		"typo in a shard": {func(s map[string]any) { s["shards"].([]any)[1].(map[string]any)["replica"] = 3 }, "spec.shards[1].replica: Forbidden: unknown field"},
		"typo in spec":    {func(s map[string]any) { s["stratgy"] = map[string]any{"bakeSeconds": 5} }, "spec.stratgy: Forbidden: unknown field"},
		"typo in the pod template": {func(s map[string]any) {
			s["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["imagePullPolice"] = "Always"
		}, "spec.template.spec.containers[0].imagePullPolice: Forbidden: unknown field"},
		"typo in the template's metadata": {func(s map[string]any) {
			s["template"].(map[string]any)["metadata"].(map[string]any)["lables"] = map[string]any{"a": "b"}
		}, "spec.template.metadata.lables: Forbidden: unknown field"},
	}
	// metadata and the top level too.
	for path, edit := range map[string]func(obj map[string]any){
		"metadata.lables": func(obj map[string]any) { obj["metadata"].(map[string]any)["lables"] = map[string]any{"a": "b"} },
		"specs":           func(obj map[string]any) { obj["specs"] = map[string]any{} },
	} {
		obj := sample(t)
		edit(obj)
		errs, err := Object(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if want := path + ": Forbidden: unknown field"; len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), want) {
			t.Errorf("errors %v, want one naming %q", errs, want)
		}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			obj := sample(t)
			c.edit(obj["spec"].(map[string]any))
			errs, err := Object(ctx, obj)
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), c.want) {
				t.Fatalf("errors %v, want one naming %q", errs, c.want)
			}
			t.Logf("%s: %v", name, errs.ToAggregate())
		})
	}
}
