//go:build e2e

package multicluster

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
	"github.com/schemagate/schemagate/test/fleet"
	"github.com/schemagate/schemagate/test/realstack"
	"github.com/schemagate/schemagate/test/traffic"
)

// story is one RoutingService whose three shards each live in their own region cluster.
type story struct {
	t     *testing.T
	ns    string
	db    string
	creds map[string]*fleet.Credentials // by region
}

// newStory creates namespace ns in the hub and in every region, the spoke credentials
// (config/spoke's ServiceAccount and Role) and the hub's <region>-kubeconfig Secrets, a database,
// and the RoutingService rs-a on v1 with each shard in its region's cluster; it waits for Ready.
func newStory(t *testing.T, ns string) *story {
	ctx := context.Background()
	s := &story{t: t, ns: ns, creds: map[string]*fleet.Credentials{}}
	for _, c := range append([]client.Client{hub}, regionClients()...) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range f.Regions {
		cr, err := r.SpokeCredentials(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := cr.WriteSecret(ctx, f.Hub.Client, ns, r.Name); err != nil {
			t.Fatal(err)
		}
		s.creds[r.Name] = cr
	}
	if err := pg.CreateDatabase(ctx, ns); err != nil {
		t.Fatal(err)
	}
	s.db = pg.URL(ns)
	rsvc := realstack.RoutingService("rs-a", ns, s.db, 2)
	for i := range rsvc.Spec.Shards {
		rsvc.Spec.Shards[i].Cluster = &routingv1alpha1.ShardCluster{Name: realstack.Regions[i].Region}
	}
	rsvc.Spec.Strategy = routingv1alpha1.RolloutStrategy{BakeSeconds: ptr.To(int32(3)), ProgressDeadlineSeconds: ptr.To(int32(90)),
		Checks: []routingv1alpha1.ShardCheck{realstack.RegionSchemaCheck(s.db)}}
	if err := hub.Create(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	s.waitReady(3 * time.Minute)
	return s
}

func regionClients() []client.Client {
	var out []client.Client
	for _, r := range f.Regions {
		out = append(out, regions[r.Name])
	}
	return out
}

func (s *story) get() *routingv1alpha1.RoutingService {
	s.t.Helper()
	rsvc := &routingv1alpha1.RoutingService{}
	if err := hub.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "rs-a"}, rsvc); err != nil {
		s.t.Fatal(err)
	}
	return rsvc
}

func (s *story) update(change func(*routingv1alpha1.RoutingService)) {
	s.t.Helper()
	for {
		rsvc := s.get()
		change(rsvc)
		err := hub.Update(context.Background(), rsvc)
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "modified") {
			s.t.Fatal(err)
		}
	}
}

