package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// failingSpoke is a loopback reverse proxy that stands for a region's API server: it passes
// requests to the suite's API server with the admin's credentials, and while failing is set it
// answers every write to namespace ns with 500 Internal Server Error, as an API server whose
// etcd is overloaded, or whose admission webhook cannot be called, does.
type failingSpoke struct {
	URL     string
	failing atomic.Bool
	failed  atomic.Int32
	// only, when set, fails only the writes whose path contains it (a resource, such as
	// "/poddisruptionbudgets"), as a webhook registered for that resource alone does.
	only atomic.Value
}

func startFailingSpoke(t *testing.T, admin *rest.Config, ns string) *failingSpoke {
	t.Helper()
	f := &failingSpoke{}
	f.URL = startAdminProxy(t, admin, func(w http.ResponseWriter, r *http.Request) bool {
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		if !f.failing.Load() || !write || !strings.Contains(r.URL.Path, "/namespaces/"+ns+"/") {
			return false
		}
		if only, _ := f.only.Load().(string); only != "" && !strings.Contains(r.URL.Path, only) {
			return false
		}
		f.failed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Internal error occurred: failed calling webhook \"guard.example.com\": connection refused","reason":"InternalError","code":500}`)
		return true
	})
	return f
}

// kubeconfig is a kubeconfig for the proxy (plain http on loopback, which schemagate accepts for
// tests only, and a token the proxy replaces).
func (f *failingSpoke) kubeconfig() []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eu
  cluster:
    server: %s
users:
- name: eu
  user:
    token: proxy
contexts:
- name: eu
  context: {cluster: eu, user: eu}
current-context: eu
`, f.URL))
}

// steadyWithEUBehindAProxy is rs-a Ready with eu-west in a spoke reached through a failingSpoke
// (not failing yet), one database for both clusters.
func steadyWithEUBehindAProxy(t *testing.T) (ns, spokeNS string, proxy *failingSpoke) {
	t.Helper()
	ns, spokeNS = kit.NewNamespace(t), kit.NewNamespace(t)
	fake.setDatabase(spokeNS, "1", false)
	proxy = startFailingSpoke(t, cfg, spokeNS)
	createWithEUIn(t, ns, spokeNS, proxy.kubeconfig())
	kit.WaitReady(t, ns, 60*time.Second)
	return ns, spokeNS, proxy
}

// S-45: one region's error is that region's. eu-west runs in a spoke whose API server starts
// answering 500 to every write while us-east bakes v2. An abort then rolls us-east back in the
// hub, and the status says Aborted and names eu-west's cluster and the 500, though every write
// to the spoke fails (today the first failed write stopped the reconcile before the status write,
// so nothing said why and the hub's rollback waited on the spoke). When the spoke answers again,
// its records are written and the RoutingService settles.
func TestStoryOneRegionsServerErrorIsThatRegions(t *testing.T) {
	t.Parallel()
	ns, spokeNS, proxy := steadyWithEUBehindAProxy(t)

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	})
	story.Eventually(t, 60*time.Second, "us-east bakes v2", func() error {
		if ss := shardStatusOf(kit.Get(t, ns), "us-east"); ss == nil || ss.Step != routingv1alpha1.ShardStepBaking {
			return fmt.Errorf("us-east: %+v", ss)
		}
		return nil
	})
	proxy.failing.Store(true)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationAbort: "a1"}
	})
	story.Eventually(t, 60*time.Second, "us-east rolled back in the hub, and the status says why eu-west was not written", func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted)(); err != nil {
			return err
		}
		if err := kit.ServingIs(t, ns, "us-east=app:v1:3/3 ap-south=app:v1:3/3")(); err != nil {
			return err
		}
		r := kit.Get(t, ns)
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != routingv1alpha1.ReasonClusterUnreachable || !strings.Contains(c.Message, "failed a write") || !strings.Contains(c.Message, "webhook") {
			return fmt.Errorf("ClustersReachable = %+v", c)
		}
		return nil
	})
	if proxy.failed.Load() == 0 {
		t.Fatal("the spoke was never written while it failed: the story tested nothing")
	}
	if got := spokeServing(t, spokeNS); got != "app:v1:3/3" {
		t.Fatalf("eu-west in the spoke serves %q, want v1 untouched", got)
	}

	proxy.failing.Store(false)
	story.Eventually(t, 60*time.Second, "the spoke answers again: its records are written, its cluster Reachable", func() error {
		for _, rs := range spokeReplicaSets(t, spokeNS) {
			if got := rs.Annotations["schemagate.io/handled-abort"]; got != "a1" {
				return fmt.Errorf("spoke ReplicaSet %s records abort %q", rs.Name, got)
			}
		}
		r := kit.Get(t, ns)
		if c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ClustersReachable = %+v", c)
		}
		return nil
	})
}

