package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
	"github.com/schemagate/schemagate/test/story"
)

// spokeKubeconfig is a kubeconfig for a user of the suite's API server (a client certificate,
// inlined as schemagate requires), to stand for a region cluster: the stories' spoke is another
// namespace of the same API server, reached only through that Secret.
func spokeKubeconfig(t *testing.T) []byte {
	t.Helper()
	u, err := testEnv.AddUser(envtest.User{Name: "spoke-" + t.Name(), Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// steadyWithEUInASpoke creates rs-a in a namespace of its own with eu-west in cluster "eu" (the
// Secret eu-kubeconfig, a spoke namespace sharing the hub's database) and waits until it is Ready.
func steadyWithEUInASpoke(t *testing.T) (ns, spokeNS string, secret *corev1.Secret) {
	t.Helper()
	ns, spokeNS = kit.NewNamespace(t), kit.NewNamespace(t)
	fake.setDatabase(spokeNS, "1", false) // one database for both clusters
	secret = createWithEUIn(t, ns, spokeNS, spokeKubeconfig(t))
	kit.WaitReady(t, ns, 60*time.Second)
	return ns, spokeNS, secret
}

// createWithEUIn creates, in ns, the Secret eu-kubeconfig holding kubeconfig, and rs-a with
// eu-west in cluster "eu" (namespace spokeNS there), and returns the Secret.
func createWithEUIn(t *testing.T, ns, spokeNS string, kubeconfig []byte) *corev1.Secret {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu-kubeconfig"},
		Data: map[string][]byte{"value": kubeconfig}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rsvc := story.Fixture(ns)
	rsvc.Spec.Shards[1].Cluster = &routingv1alpha1.ShardCluster{Name: "eu", Namespace: spokeNS}
	if err := k8s.Create(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	return secret
}

// spokeReplicaSets lists rs-a's ReplicaSets in the spoke namespace.
func spokeReplicaSets(t *testing.T, ns string) []appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{rollout.LabelName: "rs-a"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// A shard in another cluster, through the API server: eu-west names cluster "eu" (Secret
// eu-kubeconfig); its ReplicaSets are created there, controlled by the anchor ConfigMap, never in
// the hub's namespace, and the shard counts towards Ready like any other. A deleted Secret is
// CredentialsRefused (named), Ready goes False and nothing serving changes; the Secret back, the
// shard is Reachable again. Deleting the RoutingService removes the anchor (the finalizer), so
// the garbage collector of that cluster takes the ReplicaSets with it.
func TestStoryShardInAnotherCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS, secret := steadyWithEUInASpoke(t)
	story.Eventually(t, 10*time.Second, "ClustersReachable", kit.HasCondition(t, ns, routingv1alpha1.ConditionClustersReachable, metav1.ConditionTrue, routingv1alpha1.ReasonClustersReachable))

	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Labels[rollout.LabelShard] == "eu-west" {
			t.Fatalf("eu-west ReplicaSet %s in the hub's namespace", rs.Name)
		}
	}
	anchor := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: spoke.AnchorName("rs-a")}, anchor); err != nil {
		t.Fatalf("anchor: %v", err)
	}
	if a := spoke.ReadAnchor(anchor); a.Hub != hubID || a.UID != kit.Get(t, ns).UID {
		t.Fatalf("anchor %+v, want hub %s and the RoutingService's UID", a, hubID)
	}
	spokeRS := spokeReplicaSets(t, spokeNS)
	if len(spokeRS) != 1 || spokeRS[0].Labels[rollout.LabelShard] != "eu-west" || spokeRS[0].Status.AvailableReplicas != 3 {
		t.Fatalf("spoke ReplicaSets %v", spokeRS)
	}
	if ref := metav1.GetControllerOf(&spokeRS[0]); ref == nil || ref.UID != anchor.UID {
		t.Fatalf("spoke ReplicaSet controlled by %+v, want the anchor", ref)
	}
	// The shard's budget is in its cluster, controlled by the anchor; the hub has none for it.
	story.Eventually(t, 10*time.Second, "eu-west's budget in the spoke", func() error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: rollout.DisruptionBudgetName("rs-a", "eu-west")}, pdb); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(pdb); ref == nil || ref.UID != anchor.UID {
			return fmt.Errorf("budget controlled by %+v, want the anchor", ref)
		}
		return nil
	})
	for _, p := range budgets(t, ns) {
		if p.Labels[rollout.LabelShard] == "eu-west" {
			t.Fatalf("eu-west's budget %s is in the hub", p.Name)
		}
	}
	got := kit.Get(t, ns)
	if ss := shardStatusOf(got, "eu-west"); ss == nil || ss.Cluster == nil || ss.Cluster.State != routingv1alpha1.ClusterReachable || ss.Cluster.LastContactTime == nil {
		t.Fatalf("eu-west status %+v", ss)
	}
	if !slices.Contains(got.Finalizers, routingv1alpha1.FinalizerClusters) {
		t.Fatalf("finalizers %v", got.Finalizers)
	}

	// The Secret is gone: refused, named, and nothing serving changes.
	if err := k8s.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "CredentialsRefused", func() error {
		c := meta.FindStatusCondition(kit.Get(t, ns).Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != routingv1alpha1.ReasonCredentialsRefused || !strings.Contains(c.Message, "eu-kubeconfig") {
			return fmt.Errorf("ClustersReachable %+v", c)
		}
		return nil
	})
	story.Eventually(t, 10*time.Second, "Ready False", kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsRefused))
	if rs := spokeReplicaSets(t, spokeNS); len(rs) != 1 || *rs[0].Spec.Replicas != 3 {
		t.Fatalf("spoke ReplicaSets changed: %v", rs)
	}

	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu-kubeconfig"},
		Data: map[string][]byte{"value": spokeKubeconfig(t)}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "Reachable again", kit.HasCondition(t, ns, routingv1alpha1.ConditionClustersReachable, metav1.ConditionTrue, routingv1alpha1.ReasonClustersReachable))
	kit.WaitReady(t, ns, 30*time.Second)

	// Deletion: the anchor goes, then the finalizer.
	if err := k8s.Delete(ctx, kit.Get(t, ns)); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "the RoutingService and its anchor gone", func() error {
		if err := k8s.Get(ctx, kitKey(ns), &routingv1alpha1.RoutingService{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("RoutingService: %v", err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(anchor), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("anchor: %v", err)
		}
		return nil
	})
}

