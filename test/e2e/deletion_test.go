//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// owned lists the UIDs of rs-a's ReplicaSets and Jobs in ns (by schemagate's name label).
func owned(t *testing.T, ns string) (rss []appsv1.ReplicaSet, jobs []batchv1.Job, uids map[types.UID]string) {
	t.Helper()
	uids = map[types.UID]string{}
	sel := client.MatchingLabels{rollout.LabelName: "rs-a"}
	var rsList appsv1.ReplicaSetList
	var jobList batchv1.JobList
	if err := k8s.List(context.Background(), &rsList, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(context.Background(), &jobList, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	for _, rs := range rsList.Items {
		uids[rs.UID] = "ReplicaSet " + rs.Name
	}
	for _, j := range jobList.Items {
		uids[j.UID] = "Job " + j.Name
	}
	return rsList.Items, jobList.Items, uids
}

// deleteRS deletes rs-a with a propagation policy and checks, until it is gone, that schemagate
// creates nothing more once its deletionTimestamp is set (S-20).
func deleteRS(t *testing.T, ns string, policy metav1.DeletionPropagation) {
	t.Helper()
	_, _, before := owned(t, ns)
	if err := k8s.Delete(context.Background(), kit().Get(t, ns), client.PropagationPolicy(policy)); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 90*time.Second, "rs-a is gone", func() error {
		_, _, now := owned(t, ns)
		for uid, what := range now {
			if _, ok := before[uid]; !ok {
				t.Fatalf("%s was created after rs-a was deleted (%s)", what, policy)
			}
		}
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, &routingv1alpha1.RoutingService{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// S-20, foreground and background: deleted mid-migration and mid-shard, rs-a creates nothing more,
// the garbage collector removes what it owned, and rs-a re-created under the same name starts
// afresh and converges.
func TestStoryS20DeleteAndRecreate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		policy metav1.DeletionPropagation
		mid    func(*routingv1alpha1.RoutingService)
	}{
		{"foreground mid-migration", metav1.DeletePropagationForeground, func(r *routingv1alpha1.RoutingService) {
			story.ToV2("app:v2", "migrate:v2")(r)
			r.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
		}},
		{"background mid-shard", metav1.DeletePropagationBackground, func(r *routingv1alpha1.RoutingService) {
			story.ToV2("app:v2", "migrate:v2")(r)
			r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready", "schemagate.io/fake-pod-region": "eu-west-1"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := steadyV1(t)
			kit().Update(t, ns, c.mid)
			story.Eventually(t, 60*time.Second, "mid-rollout", func() error {
				if c.policy == metav1.DeletePropagationBackground {
					if got := kit().Get(t, ns).Status.PromotedShards; got != "1/3" {
						return fmt.Errorf("promoted shards %s", got)
					}
					return nil
				}
				return kit().HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating)()
			})
			deleteRS(t, ns, c.policy)
			story.Eventually(t, 60*time.Second, "the garbage collector removes what rs-a owned", func() error {
				if rss, jobs, _ := owned(t, ns); len(rss)+len(jobs) > 0 {
					return fmt.Errorf("%d ReplicaSets and %d Jobs left", len(rss), len(jobs))
				}
				return nil
			})
			if err := k8s.Create(context.Background(), e2eFixture(ns)); err != nil {
				t.Fatal(err)
			}
			kit().WaitReady(t, ns, 2*time.Minute)
			story.Eventually(t, 30*time.Second, "v1 everywhere", kit().ServingIs(t, ns, story.AllV1))
		})
	}
}

// S-20 and the orphan item, on the real garbage collector: rs-a is deleted with
// --cascade=orphan mid-shard, applied again, updated to v2 (schema 2), and deleted. Every
// orphan that is provably rs-a's is adopted by the new object and goes with it: the
// ReplicaSets (never two sets of pods per shard) and the PodDisruptionBudgets with a controller
// reference, the migration Jobs with an owner reference that is not one (history, never
// evidence: no NameConflict, no user clean-up), and their pods with their Jobs. Each shard has
// its budget at every moment while the RoutingService runs, and the final delete leaves nothing
// labelled for rs-a.
func TestStoryS20OrphanThenRecreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	shards := []string{"us-east", "eu-west", "ap-south"}
	story.Eventually(t, 30*time.Second, "one budget per shard", budgetsFor(t, ns, shards))
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2" // schema 1: no migration
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(600))
	})
	story.Eventually(t, 60*time.Second, "us-east baking v2", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonShardBaking))
	_, oldJobs, _ := owned(t, ns)
	deleteRS(t, ns, metav1.DeletePropagationOrphan)
	story.Eventually(t, 30*time.Second, "the garbage collector orphans the ReplicaSets, Jobs and budgets", func() error {
		rss, jobs, _ := owned(t, ns)
		for _, rs := range rss {
			if len(rs.OwnerReferences) > 0 {
				return fmt.Errorf("ReplicaSet %s still has owners %v", rs.Name, rs.OwnerReferences)
			}
		}
		for _, j := range jobs {
			if len(j.OwnerReferences) > 0 {
				return fmt.Errorf("Job %s still has owners %v", j.Name, j.OwnerReferences)
			}
		}
		for _, p := range shardBudgets(t, ns) {
			if len(p.OwnerReferences) > 0 {
				return fmt.Errorf("budget %s still has owners %v", p.Name, p.OwnerReferences)
			}
		}
		return nil
	})

	// From here until the final delete, every shard has its budget at every moment.
	watch := watchBudgets(t, ns, shards)

	// Applied again, as v1 (a GitOps tool restoring the object from Git).
	if err := k8s.Create(ctx, e2eFixture(ns)); err != nil {
		t.Fatal(err)
	}
	rsvc := kit().Get(t, ns)
	story.Eventually(t, 30*time.Second, "every orphan adopted", adoptedBy(t, ns, rsvc))
	for _, j := range kit().Jobs(t, ns) {
		if metav1.IsControlledBy(&j, rsvc) {
			t.Errorf("the orphaned Job %s is controlled by the new rs-a: history, never evidence (%v)", j.Name, j.OwnerReferences)
		}
	}
	story.Consistently(t, 3*time.Second, "one set of pods per shard, no orphaned Job as evidence", func() error {
		if n := len(pods(t, ns, rollout.ComponentRouting)); n > 3*3+1 {
			return fmt.Errorf("%d routing pods for 3 shards of 3", n)
		}
		st := kit().Get(t, ns).Status.Schema
		for _, j := range oldJobs {
			if st.ConfirmedBy == j.Name || st.ReportedBy == j.Name {
				return fmt.Errorf("status.schema %+v: the orphaned Job %s was taken as evidence", st, j.Name)
			}
		}
		return nil
	})

	// Updated to v2 with schema 2: the migration runs for the new rs-a and v2 rolls out.
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:v2")(r)
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
	})
	kit().WaitReady(t, ns, 3*time.Minute)
	story.Eventually(t, 30*time.Second, "v2 everywhere", kit().ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	story.Eventually(t, 30*time.Second, "everything still owned after the update", adoptedBy(t, ns, kit().Get(t, ns)))

	// The final delete leaves nothing labelled for rs-a: the adopted Jobs and their pods, the
	// budgets and the ReplicaSets go with it.
	watch.stop()
	deleteRS(t, ns, metav1.DeletePropagationBackground)
	story.Eventually(t, 90*time.Second, "nothing left", func() error {
		rss, jobs, _ := owned(t, ns)
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{rollout.LabelName: "rs-a"}); err != nil {
			return err
		}
		if n := len(rss) + len(jobs) + len(list.Items) + len(shardBudgets(t, ns)); n > 0 {
			return fmt.Errorf("%d ReplicaSets, %d Jobs, %d pods, %d budgets left", len(rss), len(jobs), len(list.Items), len(shardBudgets(t, ns)))
		}
		return nil
	})
	if missing := watch.missing(); len(missing) > 0 {
		t.Errorf("a shard was without its budget while rs-a ran: %v", missing)
	}
}