// One region's error is that region's for its PodDisruptionBudget too: with eu-west's spoke
// answering 500 to every write of a budget (a webhook for budgets that cannot be called), a new
// spec.disruptionBudget.maxUnavailable reaches the hub's budgets, and the status says which
// region failed and why (the spoke's failure once failed the whole reconcile before its status
// write, so nothing said so). When the spoke answers again, its budget follows.
func TestStoryASpokesBudgetErrorIsThatRegions(t *testing.T) {
	t.Parallel()
	ns, spokeNS, proxy := steadyWithEUBehindAProxy(t)
	ctx := context.Background()
	budget := func(ns, shard string) string {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rollout.DisruptionBudgetName("rs-a", shard)}, pdb); err != nil {
			return err.Error()
		}
		if pdb.Spec.MaxUnavailable == nil {
			return "unset"
		}
		return pdb.Spec.MaxUnavailable.String()
	}
	before := budget(spokeNS, "eu-west")

	proxy.only.Store("/poddisruptionbudgets")
	proxy.failing.Store(true)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.DisruptionBudget.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})
	story.Eventually(t, 60*time.Second, "the hub's budgets follow, and the status says why eu-west's did not", func() error {
		if got := budget(ns, "us-east"); got != "2" {
			return fmt.Errorf("us-east's budget: maxUnavailable %s", got)
		}
		r := kit.Get(t, ns)
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "failed a write") || !strings.Contains(c.Message, "webhook") {
			return fmt.Errorf("ClustersReachable = %+v", c)
		}
		return nil
	})
	if proxy.failed.Load() == 0 {
		t.Fatal("the spoke was never written while it failed: the story tested nothing")
	}
	if got := budget(spokeNS, "eu-west"); got != before {
		t.Fatalf("eu-west's budget in the failing spoke: maxUnavailable %s, was %s", got, before)
	}

	proxy.failing.Store(false)
	story.Eventually(t, 60*time.Second, "the spoke answers again: its budget follows, its cluster Reachable", func() error {
		if got := budget(spokeNS, "eu-west"); got != "2" {
			return fmt.Errorf("eu-west's budget: maxUnavailable %s", got)
		}
		r := kit.Get(t, ns)
		if c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ClustersReachable = %+v", c)
		}
		return nil
	})
}

// A place's anchor is its first write: with eu-west's spoke answering 500 to every ConfigMap
// write, a new revision (whose revisions the anchor must record) reaches us-east in the hub,
// eu-west's cluster is frozen with the anchor's failed write named, and nothing else is written
// there (no ReplicaSet of the new revision). When the spoke answers again, the anchor records the
// new revision and the rollout completes.
func TestStoryASpokesAnchorIsWrittenFirst(t *testing.T) {
	t.Parallel()
	ns, spokeNS, proxy := steadyWithEUBehindAProxy(t)
	ctx := context.Background()
	proxy.only.Store("/configmaps")
	proxy.failing.Store(true)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
	})
	story.Eventually(t, 60*time.Second, "us-east serves v2; eu-west's cluster is frozen by its anchor's write", func() error {
		if err := kit.ServingIs(t, ns, "us-east=app:v2:3/3 ap-south=app:v1:3/3")(); err != nil {
			return err
		}
		c := meta.FindStatusCondition(kit.Get(t, ns).Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "failed a write") || !strings.Contains(c.Message, "anchor ConfigMap") {
			return fmt.Errorf("ClustersReachable = %+v", c)
		}
		return nil
	})
	if proxy.failed.Load() == 0 {
		t.Fatal("the anchor was never written while the spoke failed: the story tested nothing")
	}
	for _, rs := range spokeReplicaSets(t, spokeNS) {
		if rs.Spec.Template.Spec.Containers[0].Image != "app:v1" {
			t.Fatalf("ReplicaSet %s of the new revision was written to the spoke before its anchor", rs.Name)
		}
	}

	proxy.failing.Store(false)
	kit.WaitReady(t, ns, 60*time.Second)
	if got := spokeServing(t, spokeNS); got != "app:v2:3/3" {
		t.Fatalf("eu-west in the spoke serves %q, want v2", got)
	}
	anchor := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: "rs-a-schemagate"}, anchor); err != nil {
		t.Fatal(err)
	}
	if want := kit.Get(t, ns).Status.UpdateRevision; !strings.Contains(anchor.Data["revisions"], want) {
		t.Fatalf("the anchor records revisions %q, want %s among them", anchor.Data["revisions"], want)
	}
}