func shardStatusOf(r *routingv1alpha1.RoutingService, shard string) *routingv1alpha1.ShardStatus {
	for i := range r.Status.Shards {
		if r.Status.Shards[i].Name == shard {
			return &r.Status.Shards[i]
		}
	}
	return nil
}

// A shard moved out of its cluster (its cluster field removed): it is started in the hub, and
// once the rollout is complete there, what it ran in the cluster is removed (its ReplicaSets,
// its budget, then the anchor, since no shard uses that namespace any more), and
// schemagate.io/clusters-used no longer lists it.
func TestStoryShardMovedOutOfACluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS, _ := steadyWithEUInASpoke(t)
	if got := kit.Get(t, ns).Annotations[routingv1alpha1.AnnotationClustersUsed]; !strings.Contains(got, spokeNS) {
		t.Fatalf("clusters-used %q does not name the spoke namespace", got)
	}
	if len(spokeReplicaSets(t, spokeNS)) != 1 {
		t.Fatalf("spoke ReplicaSets %v", spokeReplicaSets(t, spokeNS))
	}

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Shards[1].Cluster = nil })
	story.Eventually(t, 60*time.Second, "eu-west in the hub, the spoke cleaned up", func() error {
		hubEU := 0
		for _, rs := range kit.ReplicaSets(t, ns) {
			if rs.Labels[rollout.LabelShard] == "eu-west" && rs.Status.AvailableReplicas == 3 {
				hubEU++
			}
		}
		if hubEU != 1 {
			return fmt.Errorf("%d available eu-west ReplicaSets in the hub", hubEU)
		}
		if left := spokeReplicaSets(t, spokeNS); len(left) > 0 {
			return fmt.Errorf("%d ReplicaSets left in the spoke", len(left))
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: spoke.AnchorName("rs-a")}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("anchor: %v", err)
		}
		if got := kit.Get(t, ns).Annotations[routingv1alpha1.AnnotationClustersUsed]; got != "" {
			return fmt.Errorf("clusters-used still %q", got)
		}
		return nil
	})
	kit.WaitReady(t, ns, 10*time.Second)
}