// shardBudgets lists the PodDisruptionBudgets labelled for rs-a in ns.
func shardBudgets(t *testing.T, ns string) []policyv1.PodDisruptionBudget {
	t.Helper()
	var list policyv1.PodDisruptionBudgetList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{rollout.LabelName: "rs-a"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// budgetsFor checks that each shard has its budget.
func budgetsFor(t *testing.T, ns string, shards []string) func() error {
	return func() error {
		have := map[string]bool{}
		for _, p := range shardBudgets(t, ns) {
			have[p.Name] = true
		}
		for _, s := range shards {
			if name := rollout.DisruptionBudgetName("rs-a", s); !have[name] {
				return fmt.Errorf("no budget %s", name)
			}
		}
		return nil
	}
}

// adoptedBy checks that rsvc controls every ReplicaSet and budget labelled for it, and owns
// (without controlling) every migration Job labelled for it, and that each shard has its budget.
func adoptedBy(t *testing.T, ns string, rsvc *routingv1alpha1.RoutingService) func() error {
	return func() error {
		rss, jobs, _ := owned(t, ns)
		for _, rs := range rss {
			if !metav1.IsControlledBy(&rs, rsvc) {
				return fmt.Errorf("ReplicaSet %s: owners %v", rs.Name, rs.OwnerReferences)
			}
		}
		for _, j := range jobs {
			mine := false
			for _, ref := range j.OwnerReferences {
				mine = mine || ref.UID == rsvc.UID
			}
			if !mine {
				return fmt.Errorf("Job %s: owners %v", j.Name, j.OwnerReferences)
			}
		}
		pdbs := shardBudgets(t, ns)
		if len(pdbs) != 3 {
			return fmt.Errorf("%d budgets, want 3", len(pdbs))
		}
		for _, p := range pdbs {
			if !metav1.IsControlledBy(&p, rsvc) {
				return fmt.Errorf("budget %s: owners %v", p.Name, p.OwnerReferences)
			}
		}
		return nil
	}
}

// budgetWatch polls every 100 ms that each shard has its budget, and records the moments one
// did not.
type budgetWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	gaps []string
}

func watchBudgets(t *testing.T, ns string, shards []string) *budgetWatch {
	w := &budgetWatch{done: make(chan struct{})}
	check := budgetsFor(t, ns, shards)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for i := 0; i < 6000; i++ { // bounded: 10 min
			select {
			case <-w.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := check(); err != nil {
				w.mu.Lock()
				w.gaps = append(w.gaps, time.Now().Format("15:04:05.000")+" "+err.Error())
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *budgetWatch) stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
}

func (w *budgetWatch) missing() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.gaps...)
}
