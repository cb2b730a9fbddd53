package rollout

import (
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

func TestDisruptionBudgetMaxUnavailable(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { return ptr.To(intstr.FromString(s)) }
	num := func(n int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(n)) }
	cases := []struct {
		name            string
		replicas        int32
		strategySurge   *intstr.IntOrString
		strategyUnavail *intstr.IntOrString
		budget          *intstr.IntOrString
		want            intstr.IntOrString
	}{
		{name: "default strategy (maxUnavailable 0) gets the floor of 1", replicas: 3, want: intstr.FromInt32(1)},
		{name: "explicit strategy 0 gets the floor of 1", replicas: 3, strategyUnavail: num(0), want: intstr.FromInt32(1)},
		{name: "strategy 2 pods", replicas: 3, strategyUnavail: num(2), want: intstr.FromInt32(2)},
		{name: "strategy 25% of 10 rounds down to 2", replicas: 10, strategyUnavail: pct("25%"), want: intstr.FromInt32(2)},
		{name: "strategy 25% of 3 rounds down to 0, floor 1", replicas: 3, strategyUnavail: pct("25%"), want: intstr.FromInt32(1)},
		{name: "strategy above replicas is capped at replicas", replicas: 2, strategyUnavail: num(5), want: intstr.FromInt32(2)},
		{name: "zero replicas still 1", replicas: 0, strategyUnavail: num(3), want: intstr.FromInt32(1)},
		{name: "maxSurge does not count", replicas: 4, strategySurge: num(4), want: intstr.FromInt32(1)},
		{name: "spec.disruptionBudget.maxUnavailable wins as it is", replicas: 3, strategyUnavail: num(2), budget: num(0), want: intstr.FromInt32(0)},
		{name: "a percentage budget is passed through", replicas: 10, budget: pct("30%"), want: intstr.FromString("30%")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rsvc := fixture()
			rsvc.Spec.Strategy.MaxSurge, rsvc.Spec.Strategy.MaxUnavailable = tc.strategySurge, tc.strategyUnavail
			rsvc.Spec.DisruptionBudget.MaxUnavailable = tc.budget
			got := DisruptionBudgetMaxUnavailable(rsvc, routingv1alpha1.ShardSpec{Name: "us-east", Replicas: tc.replicas})
			if got != tc.want {
				t.Errorf("maxUnavailable = %s, want %s", got.String(), tc.want.String())
			}
		})
	}
}

func TestDesiredDisruptionBudgets(t *testing.T) {
	cases := []struct {
		name    string
		edit    func(*routingv1alpha1.RoutingService)
		want    []string // name=maxUnavailable, in order
		noneYet bool
	}{
		{name: "one per shard, in spec order", want: []string{"rs-a-us-east=1", "rs-a-eu-west=1", "rs-a-ap-south=1"}},
		{name: "enabled unset means enabled", edit: func(r *routingv1alpha1.RoutingService) { r.Spec.DisruptionBudget.Enabled = nil },
			want: []string{"rs-a-us-east=1", "rs-a-eu-west=1", "rs-a-ap-south=1"}},
		{name: "opt-out: none", edit: func(r *routingv1alpha1.RoutingService) { r.Spec.DisruptionBudget.Enabled = ptr.To(false) }},
		{name: "a removed shard has none", edit: func(r *routingv1alpha1.RoutingService) { r.Spec.Shards = r.Spec.Shards[:2] },
			want: []string{"rs-a-us-east=1", "rs-a-eu-west=1"}},
		{name: "replicas follow the strategy per shard", edit: func(r *routingv1alpha1.RoutingService) {
			r.Spec.Strategy.MaxUnavailable = ptr.To(intstr.FromString("50%"))
			r.Spec.Shards[0].Replicas, r.Spec.Shards[1].Replicas, r.Spec.Shards[2].Replicas = 10, 1, 6
		}, want: []string{"rs-a-us-east=5", "rs-a-eu-west=1", "rs-a-ap-south=3"}},
		{name: "explicit enabled true with a budget", edit: func(r *routingv1alpha1.RoutingService) {
			r.Spec.DisruptionBudget = routingv1alpha1.DisruptionBudgetSpec{Enabled: ptr.To(true), MaxUnavailable: ptr.To(intstr.FromString("20%"))}
		}, want: []string{"rs-a-us-east=20%", "rs-a-eu-west=20%", "rs-a-ap-south=20%"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rsvc := fixture()
			if tc.edit != nil {
				tc.edit(rsvc)
			}
			got := DesiredDisruptionBudgets(rsvc)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d budgets, want %v", len(got), tc.want)
			}
			for i, pdb := range got {
				if s := pdb.Name + "=" + pdb.Spec.MaxUnavailable.String(); s != tc.want[i] {
					t.Errorf("budget %d = %s, want %s", i, s, tc.want[i])
				}
				checkBudgetShape(t, rsvc, pdb, rsvc.Spec.Shards[i].Name)
			}
		})
	}
}

// checkBudgetShape checks what every budget must carry: schemagate's labels, a controller
// reference to the RoutingService, a selector that matches the shard's routing pods of every
// revision and nothing else, and no minAvailable.
func checkBudgetShape(t *testing.T, rsvc *routingv1alpha1.RoutingService, pdb *policyv1.PodDisruptionBudget, shard string) {
	t.Helper()
	if pdb.Namespace != rsvc.Namespace || pdb.Labels[LabelManagedBy] != ManagedByValue || pdb.Labels[LabelName] != rsvc.Name || pdb.Labels[LabelShard] != shard {
		t.Errorf("%s: namespace %q labels %v", pdb.Name, pdb.Namespace, pdb.Labels)
	}
	if !metav1.IsControlledBy(pdb, rsvc) {
		t.Errorf("%s: not controlled by the RoutingService: %v", pdb.Name, pdb.OwnerReferences)
	}
	if pdb.Spec.MinAvailable != nil || pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("%s: spec %+v", pdb.Name, pdb.Spec)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rsvc.Spec.Shards {
		for _, rev := range []string{"aaaa", "bbbb"} {
			pod := NewReplicaSet(rsvc, s, rev, 1).Spec.Template.Labels
			if got, want := sel.Matches(labels.Set(pod)), s.Name == shard; got != want {
				t.Errorf("%s: selector matches a pod of shard %s revision %s: %v, want %v", pdb.Name, s.Name, rev, got, want)
			}
		}
	}
	job := NewMigrationJob(rsvc, "1", 1).Spec.Template.Labels
	if sel.Matches(labels.Set(job)) {
		t.Errorf("%s: selects migration pods", pdb.Name)
	}
}