// A shard moved into a cluster (a cluster field added) while a job check is declared: its
// ReplicaSet is created in the cluster, controlled by the anchor, and once the whole
// RoutingService has been Ready for a while, the ReplicaSets it ran in the hub are deleted (Event
// ShardMovedOut), and the other shards' are not. The next revision's check Job for that shard
// runs in the cluster, controlled by the anchor, and no Job of the shard is created in the hub.
func TestStoryShardMovedIntoACluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS := kit.NewNamespace(t), kit.NewNamespace(t)
	fake.setDatabase(spokeNS, "1", false)
	rsvc := story.Fixture(ns)
	rsvc.Spec.Strategy.Checks = []routingv1alpha1.ShardCheck{jobCheck("smoke", "verify:ok")}
	if err := k8s.Create(ctx, rsvc); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu-kubeconfig"},
		Data: map[string][]byte{"value": spokeKubeconfig(t)}}); err != nil {
		t.Fatal(err)
	}
	hubEUBefore := map[string]bool{}
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Labels[rollout.LabelShard] == "eu-west" {
			hubEUBefore[rs.Name] = true
		}
	}
	if len(hubEUBefore) == 0 {
		t.Fatal("no eu-west ReplicaSet in the hub before the move")
	}
	hubJobsBefore := map[string]bool{}
	for _, j := range jobsIn(t, ns) {
		hubJobsBefore[j.Name] = true
	}

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Shards[1].Cluster = &routingv1alpha1.ShardCluster{Name: "eu", Namespace: spokeNS}
	})
	story.Eventually(t, 90*time.Second, "eu-west served from the spoke, its hub ReplicaSets gone", func() error {
		got := kit.Get(t, ns)
		if c := meta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != got.Generation {
			return fmt.Errorf("Ready %+v", c)
		}
		spokeRS := spokeReplicaSets(t, spokeNS)
		if len(spokeRS) != 1 || spokeRS[0].Status.AvailableReplicas != 3 {
			return fmt.Errorf("spoke ReplicaSets %d", len(spokeRS))
		}
		for _, rs := range kit.ReplicaSets(t, ns) {
			if rs.Labels[rollout.LabelShard] == "eu-west" && rs.DeletionTimestamp == nil {
				return fmt.Errorf("eu-west ReplicaSet %s still in the hub", rs.Name)
			}
		}
		return nil
	})
	// The next revision: eu-west's check runs in its cluster.
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Template.Spec.Containers[0].Image = "app:v2" })
	update := rollout.Revision(&kit.Get(t, ns).Spec)
	story.Eventually(t, 60*time.Second, "v2 everywhere", func() error {
		if err := kit.ServingIs(t, ns, "us-east=app:v2:3/3 ap-south=app:v2:3/3")(); err != nil {
			return err
		}
		for _, rs := range spokeReplicaSets(t, spokeNS) {
			if rs.Labels[rollout.LabelRevision] == update && rs.Status.AvailableReplicas == 3 {
				return kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)()
			}
		}
		return fmt.Errorf("eu-west not on %s in the spoke", update)
	})
	anchor := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: spoke.AnchorName("rs-a")}, anchor); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobsIn(t, ns) {
		if !hubJobsBefore[j.Name] && j.Labels[rollout.LabelShard] == "eu-west" {
			t.Fatalf("eu-west Job %s created in the hub after the move", j.Name)
		}
	}
	spokeJobs := jobsIn(t, spokeNS)
	checked := false
	for _, j := range spokeJobs {
		if ref := metav1.GetControllerOf(&j); ref == nil || ref.UID != anchor.UID {
			t.Fatalf("spoke Job %s controlled by %+v, want the anchor", j.Name, ref)
		}
		if j.Labels[rollout.LabelShard] == "eu-west" && j.Labels[rollout.LabelRevision] == update && j.Labels[rollout.LabelCheck] == "smoke" {
			checked = true
		}
	}
	if !checked {
		t.Fatalf("no smoke check Job of revision %s in the spoke (%d Jobs there)", update, len(spokeJobs))
	}
	if ss := shardStatusOf(kit.Get(t, ns), "eu-west"); ss == nil || len(ss.Checks) != 1 || ss.Checks[0].Phase != routingv1alpha1.CheckPhasePassed {
		t.Fatalf("eu-west checks %+v", ss)
	}
	// The other shards keep theirs in the hub.
	story.Eventually(t, 10*time.Second, "ShardMovedOut", func() error {
		if !slices.Contains(kit.EventsFor(t, ns), "ShardMovedOut") {
			return fmt.Errorf("events %v", kit.EventsFor(t, ns))
		}
		return nil
	})
	others := 0
	for _, rs := range kit.ReplicaSets(t, ns) {
		if s := rs.Labels[rollout.LabelShard]; (s == "us-east" || s == "ap-south") && rs.Status.AvailableReplicas == 3 {
			others++
		}
	}
	if others != 2 {
		t.Fatalf("%d available us-east and ap-south ReplicaSets in the hub, want 2", others)
	}
}