// wait polls cond every 500 ms until it is true, or fails the test after timeout with cond's last
// word and the status.
func (s *story) wait(timeout time.Duration, what string, cond func(*routingv1alpha1.RoutingService) bool) {
	s.t.Helper()
	end := time.Now().Add(timeout)
	for {
		rsvc := s.get()
		if cond(rsvc) {
			return
		}
		if time.Now().After(end) {
			s.t.Fatalf("%s: not within %s; conditions %+v; shards %+v", what, timeout, rsvc.Status.Conditions, rsvc.Status.Shards)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func ready(rsvc *routingv1alpha1.RoutingService) bool {
	c := meta.FindStatusCondition(rsvc.Status.Conditions, routingv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rsvc.Generation
}

func (s *story) waitReady(timeout time.Duration) { s.wait(timeout, "Ready", ready) }

func shardOf(rsvc *routingv1alpha1.RoutingService, name string) routingv1alpha1.ShardStatus {
	for _, ss := range rsvc.Status.Shards {
		if ss.Name == name {
			return ss
		}
	}
	return routingv1alpha1.ShardStatus{}
}

// snapshot lists, per region, each ReplicaSet of the story as "name uid replicas": what must not
// change while the hub or a link is gone.
func (s *story) snapshot() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	for _, r := range f.Regions {
		var list appsv1.ReplicaSetList
		if err := regions[r.Name].List(context.Background(), &list, client.InNamespace(s.ns), client.MatchingLabels{rollout.LabelName: "rs-a"}); err != nil {
			s.t.Fatal(err)
		}
		var lines []string
		for _, rs := range list.Items {
			lines = append(lines, fmt.Sprintf("%s %s %d", rs.Name, rs.UID, ptr.Deref(rs.Spec.Replicas, 1)))
		}
		sort.Strings(lines)
		out[r.Name] = strings.Join(lines, "; ")
	}
	return out
}

// answering counts, per region, the story's router pods whose /ready answers 200 now.
func (s *story) answering() map[string]int {
	out := map[string]int{}
	hc := &http.Client{Timeout: time.Second}
	for _, r := range f.Regions {
		var pods corev1.PodList
		if err := regions[r.Name].List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels{rollout.LabelComponent: rollout.ComponentRouting}); err != nil {
			continue
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				continue
			}
			resp, err := hc.Get(fmt.Sprintf("http://%s:%d/ready", p.Status.PodIP, realstack.RouterPort))
			if err == nil {
				if resp.StatusCode == http.StatusOK {
					out[r.Name]++
				}
				resp.Body.Close()
			}
		}
	}
	return out
}

// startTraffic sends 20 requests per second to each shard's routers over the seeded domains, each
// shard's backends read from its own region cluster (directly: the partitions cut only the hub's
// link), so what it counts is what a region's edge serves whatever the hub does.
func (s *story) startTraffic() *traffic.Generator {
	var shards, domains []string
	lookups := map[string]traffic.Backends{}
	for i, r := range realstack.Regions {
		shards = append(shards, r.Shard)
		// The routers only: the shard's check Job pods carry its name and shard labels too (and,
		// with no readiness probe, are Ready while they run).
		sel := map[string]map[string]string{r.Shard: {rollout.LabelName: "rs-a", rollout.LabelShard: r.Shard, rollout.LabelComponent: rollout.ComponentRouting}}
		lookups[r.Shard] = traffic.PodBackends(regions[f.Regions[i].Name], s.ns, sel, realstack.RouterPort, 200*time.Millisecond)
	}
	for i := 0; i < 20; i++ {
		domains = append(domains, fmt.Sprintf("d%02d.example", i))
	}
	return traffic.Start(context.Background(), traffic.Options{Regions: shards, Rate: 20, Domains: domains,
		Backends: func(ctx context.Context, shard string) ([]string, error) { return lookups[shard](ctx, shard) }})
}

// noneFailed fails the test when any region answered a 404 or an error in rep.
func noneFailed(t *testing.T, what string, rep traffic.Report) {
	t.Helper()
	for _, region := range rep.Regions {
		if tot := rep.Totals[region]; tot.NotFound > 0 || tot.Errors() > 0 || tot.OK == 0 {
			t.Errorf("%s: %s answered %d × 200, %d × 404, %d errors", what, region, tot.OK, tot.NotFound, tot.Errors())
		}
	}
}

// A first rollout across three region clusters: every shard's ReplicaSets are in its own cluster,
// controlled by the spoke's anchor (which records the hub, the RoutingService and its UID), and
// none in the hub; the migration ran once, in the hub; each shard's region-schema check ran as a
// Job in its own cluster (controlled by the anchor, succeeded), none in the hub.
func TestClusterShardsFirstRolloutAndAnchors(t *testing.T) {
	s := newStory(t, "mc-first")
	rsvc := s.get()
	var hubRS appsv1.ReplicaSetList
	if err := hub.List(context.Background(), &hubRS, client.InNamespace(s.ns)); err != nil || len(hubRS.Items) != 0 {
		t.Fatalf("ReplicaSets in the hub: %d (%v)", len(hubRS.Items), err)
	}
	for _, r := range f.Regions {
		cm := &corev1.ConfigMap{}
		if err := regions[r.Name].Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: spoke.AnchorName("rs-a")}, cm); err != nil {
			t.Fatalf("%s: anchor: %v", r.Name, err)
		}
		a := spoke.ReadAnchor(cm)
		if a.Hub != hubID || a.UID != rsvc.UID || a.Name != "rs-a" {
			t.Fatalf("%s: anchor %+v", r.Name, a)
		}
		var list appsv1.ReplicaSetList
		if err := regions[r.Name].List(context.Background(), &list, client.InNamespace(s.ns)); err != nil || len(list.Items) != 1 {
			t.Fatalf("%s: %d ReplicaSets (%v)", r.Name, len(list.Items), err)
		}
		if ref := metav1.GetControllerOf(&list.Items[0]); ref == nil || ref.UID != cm.UID {
			t.Fatalf("%s: ReplicaSet controlled by %+v, want the anchor %s", r.Name, ref, cm.UID)
		}
		var checks batchv1.JobList
		if err := regions[r.Name].List(context.Background(), &checks, client.InNamespace(s.ns), client.MatchingLabels{rollout.LabelComponent: rollout.ComponentShardCheck}); err != nil || len(checks.Items) != 1 {
			t.Fatalf("%s: %d check Jobs (%v)", r.Name, len(checks.Items), err)
		}
		if j := &checks.Items[0]; j.Labels[rollout.LabelCheck] != "region-schema" || j.Status.Succeeded != 1 || metav1.GetControllerOf(j) == nil || metav1.GetControllerOf(j).UID != cm.UID {
			t.Fatalf("%s: check Job %s: check %q, succeeded %d, controller %+v", r.Name, j.Name, j.Labels[rollout.LabelCheck], j.Status.Succeeded, metav1.GetControllerOf(j))
		}
		var pdbs policyv1.PodDisruptionBudgetList
		if err := regions[r.Name].List(context.Background(), &pdbs, client.InNamespace(s.ns)); err != nil || len(pdbs.Items) != 1 {
			t.Fatalf("%s: %d PodDisruptionBudgets (%v)", r.Name, len(pdbs.Items), err)
		}
		if ref := metav1.GetControllerOf(&pdbs.Items[0]); ref == nil || ref.UID != cm.UID {
			t.Fatalf("%s: budget controlled by %+v, want the anchor", r.Name, ref)
		}
		if ss := shardOf(rsvc, realstack.Regions[0].Shard); ss.Cluster == nil || ss.Cluster.State != routingv1alpha1.ClusterReachable {
			t.Fatalf("shard status %+v", ss)
		}
	}
	if got := s.answering(); got[f.Regions[0].Name] != 2 || got[f.Regions[1].Name] != 2 || got[f.Regions[2].Name] != 2 {
		t.Fatalf("routers answering: %v", got)
	}
	var hubPDBs policyv1.PodDisruptionBudgetList
	if err := hub.List(context.Background(), &hubPDBs, client.InNamespace(s.ns)); err != nil || len(hubPDBs.Items) != 0 {
		t.Fatalf("PodDisruptionBudgets in the hub: %d (%v)", len(hubPDBs.Items), err)
	}
	var jobs metav1.PartialObjectMetadataList
	jobs.SetGroupVersionKind(batchJobList)
	if err := hub.List(context.Background(), &jobs, client.InNamespace(s.ns), client.MatchingLabels{rollout.LabelComponent: rollout.ComponentMigration}); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("migration Jobs in the hub: %d (%v)", len(jobs.Items), err)
	}
	if err := hub.List(context.Background(), &jobs, client.InNamespace(s.ns), client.MatchingLabels{rollout.LabelComponent: rollout.ComponentShardCheck}); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("check Jobs in the hub: %d (%v)", len(jobs.Items), err)
	}
}

var batchJobList = schemaGVK("batch", "v1", "JobList")
