package integration

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// budgets lists the namespace's PodDisruptionBudgets by name.
func budgets(t *testing.T, ns string) map[string]policyv1.PodDisruptionBudget {
	t.Helper()
	var list policyv1.PodDisruptionBudgetList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]policyv1.PodDisruptionBudget{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out
}

// budgetsAre reports as an error whether the namespace's budgets differ from want
// (name → maxUnavailable).
func budgetsAre(t *testing.T, ns string, want map[string]string) func() error {
	return func() error {
		got := map[string]string{}
		for name, p := range budgets(t, ns) {
			if p.DeletionTimestamp != nil {
				continue
			}
			got[name] = "<nil>"
			if p.Spec.MaxUnavailable != nil {
				got[name] = p.Spec.MaxUnavailable.String()
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("budgets %v, want %v", got, want)
		}
		return nil
	}
}

// rv reads a resourceVersion as the number etcd's revision is: the API server documents it as
// opaque, but envtest's single etcd orders every write of the cluster by it, which is what this
// test needs to tell which object was created first.
func rv(t *testing.T, o metav1.Object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("%s: resourceVersion %q: %v", o.GetName(), o.GetResourceVersion(), err)
	}
	return n
}

// A shard's budget exists before any of its ReplicaSets: while the API server refuses budgets (a
// ResourceQuota of 0 for them), no ReplicaSet is created, and status says why (Stalled=True,
// WriteRefused, quoting the quota's refusal; the migration, which no budget protects, may run);
// once budgets are allowed, every shard's budget is created before its first ReplicaSet, with the
// shape (selector, owner, labels) the disruption controller and the garbage collector need.
func TestPDBExistsBeforeAnyReplicaSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-budgets", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/poddisruptionbudgets.policy": resource.MustParse("0")}},
	}
	if err := k8s.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// The quota admission plugin refuses while the quota has no status (envtest runs no quota
	// controller); give it one that says 0 are allowed and 0 used, as the controller would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/poddisruptionbudgets.policy": resource.MustParse("0")}}
	if err := k8s.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	refused := func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonWriteRefused)(); err != nil {
			return err
		}
		if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, "exceeded quota: no-budgets") {
			return fmt.Errorf("the condition does not quote the server: %q", c.Message)
		}
		return nil
	}
	story.Eventually(t, 10*time.Second, "the refused budgets are in status", refused)
	story.Consistently(t, 3*time.Second, "no ReplicaSet before the budgets", func() error {
		if rss, pdbs := len(kit.ReplicaSets(t, ns)), len(budgets(t, ns)); rss+pdbs != 0 {
			return fmt.Errorf("%d ReplicaSets, %d budgets while budgets are refused", rss, pdbs)
		}
		return refused()
	})
	if err := k8s.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 90*time.Second)

	rsvc := kit.Get(t, ns)
	pdbs := budgets(t, ns)
	firstRS := map[string]appsv1.ReplicaSet{}
	for _, rs := range kit.ReplicaSets(t, ns) {
		shard := rs.Labels[rollout.LabelShard]
		if first, ok := firstRS[shard]; !ok || rv(t, &rs) < rv(t, &first) {
			firstRS[shard] = rs
		}
	}
	for _, shard := range rsvc.Spec.Shards {
		pdb, ok := pdbs["rs-a-"+shard.Name]
		if !ok {
			t.Fatalf("no budget for shard %s: %v", shard.Name, pdbs)
		}
		rs := firstRS[shard.Name]
		if rv(t, &pdb) >= rv(t, &rs) {
			t.Errorf("shard %s: budget created at revision %d, its first ReplicaSet %s at %d", shard.Name, rv(t, &pdb), rs.Name, rv(t, &rs))
		}
		if !metav1.IsControlledBy(&pdb, rsvc) || pdb.Labels[rollout.LabelManagedBy] != rollout.ManagedByValue {
			t.Errorf("%s: owners %v labels %v", pdb.Name, pdb.OwnerReferences, pdb.Labels)
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range kit.ReplicaSets(t, ns) {
			if got, want := sel.Matches(labels.Set(other.Spec.Template.Labels)), other.Labels[rollout.LabelShard] == shard.Name; got != want {
				t.Errorf("%s selects the pods of %s: %v, want %v", pdb.Name, other.Name, got, want)
			}
		}
		if got := pdb.Spec.MaxUnavailable.String(); got != "1" {
			t.Errorf("%s: maxUnavailable %s, want 1 (strategy maxUnavailable 0, floored at 1)", pdb.Name, got)
		}
	}
}