// jobsIn lists rs-a's Jobs in namespace ns.
func jobsIn(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{rollout.LabelName: "rs-a"}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// spokeServing is what rs-a's ReplicaSets in the spoke namespace serve: "image:replicas/available"
// of each with replicas, sorted.
func spokeServing(t *testing.T, ns string) string {
	t.Helper()
	var out []string
	for _, rs := range spokeReplicaSets(t, ns) {
		if n := *rs.Spec.Replicas; n > 0 {
			out = append(out, fmt.Sprintf("%s:%d/%d", rs.Spec.Template.Spec.Containers[0].Image, n, rs.Status.AvailableReplicas))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// The three controls on a shard in another cluster: promote ends us-east's bake so eu-west (in
// the spoke) starts; abort while eu-west bakes rolls back what the rollout touched, in both
// clusters (eu-west's v1 ReplicaSet in the spoke back to 3, its v2 to 0; us-east in the hub), and
// the handled value is recorded on the spoke's ReplicaSets too; retry resumes the rollout, which
// completes in both.
func TestStoryControlsOnAShardInAnotherCluster(t *testing.T) {
	t.Parallel()
	ns, spokeNS, _ := steadyWithEUInASpoke(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
	})
	baking := func(shard string) func() error {
		return func() error {
			if ss := shardStatusOf(kit.Get(t, ns), shard); ss == nil || ss.Step != routingv1alpha1.ShardStepBaking {
				return fmt.Errorf("%s: %+v", shard, ss)
			}
			return nil
		}
	}
	story.Eventually(t, 60*time.Second, "us-east bakes v2", baking("us-east"))
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationPromote: "p1"}
	})
	story.Eventually(t, 60*time.Second, "eu-west bakes v2 in the spoke", func() error {
		if err := baking("eu-west")(); err != nil {
			return err
		}
		if got := spokeServing(t, spokeNS); got != "app:v2:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		return nil
	})

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Annotations[routingv1alpha1.AnnotationAbort] = "a1" })
	story.Eventually(t, 60*time.Second, "aborted, rolled back in both clusters", func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted)(); err != nil {
			return err
		}
		if err := kit.ServingIs(t, ns, "us-east=app:v1:3/3 ap-south=app:v1:3/3")(); err != nil {
			return err
		}
		if got := spokeServing(t, spokeNS); got != "app:v1:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		for _, rs := range spokeReplicaSets(t, spokeNS) {
			if got := rs.Annotations["schemagate.io/handled-abort"]; got != "a1" {
				return fmt.Errorf("spoke ReplicaSet %s records abort %q", rs.Name, got)
			}
		}
		return nil
	})

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations[routingv1alpha1.AnnotationRetry] = "r1"
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
	})
	story.Eventually(t, 90*time.Second, "retried: v2 everywhere", func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)(); err != nil {
			return err
		}
		if err := kit.ServingIs(t, ns, "us-east=app:v2:3/3 ap-south=app:v2:3/3")(); err != nil {
			return err
		}
		if got := spokeServing(t, spokeNS); got != "app:v2:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		return nil
	})
}

