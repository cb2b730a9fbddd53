//go:build e2e

package multicluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/spoke"
	"github.com/schemagate/schemagate/test/realstack"
)

// S-37, S-39 and the rest of the failure model on one RoutingService, v1 → v2 with a migration:
//
//  1. partition: eu-west-1's API server becomes unreachable from the hub as its step starts; the
//     shard is not counted, nothing in any region changes, ap-south does not start, and the
//     conditions name the cluster; when the link returns the rollout goes on;
//  2. the hub is gone: mid-rollout of the next revision, the hub's kube-apiserver and the manager
//     stop for 20 s; every region's routers keep answering and no ReplicaSet in any region
//     changes; when the hub returns the rollout resumes and nothing is re-created;
//  3. a spoke another hub manages is not written until a takeover is asked for;
//  4. revoked credentials give CredentialsRefused naming the Secret; rotated ones are used
//     without a restart;
//  5. deletion with a region unreachable removes the reachable regions' ReplicaSets and, after
//     the cleanup timeout, lets the RoutingService go, leaving the unreachable region serving.
func TestClusterShardsFailureModel(t *testing.T) {
	s := newStory(t, "mc-fail")
	ctx := context.Background()
	eu := f.Region("eu-west-1")

	// 1. Partition, with 20 requests per second per region throughout v1 → v2.
	gen := s.startTraffic()
	s.update(realstack.ToSchema2(s.db, 0))
	s.wait(3*time.Minute, "eu-west starts its step", func(r *routingv1alpha1.RoutingService) bool {
		return shardOf(r, "eu-west").Step == routingv1alpha1.ShardStepProgressing
	})
	eu.Proxy.Cut()
	s.wait(60*time.Second, "eu-west-1 unreachable", func(r *routingv1alpha1.RoutingService) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "eu-west-1")
	})
	time.Sleep(3 * time.Second) // a write in flight when the link went lands or fails
	before := s.snapshot()
	for i := 0; i < 20; i++ {
		time.Sleep(time.Second)
		if now := s.snapshot(); fmt.Sprint(now) != fmt.Sprint(before) {
			t.Fatalf("S-37: ReplicaSets changed while eu-west-1 was unreachable:\nbefore %v\nnow    %v", before, now)
		}
	}
	rsvc := s.get()
	if ss := shardOf(rsvc, "eu-west"); ss.Cluster == nil || ss.Cluster.State != routingv1alpha1.ClusterUnreachable {
		t.Fatalf("eu-west status %+v", ss)
	}
	if ss := shardOf(rsvc, "ap-south"); ss.Step != routingv1alpha1.ShardStepPending {
		t.Fatalf("ap-south started while eu-west was unreachable: %+v", ss)
	}
	if c := meta.FindStatusCondition(rsvc.Status.Conditions, routingv1alpha1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready %+v", c)
	}
	eu.Proxy.Restore()
	s.waitReady(3 * time.Minute)
	if rsvc := s.get(); rsvc.Status.Failure != nil {
		t.Fatalf("the partition failed the rollout: %+v", rsvc.Status.Failure)
	}
	rep := gen.Stop()
	var table strings.Builder
	rep.Table(&table, "v1 → v2, eu-west-1 partitioned mid-step")
	t.Logf("partition, 20 requests/s per region:\n%s", table.String())
	noneFailed(t, "partition", rep)

	// 2. The hub is gone mid-rollout of the next revision.
	s.update(func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Args = append(r.Spec.Template.Spec.Containers[0].Args, "--refresh=400ms")
	})
	s.wait(3*time.Minute, "us-east promoted", func(r *routingv1alpha1.RoutingService) bool {
		ss := shardOf(r, "us-east")
		return ss.Step == routingv1alpha1.ShardStepPromoted && ss.StepRevision == r.Status.UpdateRevision && r.Status.ObservedGeneration == r.Generation
	})
	gen = s.startTraffic()
	time.Sleep(2 * time.Second) // measured: 2 s of traffic before the hub goes, for the table
	goneAt := time.Now()
	manager.Stop(10 * time.Second)
	f.Hub.StopAPIServer()
	before = s.snapshot()
	minAnswering := map[string]int{}
	for i := 0; i < 20; i++ {
		time.Sleep(time.Second)
		if now := s.snapshot(); fmt.Sprint(now) != fmt.Sprint(before) {
			t.Fatalf("S-39: ReplicaSets changed in a region with the hub gone:\nbefore %v\nnow    %v", before, now)
		}
		got := s.answering()
		for _, r := range f.Regions {
			if _, seen := minAnswering[r.Name]; !seen || got[r.Name] < minAnswering[r.Name] {
				minAnswering[r.Name] = got[r.Name]
			}
		}
	}
	for _, r := range f.Regions {
		if minAnswering[r.Name] < 2 {
			t.Fatalf("S-39: with the hub gone, %s had %d routers answering at worst (want 2): %v", r.Name, minAnswering[r.Name], minAnswering)
		}
	}
	t.Logf("hub gone 20 s: fewest routers answering per region %v; no ReplicaSet changed", minAnswering)
	backAt := time.Now()
	time.Sleep(2 * time.Second) // measured: 2 s of traffic after, for the table
	rep = gen.Stop()
	table.Reset()
	rep.Table(&table, "the hub's kube-apiserver and manager gone 20 s")
	table.WriteString("\n")
	rep.SecondsTable(&table, goneAt, backAt)
	t.Logf("hub gone, 20 requests/s per region (routers' route refresh 400 ms):\n%s", table.String())
	noneFailed(t, "hub gone", rep)
	if err := f.Hub.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if err := startManager(); err != nil {
		t.Fatal(err)
	}
	s.waitReady(3 * time.Minute)
	after := s.snapshot()
	for region, lines := range before {
		for _, line := range strings.Split(lines, "; ") {
			uid := strings.Fields(line)[1]
			if !strings.Contains(after[region], uid) {
				t.Fatalf("S-39: ReplicaSet %q in %s was re-created or deleted after the hub returned: %s", line, region, after[region])
			}
		}
	}

	// 3. Another hub's spoke: eu-west-1's anchor is rewritten as another hub's.
	anchorKey := client.ObjectKey{Namespace: s.ns, Name: spoke.AnchorName("rs-a")}
	// The manager writes the anchor too (its status keys): read and write again on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := regions[eu.Name].Get(ctx, anchorKey, cm); err != nil {
			return err
		}
		cm.Data[spoke.KeyHub] = "hub-b"
		return regions[eu.Name].Update(ctx, cm)
	}); err != nil {
		t.Fatal(err)
	}
	s.wait(60*time.Second, "ManagedByAnotherHub", func(r *routingv1alpha1.RoutingService) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		return c != nil && c.Reason == routingv1alpha1.ReasonManagedByAnotherHub && strings.Contains(c.Message, "hub-b")
	})
	s.update(func(r *routingv1alpha1.RoutingService) { r.Spec.Shards[1].Replicas = 3 })
	// Once the manager has planned on the new spec, every poll for 5 s finds eu-west-1 as it
	// was: the first scale of a spoke another hub manages fails the test.
	s.wait(60*time.Second, "the scale-up observed", func(r *routingv1alpha1.RoutingService) bool {
		return r.Status.ObservedGeneration == r.Generation
	})
	for until := time.Now().Add(5 * time.Second); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
		if got := euReplicas(t, s.ns); got != 2 {
			t.Fatalf("a spoke another hub manages was scaled to %d", got)
		}
	}
	s.update(func(r *routingv1alpha1.RoutingService) {
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations[routingv1alpha1.AnnotationTakeover] = "hub-b"
	})
	s.waitReady(2 * time.Minute)
	if got := euReplicas(t, s.ns); got != 3 {
		t.Fatalf("after the takeover eu-west runs %d replicas, want 3", got)
	}
	cm := &corev1.ConfigMap{}
	if err := regions[eu.Name].Get(ctx, anchorKey, cm); err != nil || cm.Data[spoke.KeyHub] != hubID || cm.Data[spoke.KeyTakenOverFrom] != "hub-b" {
		t.Fatalf("anchor after the takeover: %v %v", cm.Data, err)
	}

	// 4. Credentials revoked, then rotated.
	if err := s.creds[eu.Name].Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	s.wait(90*time.Second, "CredentialsRefused", func(r *routingv1alpha1.RoutingService) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionClustersReachable)
		return c != nil && c.Reason == routingv1alpha1.ReasonCredentialsRefused && strings.Contains(c.Message, eu.Name+"-kubeconfig")
	})
	fresh, err := eu.SpokeCredentials(ctx, s.ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.WriteSecret(ctx, f.Hub.Client, s.ns, eu.Name); err != nil {
		t.Fatal(err)
	}
	s.waitReady(2 * time.Minute)

	// 5. Deletion with ap-south-1 unreachable.
	ap := f.Region("ap-south-1")
	ap.Proxy.Cut()
	s.wait(60*time.Second, "ap-south-1 unreachable", func(r *routingv1alpha1.RoutingService) bool {
		return shardOf(r, "ap-south").Cluster != nil && shardOf(r, "ap-south").Cluster.State == routingv1alpha1.ClusterUnreachable
	})
	if err := hub.Delete(ctx, s.get()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := hub.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "rs-a"}, &routingv1alpha1.RoutingService{})
		if client.IgnoreNotFound(err) == nil && err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the RoutingService was not deleted within 90 s with a region unreachable (the finalizer must give up)")
		}
		time.Sleep(time.Second)
	}
	for _, r := range f.Regions {
		var list appsv1.ReplicaSetList
		end := time.Now().Add(30 * time.Second)
		for {
			if err := regions[r.Name].List(ctx, &list, client.InNamespace(s.ns)); err != nil {
				t.Fatal(err)
			}
			if r.Name == ap.Name || len(list.Items) == 0 || time.Now().After(end) {
				break
			}
			time.Sleep(time.Second)
		}
		switch {
		case r.Name == ap.Name && len(list.Items) == 0:
			t.Fatal("the unreachable region's ReplicaSets were removed")
		case r.Name != ap.Name && len(list.Items) != 0:
			t.Fatalf("%s keeps %d ReplicaSets after the deletion", r.Name, len(list.Items))
		}
	}
	ap.Proxy.Restore()
}

func euReplicas(t *testing.T, ns string) int32 {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := regions["eu-west-1"].List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, rs := range list.Items {
		n += *rs.Spec.Replicas
	}
	return n
}
