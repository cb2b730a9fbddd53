package preview

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/validate"
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
		// liveEdit, when set, changes the live object (its spec and status).
		liveEdit func(*routingv1alpha1.RoutingService)
	}{
		"new":       {false, func(*routingv1alpha1.RoutingService) {}, true, nil},
		"unchanged": {true, func(*routingv1alpha1.RoutingService) {}, false, nil},
		"image": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
		}, true, nil},
		"schema-bump": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
			r.Spec.Schema.Version = "2"
		}, true, nil},
		"scale-and-strategy": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Shards[1].Replicas = 5
			r.Spec.Strategy.BakeSeconds = ptr.To(int32(120))
		}, false, nil},
		"reorder": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Shards[0], r.Spec.Shards[1] = r.Spec.Shards[1], r.Spec.Shards[0]
		}, true, nil},
		"risky": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Schema.Version = "0.9"
			r.Spec.Shards = r.Spec.Shards[:2]
			r.Spec.Shards[1].NodeSelector = map[string]string{"topology.kubernetes.io/region": "eu-central-1"}
			r.Spec.Strategy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
			r.Spec.Strategy.FailurePolicy = routingv1alpha1.FailurePolicyHalt
			r.Spec.Strategy.Checks = nil
		}, true, nil},
		// The manifest goes back to the stable revision while v2 is part way: us-east serves v2,
		// eu-west has 1 pod of v2 beside its v1 pods, ap-south never started. Only those v2 pods
		// are replaced, without bake or checks.
		"revert-mid-rollout": {true, func(*routingv1alpha1.RoutingService) {}, true, func(l *routingv1alpha1.RoutingService) {
			servingV2(t, l, map[string]int32{"us-east": 3, "eu-west": 1, "ap-south": 0})
		}},
		// The same after a failed v2 was rolled back in us-east: every shard serves v1 again.
		"revert-after-rollback": {true, func(*routingv1alpha1.RoutingService) {}, false, func(l *routingv1alpha1.RoutingService) {
			servingV2(t, l, map[string]int32{"us-east": 0, "eu-west": 0, "ap-south": 0})
		}},
		// A new image with more replicas in one shard, compared with a live object someone scaled
		// by hand in another: both replica changes are listed beside the rollout.
		"image-and-replicas": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
			r.Spec.Shards[0].Replicas = 4
		}, true, func(l *routingv1alpha1.RoutingService) { l.Spec.Shards[2].Replicas = 5 }},
		"job-success-evidence": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
		}, false, nil},
		// A new image with the pod-health gate turned off, and a check whose 30 s range holds
		// fewer than two samples of a 30 s scrape.
		"pod-health-off": {true, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
			r.Spec.Strategy.PodHealth = &routingv1alpha1.PodHealth{Mode: routingv1alpha1.PodHealthOff}
			r.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "ratio", Prometheus: &routingv1alpha1.PrometheusCheck{
				Address: "http://127.0.0.1:9090", Query: `sum(rate(edge_router_requests_total{code="404"}[30s]))`, SuccessCondition: "result < 1",
				ScrapeIntervalSeconds: ptr.To(int32(30))}}}
		}, true, nil},
		// eu-west runs in cluster eu-1 and ap-south in ap-1: a new image re-rolls every shard, so the
		// apply touches all three clusters.
		"clusters-image": {true, func(r *routingv1alpha1.RoutingService) {
			inClusters(r)
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
		}, true, inClusters},
		// Only eu-west is scaled: only eu-1 is touched.
		"clusters-scale": {true, func(r *routingv1alpha1.RoutingService) {
			inClusters(r)
			r.Spec.Shards[1].Replicas = 5
		}, false, inClusters},
		// A new image while the live status reports ap-1 unreachable: the rollout will hold at
		// ap-south; eu-1 answers and is not flagged.
		"clusters-unreachable": {true, func(r *routingv1alpha1.RoutingService) {
			inClusters(r)
			r.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
		}, true, func(l *routingv1alpha1.RoutingService) {
			inClusters(l)
			since := metav1.NewTime(time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC))
			l.Status.Shards = []routingv1alpha1.ShardStatus{
				{Name: "eu-west", Cluster: &routingv1alpha1.ShardClusterStatus{Name: "eu-1", State: routingv1alpha1.ClusterReachable}},
				{Name: "ap-south", Cluster: &routingv1alpha1.ShardClusterStatus{Name: "ap-1", State: routingv1alpha1.ClusterCredentialsRefused,
					Message: "Secret edge/ap-1-kubeconfig: 401 Unauthorized", UnreachableSince: &since}},
			}
		}},
		// ap-south moves from this cluster to ap-1 (the cluster is not part of the revision), and
		// eu-west is removed (which is a new revision: the others re-roll).
		"clusters-move": {true, func(r *routingv1alpha1.RoutingService) {
			inClusters(r)
			r.Spec.Shards = append(r.Spec.Shards[:1], r.Spec.Shards[2])
		}, true, func(l *routingv1alpha1.RoutingService) {
			inClusters(l)
			l.Spec.Shards[2].Cluster = nil
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			next := sample(t)
			c.edit(next)
			var l *routingv1alpha1.RoutingService
			if c.live {
				l = live(t)
				if c.liveEdit != nil {
					c.liveEdit(l)
				}
			}
			// As plan computes it where the manager's decision needs nothing more than these
			// objects: a new RoutingService (the manifest alone), and shards in other clusters (no
			// decision, and the line that says why). The other live objects here have no
			// ReplicaSets, Jobs or pods to decide on (TestDecision has those).
			p := Compute(l, next)
			if !c.live || strings.HasPrefix(name, "clusters-") {
				p = ComputeDecided(l, next, Read{}, decideAt)
			}
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

// inClusters puts r's eu-west in cluster eu-1 and ap-south in cluster ap-1.
func inClusters(r *routingv1alpha1.RoutingService) {
	r.Spec.Shards[1].Cluster = &routingv1alpha1.ShardCluster{Name: "eu-1"}
	r.Spec.Shards[2].Cluster = &routingv1alpha1.ShardCluster{Name: "ap-1"}
}

// servingV2 makes l a live object whose spec is the sample with image v2 (status.updateRevision)
// after v1 (status.stableRevision), with v2Pods[shard] pods of v2 in each shard: a shard serves v2
// when v2 has most of its pods.
func servingV2(t *testing.T, l *routingv1alpha1.RoutingService, v2Pods map[string]int32) {
	t.Helper()
	l.Status.StableRevision = rollout.Revision(&l.Spec)
	l.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
	l.Status.UpdateRevision = rollout.Revision(&l.Spec)
	for _, sh := range l.Spec.Shards {
		n, ok := v2Pods[sh.Name]
		if !ok {
			t.Fatalf("no pod count for shard %s", sh.Name)
		}
		rev := l.Status.StableRevision
		if 2*n > sh.Replicas {
			rev = l.Status.UpdateRevision
		}
		l.Status.Shards = append(l.Status.Shards, routingv1alpha1.ShardStatus{Name: sh.Name, Revision: rev,
			Replicas: sh.Replicas, Updated: n, Ready: sh.Replicas, Available: sh.Replicas})
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
	f.Add([]byte(`{"status":{"stableRevision":"a","updateRevision":"b","shards":[{"name":"a","revision":"a","updatedReplicas":-1}]}}`),
		[]byte(`{"spec":{"strategy":{"checks":[{"name":"p","prometheus":{"successCondition":"result < '","failureCondition":"[result].map(x, x > 1)"}}]}}}`))
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
		// The manager's planner on them, as plan asks it.
		if err := ComputeDecided(&l, &n, Read{}, decideAt).Write(&bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		ComputeDecided(nil, &n, Read{}, decideAt)
		// The CEL conditions are untrusted text too.
		for _, e := range ConditionErrors(&n.Spec) {
			if e.Error() == "" {
				t.Fatal("an empty error")
			}
		}
	})
}

// ConditionErrors compiles conditions as the manager's measurements do: over the double result,
// yielding a bool.
func TestConditionErrors(t *testing.T) {
	cases := []struct {
		success, failure string
		want             string // "" for no error
	}{
		{"result < 0.01", "", ""},
		{"result < 0.01", "result > 0.05", ""},
		{"result <= 1.0 && result >= 0.0", "", ""},
		{"result <", "", "successCondition: Invalid value: \"result <\": does not compile"},
		{"result < 1", "", "found no matching overload"}, // CEL compares no double with an int
		{"result * 2.0", "", "yields double, not bool"},
		{"result < 0.01", "ratio > 1.0", "failureCondition: Invalid value: \"ratio > 1.0\": does not compile"},
		{"", "", "successCondition"},
		{strings.Repeat("result < 1.0 || ", 40) + "false", "", "longer than 512 bytes"},
	}
	for _, c := range cases {
		spec := &routingv1alpha1.RoutingServiceSpec{}
		spec.Strategy.Checks = []routingv1alpha1.ShardCheck{{Name: "http", HTTP: &routingv1alpha1.HTTPCheck{}},
			{Name: "p", Prometheus: &routingv1alpha1.PrometheusCheck{SuccessCondition: c.success, FailureCondition: c.failure}}}
		errs := ConditionErrors(spec)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%q/%q: %v", c.success, c.failure, errs)
		case c.want != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) || !strings.HasPrefix(errs[0].Field, "spec.strategy.checks[1].prometheus.")):
			t.Errorf("%q/%q: %v, want one error on checks[1] naming %q", c.success, c.failure, errs, c.want)
		}
	}
}