// The schema Jobs in a shard's cluster (spec.schema.runWithShard: eu-west, in cluster "eu"): the
// migration to schema 2 runs there, controlled by the anchor, and none in the hub; the rollout
// completes. Then the cluster's Secret goes (CredentialsRefused) with an update to schema 3: no
// migration Job is created anywhere, nothing serving changes, SchemaReady is False with the
// cluster's reason; the Secret back, the migration runs there once and the rollout completes.
func TestStorySchemaJobsInAShardsCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS, secret := steadyWithEUInASpoke(t)
	fake.share(spokeNS, ns)
	hubJobs := len(jobsIn(t, ns))
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Schema.RunWithShard = "eu-west"
		story.ToV2("app:v2", "migrate:ok")(r)
	})
	story.Eventually(t, 90*time.Second, "v2 everywhere, migrated in the spoke", func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)(); err != nil {
			return err
		}
		if got := spokeServing(t, spokeNS); got != "app:v2:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		return kit.ServingIs(t, ns, "us-east=app:v2:3/3 ap-south=app:v2:3/3")()
	})
	anchor := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: spoke.AnchorName("rs-a")}, anchor); err != nil {
		t.Fatal(err)
	}
	migrations := func(in string) []batchv1.Job {
		var out []batchv1.Job
		for _, j := range jobsIn(t, in) {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration {
				out = append(out, j)
			}
		}
		return out
	}
	spokeMigrations := migrations(spokeNS)
	if len(spokeMigrations) != 1 || spokeMigrations[0].Labels[rollout.LabelSchemaVersion] != "2" {
		t.Fatalf("migration Jobs in the spoke: %d", len(spokeMigrations))
	}
	if ref := metav1.GetControllerOf(&spokeMigrations[0]); ref == nil || ref.UID != anchor.UID {
		t.Fatalf("the spoke's migration Job is controlled by %+v, want the anchor", ref)
	}
	if n := len(jobsIn(t, ns)); n != hubJobs {
		t.Fatalf("%d Jobs in the hub, %d before: a schema Job ran there", n, hubJobs)
	}
	if got := kit.Get(t, ns).Status.Schema.ConfirmedBy; got != spokeMigrations[0].Name {
		t.Fatalf("status.schema.confirmedBy %q, want the spoke's Job %s", got, spokeMigrations[0].Name)
	}

	// The cluster's credentials go, and schema 3 is asked for.
	if err := k8s.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "CredentialsRefused", kit.HasCondition(t, ns, routingv1alpha1.ConditionClustersReachable, metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsRefused))
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v3"
		r.Spec.Schema.Version = "3"
	})
	story.Eventually(t, 20*time.Second, "SchemaReady held with the cluster's reason", kit.HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonCredentialsRefused))
	story.Consistently(t, 5*time.Second, "nothing created or changed", func() error {
		if n := len(migrations(spokeNS)) + len(migrations(ns)); n != 1+countMigrations(jobsIn(t, ns)) {
			return fmt.Errorf("%d migration Jobs", n)
		}
		if got := spokeServing(t, spokeNS); got != "app:v2:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		return kit.ServingIs(t, ns, "us-east=app:v2:3/3 ap-south=app:v2:3/3")()
	})
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu-kubeconfig"},
		Data: map[string][]byte{"value": spokeKubeconfig(t)}}); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 90*time.Second, "v3 everywhere, migrated in the spoke", func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)(); err != nil {
			return err
		}
		if got := spokeServing(t, spokeNS); got != "app:v3:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		return kit.ServingIs(t, ns, "us-east=app:v3:3/3 ap-south=app:v3:3/3")()
	})
	if got := migrations(spokeNS); len(got) != 2 {
		t.Fatalf("%d migration Jobs in the spoke, want 2 (schema 2, then 3)", len(got))
	}
	if n := len(jobsIn(t, ns)); n != hubJobs {
		t.Fatalf("%d Jobs in the hub, %d before", n, hubJobs)
	}
}

// countMigrations counts the migration Jobs among jobs.
func countMigrations(jobs []batchv1.Job) int {
	n := 0
	for _, j := range jobs {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration {
			n++
		}
	}
	return n
}

// S-21 in a spoke: a plain Job in the region cluster holds the name of the schema-2 migration
// Job, which spec.schema.runWithShard sends there. The conflict is looked up where the create
// failed, in the spoke: Stalled=True NameConflict naming the Job, not a create every second with
// no reason; the plain Job is left as it is.
func TestStoryNameTakenInASpoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS, _ := steadyWithEUInASpoke(t)
	fake.share(spokeNS, ns)
	name := rollout.MigrationJobName("rs-a", "2", 1)
	plain := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: spokeNS},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}},
	}
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Schema.RunWithShard = "eu-west"
		story.ToV2("app:v2", "migrate:ok")(r)
	})
	story.Eventually(t, 30*time.Second, "Stalled=True NameConflict", kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonNameConflict))
	if c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled); !strings.Contains(c.Message, name) {
		t.Fatalf("the condition does not name the Job: %s", c.Message)
	}
	var got batchv1.Job
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(plain), &got); err != nil || got.UID != plain.UID || metav1.GetControllerOf(&got) != nil {
		t.Fatalf("the plain Job in the spoke: %v %+v", err, got.OwnerReferences)
	}
	if got := kit.Serving(t, ns); !strings.Contains(got, "us-east=app:v1") {
		t.Fatalf("v2 started in the hub: %s", got)
	}
}