// The budgets follow the spec: a replica and strategy change, an explicit maxUnavailable, a shard
// removed, a hand edit undone, opt-out and back; and a steady RoutingService writes nothing to
// them however often it is reconciled.
func TestPDBFollowsTheSpec(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	all := func(v string) map[string]string {
		return map[string]string{"rs-a-us-east": v, "rs-a-eu-west": v, "rs-a-ap-south": v}
	}
	story.Eventually(t, 10*time.Second, "one budget per shard", budgetsAre(t, ns, all("1")))

	// Steady: reconciles (woken by annotation changes) write no budget.
	before := map[string]string{}
	for name, p := range budgets(t, ns) {
		before[name] = p.ResourceVersion
	}
	for i := 0; i < 5; i++ {
		kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
			if r.Annotations == nil {
				r.Annotations = map[string]string{}
			}
			r.Annotations["example.com/poke"] = strconv.Itoa(i)
		})
		time.Sleep(300 * time.Millisecond) // what is measured: a reconcile per poke, each one writing nothing
	}
	story.Consistently(t, time.Second, "steady: no budget written", func() error {
		for name, p := range budgets(t, ns) {
			if p.ResourceVersion != before[name] {
				return fmt.Errorf("budget %s was written (resourceVersion %s → %s)", name, before[name], p.ResourceVersion)
			}
		}
		return nil
	})

	// Replicas and strategy: us-east 3 → 8 with maxUnavailable 25% → 2 (rounded down); the others
	// (25% of 3 = 0) keep the floor of 1.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Shards[0].Replicas = 8
		r.Spec.Strategy.MaxUnavailable = ptr.To(intstr.FromString("25%"))
	})
	story.Eventually(t, 10*time.Second, "us-east's budget follows replicas", budgetsAre(t, ns,
		map[string]string{"rs-a-us-east": "2", "rs-a-eu-west": "1", "rs-a-ap-south": "1"}))

	// An explicit budget is set as it is.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.DisruptionBudget.MaxUnavailable = ptr.To(intstr.FromString("50%"))
	})
	story.Eventually(t, 10*time.Second, "explicit maxUnavailable", budgetsAre(t, ns, all("50%")))

	// A hand edit is undone (the budget's watch wakes the reconciler).
	pdb := budgets(t, ns)["rs-a-eu-west"]
	pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	if err := k8s.Update(ctx, &pdb); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 10*time.Second, "hand edit undone", budgetsAre(t, ns, all("50%")))

	// A removed shard's budget goes.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Shards = r.Spec.Shards[:2] })
	story.Eventually(t, 10*time.Second, "removed shard's budget deleted", budgetsAre(t, ns,
		map[string]string{"rs-a-us-east": "50%", "rs-a-eu-west": "50%"}))

	// Opt-out deletes them; opting in again creates them.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.DisruptionBudget.Enabled = ptr.To(false) })
	story.Eventually(t, 10*time.Second, "opt-out", budgetsAre(t, ns, map[string]string{}))
	story.Consistently(t, 2*time.Second, "opted out stays out", budgetsAre(t, ns, map[string]string{}))
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.DisruptionBudget.Enabled = nil })
	story.Eventually(t, 10*time.Second, "opt-in again (enabled defaults to true)", budgetsAre(t, ns,
		map[string]string{"rs-a-us-east": "50%", "rs-a-eu-west": "50%"}))
}

// A budget name held by a PodDisruptionBudget schemagate does not control is left as it is, with a
// Warning Event, and the rollout is not held back by it.
func TestPDBNameTakenIsLeftAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	theirs := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-a-eu-west", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "edge"}}},
	}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	// A second one: each holder gets an Event of its own (the recorder folds Events of one
	// reason and action into one series, which showed only the first).
	second := theirs.DeepCopy()
	second.Name, second.ResourceVersion = "rs-a-ap-south", ""
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 90*time.Second)
	got := budgets(t, ns)["rs-a-eu-west"]
	if got.ResourceVersion != theirs.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("the other budget was changed: %+v", got)
	}
	if _, ok := budgets(t, ns)["rs-a-us-east"]; !ok {
		t.Errorf("us-east has no budget")
	}
	story.Eventually(t, 5*time.Second, "a Warning Event per holder", func() error {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		named := map[string]bool{}
		for _, e := range list.Items {
			for _, name := range []string{"rs-a-eu-west", "rs-a-ap-south"} {
				if e.Reason == "DisruptionBudgetConflict" && strings.Contains(e.Note, "/"+name+":") {
					named[name] = true
				}
			}
		}
		if len(named) != 2 {
			return fmt.Errorf("holders named %v; events %v", named, kit.EventsFor(t, ns))
		}
		return nil
	})
}

// The API server rejects a maxUnavailable that is neither a non-negative number nor a percentage,
// naming the field.
func TestPDBValidation(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	for _, bad := range []intstr.IntOrString{intstr.FromInt32(-1), intstr.FromString("half"), intstr.FromString("-5%")} {
		rsvc := story.Fixture(ns)
		rsvc.Spec.DisruptionBudget.MaxUnavailable = ptr.To(bad)
		err := k8s.Create(context.Background(), rsvc)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.disruptionBudget.maxUnavailable") {
			t.Errorf("maxUnavailable %s: %v, want Invalid naming spec.disruptionBudget.maxUnavailable", bad.String(), err)
		}
	}
	names := []string{}
	for name := range budgets(t, ns) {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) != 0 {
		t.Errorf("budgets after rejected creates: %v", names)
	}
}