// docs/kubectl-schemagate.md shows the schema-bump, expand-contract, clusters-scale and
// decision-incompatible previews exactly as the golden files have them.
func TestDocsShowTheGolden(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubectl-schemagate.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"schema-bump", "lifecycle-expand-contract", "clusters-scale", "decision-incompatible"} {
		golden, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, golden) {
			t.Errorf("docs/kubectl-schemagate.md does not show testdata/%s.golden as it is", name)
		}
	}
}

// A changed shard whose cluster the live status reports as not Reachable is flagged with what
// unreachablePolicy then does; an unchanged one, or one the status reports under another cluster
// name, is not.
func TestUnreachableClusterRisk(t *testing.T) {
	l := live(t)
	inClusters(l)
	l.Status.Shards = []routingv1alpha1.ShardStatus{{Name: "ap-south", Cluster: &routingv1alpha1.ShardClusterStatus{Name: "ap-1", State: routingv1alpha1.ClusterUnreachable}}}
	risk := func(next *routingv1alpha1.RoutingService) string {
		for _, r := range Compute(l, next).Risks {
			if r.Field == "spec.shards[ap-south].cluster" {
				return r.Message
			}
		}
		return ""
	}
	next := sample(t)
	inClusters(next)
	next.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
	next.Spec.Strategy.UnreachablePolicy = routingv1alpha1.UnreachableSkip
	if got := risk(next); !strings.HasPrefix(got, "cluster ap-1 is Unreachable: nothing is written there") || !strings.Contains(got, "the shards after ap-south go on") {
		t.Errorf("Skip: %q", got)
	}
	next = sample(t)
	inClusters(next)
	next.Spec.Shards[1].Replicas = 5 // ap-south unchanged
	if got := risk(next); got != "" {
		t.Errorf("unchanged shard flagged: %q", got)
	}
	next.Spec.Shards[2].Replicas = 5
	if got := risk(next); !strings.Contains(got, "unreachablePolicy Hold") {
		t.Errorf("scaled shard: %q", got)
	}
	l.Status.Shards[0].Cluster.Name = "ap-0"
	if got := risk(next); got != "" {
		t.Errorf("a status of another cluster flagged: %q", got)
	}
}

