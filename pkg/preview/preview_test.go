package preview

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/validate"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// sample is config/samples' RoutingService with the CRD's defaults, as the API server stores it.
func sample(t *testing.T) *routingv1alpha1.RoutingService {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "routing_v1alpha1_routingservice.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := validate.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if errs, err := validate.Object(t.Context(), obj); err != nil || len(errs) > 0 {
		t.Fatal(errs, err)
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	r := &routingv1alpha1.RoutingService{}
	if err := yaml.UnmarshalStrict(b, r); err != nil {
		t.Fatal(err)
	}
	r.Namespace = "edge"
	return r
}

// live is the sample as it runs: schema 1 confirmed.
func live(t *testing.T) *routingv1alpha1.RoutingService {
	r := sample(t)
	r.Status.Schema.ConfirmedVersion = "1"
	return r
}

// Each case is a change a person might merge; its preview is pinned in testdata/<name>.golden.
func TestGolden(t *testing.T) {
	cases := map[string]struct {
		live bool
		edit func(*routingv1alpha1.RoutingService)
		// rollout is whether the change starts a rollout (plan --exit-code 2).
		rollout bool
	}{
		"new":       {false, func(*routingv1alpha1.RoutingService) {}, true},
		"unchanged": {true, func(*routingv1alpha1.RoutingService) {}, false},
		"image": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
		}, true},
		"schema-bump": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
			r.Spec.Schema.Version = "2"
		}, true},
		"scale-and-strategy": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Shards[1].Replicas = 5
			r.Spec.Strategy.BakeSeconds = ptr.To(int32(120))
		}, false},
		"reorder": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Shards[0], r.Spec.Shards[1] = r.Spec.Shards[1], r.Spec.Shards[0]
		}, true},
		"risky": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Schema.Version = "0.9"
			r.Spec.Shards = r.Spec.Shards[:2]
			r.Spec.Shards[1].NodeSelector = map[string]string{"topology.kubernetes.io/region": "eu-central-1"}
			r.Spec.Strategy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			r.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
			r.Spec.Strategy.Checks = nil
		}, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			next := sample(t)
			c.edit(next)
			var l *routingv1alpha1.RoutingService
			if c.live {
				l = live(t)
			}
			p := Compute(l, next)
			if p.Rollout != c.rollout {
				t.Fatalf("rollout %v, want %v", p.Rollout, c.rollout)
			}
			var out bytes.Buffer
			if err := p.Write(&out); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("preview differs from %s (go test ./pkg/preview -update rewrites it):\n%s", golden, out.String())
			}
		})
	}
}

// FuzzCompute: any pair of manifests that decode as RoutingServices previews without a panic.
func FuzzCompute(f *testing.F) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "routing_v1alpha1_routingservice.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	sampleJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sampleJSON, sampleJSON)
	f.Add(sampleJSON, []byte(`{"spec":{"shards":[{"name":"a","replicas":-3}],"strategy":{"maxSurge":"300%","checks":[{"name":"x","count":-1,"intervalSeconds":0}]}},"status":{"schema":{"confirmedVersion":"x"}}}`))
	f.Fuzz(func(t *testing.T, liveDoc, nextDoc []byte) {
		var l, n routingv1alpha1.RoutingService
		// JSON, not YAML: the fuzzer would spend its time expanding YAML aliases.
		if json.Unmarshal(liveDoc, &l) != nil || json.Unmarshal(nextDoc, &n) != nil {
			return
		}
		p := Compute(&l, &n)
		if err := p.Write(&bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		Compute(nil, &n)
	})
}

// docs/kubectl-schemagate.md shows the schema-bump preview exactly as the golden file has it.
func TestDocsShowTheGolden(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubectl-schemagate.md"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "schema-bump.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, golden) {
		t.Fatal("docs/kubectl-schemagate.md does not show testdata/schema-bump.golden as it is")
	}
}