// Issue 42 item 7: where the schema Jobs run (spec.schema.runWithShard, and the cluster of the
// shard it names) cannot change while a migration Job runs: the API server refuses, naming the
// field. And when it changes anyway, because the status no longer says the Job runs (lost, or
// restored from a backup), the Job in the old place is still watched: no migration starts in the
// new place beside it, and its report is the evidence once it finishes.
func TestRunWithShardStaysWhileItsMigrationRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns, spokeNS, _ := steadyWithEUInASpoke(t)
	fake.share(spokeNS, ns)
	hubMigrations := countMigrations(jobsIn(t, ns)) // schema 1's
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Schema.RunWithShard = "eu-west"
		story.ToV2("app:v2", "migrate:manual")(r)
	})
	name := rollout.MigrationJobName("rs-a", "2", 1)
	story.Eventually(t, 20*time.Second, "the migration Job running in the spoke, as status says", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: spokeNS, Name: name}, &batchv1.Job{}); err != nil {
			return err
		}
		if s := kit.Get(t, ns).Status.Schema; s.MigrationJob != name || s.CompletionTime != nil {
			return fmt.Errorf("status.schema: migrationJob %q, completionTime %v", s.MigrationJob, s.CompletionTime)
		}
		return nil
	})
	moves := []struct {
		what   string
		mutate func(*routingv1alpha1.RoutingService)
	}{
		{"runWithShard cleared", func(r *routingv1alpha1.RoutingService) { r.Spec.Schema.RunWithShard = "" }},
		{"runWithShard to us-east", func(r *routingv1alpha1.RoutingService) { r.Spec.Schema.RunWithShard = "us-east" }},
		{"eu-west moved to another namespace", func(r *routingv1alpha1.RoutingService) { r.Spec.Shards[1].Cluster.Namespace = "elsewhere" }},
	}
	for _, m := range moves {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			r := kit.Get(t, ns)
			m.mutate(r)
			return k8s.Update(ctx, r)
		})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schema.runWithShard") || !strings.Contains(err.Error(), "while a migration or contract Job runs") {
			t.Fatalf("%s while the migration runs: %v, want Invalid naming spec.schema.runWithShard", m.what, err)
		}
	}

	// The status loses the running Job; the move is accepted then.
	story.Eventually(t, 20*time.Second, "runWithShard cleared with the status lost", func() error {
		loseStatus(t, ns)
		r := kit.Get(t, ns)
		r.Spec.Schema.RunWithShard = ""
		return k8s.Update(ctx, r)
	})
	story.Consistently(t, 5*time.Second, "no migration beside the one in the spoke", func() error {
		if n := countMigrations(jobsIn(t, ns)); n != hubMigrations {
			return fmt.Errorf("%d migration Jobs in the hub, %d before", n, hubMigrations)
		}
		if got := spokeServing(t, spokeNS); got != "app:v1:3/3" {
			return fmt.Errorf("spoke serves %q", got)
		}
		return kit.ServingIs(t, ns, "us-east=app:v1:3/3 ap-south=app:v1:3/3")()
	})
	finishAttempt(t, spokeNS, "2", 1, true)
	story.Eventually(t, 90*time.Second, "v2 everywhere, confirmed by the spoke's Job", func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)(); err != nil {
			return err
		}
		if got := kit.Get(t, ns).Status.Schema.ConfirmedBy; got != name {
			return fmt.Errorf("status.schema.confirmedBy %q, want the spoke's %s", got, name)
		}
		return kit.ServingIs(t, ns, "us-east=app:v2:3/3 ap-south=app:v2:3/3")()
	})
	if n := countMigrations(jobsIn(t, ns)); n != hubMigrations {
		t.Fatalf("%d migration Jobs in the hub, %d before", n, hubMigrations)
	}
}