// The fix of a failed migration: v2 needs schema 2, its migration (attempt 1) failed, and no shard
// runs v2. The fix changes spec.schema.migration.template and nothing else, so the revision is
// the same; applying it runs attempt 2 and then rolls v2 into every shard (the manager's rule:
// a changed template starts the next attempt). The plan must say so, and --exit-code must see a
// rollout: it said "no rollout, no pod replaced" and "no migration runs for it".
func TestPlanOfAFixedFailedMigration(t *testing.T) {
	l := live(t)
	l.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
	l.Spec.Schema.Version = "2"
	rev := rollout.Revision(&l.Spec)
	l.Status.UpdateRevision = rev
	l.Status.StableRevision = "v1rev"
	l.Status.Schema.RequiredVersion = "2"
	l.Status.Schema.MigrationJob = "edge-router-schema-2-1"
	l.Status.Schema.Attempt = 1
	l.Status.Conditions = []metav1.Condition{{Type: routingv1alpha1.ConditionSchemaReady, Status: metav1.ConditionFalse,
		Reason: routingv1alpha1.ReasonMigrationFailed, Message: "migration Job edge-router-schema-2-1 (attempt 1) to schema 2 failed"}}
	for _, s := range l.Spec.Shards {
		l.Status.Shards = append(l.Status.Shards, routingv1alpha1.ShardStatus{Name: s.Name, Step: routingv1alpha1.ShardStepPending, StepRevision: rev, Revision: "v1rev"})
	}
	next := l.DeepCopy()
	next.Status = routingv1alpha1.RoutingServiceStatus{}
	next.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "registry.example/migrate:v2-fixed"
	p := Compute(l, next)
	if p.NextRevision != rev {
		t.Fatalf("the fix changed the revision: %s → %s", rev, p.NextRevision)
	}
	if !p.Rollout {
		t.Fatal("the plan says no rollout; applying the fix runs attempt 2 and rolls v2 into every shard")
	}
	for _, s := range p.Shards {
		if s.Action != "re-roll" || s.Replaced != s.Replicas {
			t.Fatalf("shard %s: %s replacing %d, want re-roll of every pod", s.Name, s.Action, s.Replaced)
		}
	}
	if !p.Migration.Runs {
		t.Fatal("the plan says no migration runs")
	}
	var out bytes.Buffer
	if err := p.Write(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.Contains(text, "no migration runs for it") || strings.Contains(text, "no rollout") || !strings.Contains(text, "attempt 2") || !strings.Contains(text, "its rollout goes on") {
		t.Fatalf("the plan reads:\n%s", text)
	}
}

// An autoscaled shard keeps the size its scaler set: a plan that leaves its spec.shards[].replicas
// alone, or changes only that starting size, scales nothing; a re-roll replaces the pods it runs,
// not the spec's number.
func TestPlanKeepsAnAutoscaledShardsSize(t *testing.T) {
	l := live(t)
	l.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MaxReplicas: ptr.To(int32(20))}
	l.Status.Shards = []routingv1alpha1.ShardStatus{{Name: l.Spec.Shards[0].Name, Replicas: 9,
		Scaling: &routingv1alpha1.ShardScalingStatus{RoutingShard: "edge-" + l.Spec.Shards[0].Name, DesiredReplicas: ptr.To(int32(9)), ScaledBy: "kube-controller-manager"}}}
	next := l.DeepCopy()
	next.Status = routingv1alpha1.RoutingServiceStatus{}
	next.Spec.Shards[0].Replicas = l.Spec.Shards[0].Replicas + 1 // the starting size only
	p := Compute(l, next)
	if sh := p.Shards[0]; sh.Action != "none" || sh.Replicas != 9 || sh.LiveReplicas != 9 {
		t.Errorf("starting size changed: %+v, want no action at 9 pods", sh)
	}
	next.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v9"
	p = Compute(l, next)
	if sh := p.Shards[0]; sh.Action != "re-roll" || sh.Replicas != 9 || sh.Replaced != 9 {
		t.Errorf("re-roll: %+v, want 9 pods replaced by 9", sh)
	}
	if sh := p.Shards[1]; sh.Replicas != l.Spec.Shards[1].Replicas {
		t.Errorf("a shard without autoscaling: %+v", sh)
	}
}
