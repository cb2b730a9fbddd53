package controllers

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Release keeps a connection while any RoutingService's shards still name it, and stops it once
// none does: a removed shard, a renamed Secret or a deleted RoutingService leaves nothing probing
// a cluster. A stopped connection is marked closed, so a reconcile that had looked it up connects
// anew instead of using it.
func TestReleaseStopsIdleConnections(t *testing.T) {
	rsvc := func(name string, clusters ...string) *routingv1alpha1.RoutingService {
		r := &routingv1alpha1.RoutingService{}
		r.Namespace, r.Name = "team", name
		for _, c := range clusters {
			r.Spec.Shards = append(r.Spec.Shards, routingv1alpha1.ShardSpec{Name: c, Cluster: &routingv1alpha1.ShardCluster{Name: c}})
		}
		return r
	}
	a, b := rsvc("a", "eu", "us"), rsvc("b", "eu")
	s := &Spokes{conns: map[string]*spokeConn{}}
	stopped := map[string]bool{}
	conn := func(cluster string, users ...*routingv1alpha1.RoutingService) *spokeConn {
		key := connKey(a, a.Spec.Shards[0].Cluster)
		if cluster == "us" {
			key = connKey(a, a.Spec.Shards[1].Cluster)
		}
		_, cancel := context.WithCancel(context.Background())
		c := &spokeConn{key: key, users: map[types.NamespacedName]bool{}, cancel: func() { stopped[cluster] = true; cancel() }}
		for _, u := range users {
			c.users[types.NamespacedName{Namespace: u.Namespace, Name: u.Name}] = true
		}
		s.conns[key] = c
		return c
	}
	eu, us := conn("eu", a, b), conn("us", a)

	s.Release(types.NamespacedName{Namespace: "team", Name: "a"}, a)
	if s.connections() != 2 || stopped["eu"] || stopped["us"] {
		t.Fatalf("a still names both: %d connections, stopped %v", s.connections(), stopped)
	}
	a.Spec.Shards = a.Spec.Shards[:1] // us removed from a
	s.Release(types.NamespacedName{Namespace: "team", Name: "a"}, a)
	if !stopped["us"] || stopped["eu"] || s.connections() != 1 || !us.closed || eu.closed {
		t.Fatalf("us no longer named: stopped %v, %d connections", stopped, s.connections())
	}
	s.Release(types.NamespacedName{Namespace: "team", Name: "a"}, nil) // a deleted
	if stopped["eu"] || s.connections() != 1 {
		t.Fatalf("b still names eu: stopped %v", stopped)
	}
	s.Release(types.NamespacedName{Namespace: "team", Name: "b"}, nil)
	if !stopped["eu"] || s.connections() != 0 || !eu.closed {
		t.Fatalf("nobody names eu: stopped %v, %d connections", stopped, s.connections())
	}
}

// schemagate.io/clusters-used is untrusted: over its bound, not JSON, or with names that are not
// DNS labels, nothing (or only the valid entries) is read; what the spec names now is recorded
// and a removed shard's entry is retired.
func TestClustersUsed(t *testing.T) {
	r := &routingv1alpha1.RoutingService{}
	r.Namespace, r.Name = "team", "rs-a"
	r.Spec.Shards = []routingv1alpha1.ShardSpec{{Name: "us-east", Cluster: &routingv1alpha1.ShardCluster{Name: "us"}}}
	for name, raw := range map[string]string{
		"not JSON":       "{",
		"over the bound": `[{"shard":"eu-west","cluster":{"name":"eu","namespace":"team"}}]` + strings.Repeat(" ", maxClustersUsedBytes),
		"bad names":      `[{"shard":"EU WEST","cluster":{"name":"eu","namespace":"team"}},{"shard":"eu-west","cluster":{"name":"eu","namespace":"../x"}}]`,
		"bad secret":     `[{"shard":"eu-west","cluster":{"name":"eu","namespace":"team","secretRef":{"name":"a/b"}}}]`,
	} {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationClustersUsed: raw}
		if got := readClustersUsed(r); len(got) != 0 {
			t.Errorf("%s: read %+v", name, got)
		}
	}
	r.Annotations = map[string]string{routingv1alpha1.AnnotationClustersUsed: `[{"shard":"eu-west","cluster":{"name":"eu","namespace":"team"}},{"shard":"us-east","cluster":{"name":"us","namespace":"team"}}]`}
	retired := retiredClusters(r)
	if len(retired) != 1 || retired[0].Shard != "eu-west" {
		t.Fatalf("retired %+v, want eu-west only (us-east is still named, its namespace defaulted)", retired)
	}
	r.Spec.Shards[0].Cluster.Namespace = "other"
	if got := retiredClusters(r); len(got) != 2 {
		t.Fatalf("us-east moved to another namespace: retired %+v, want both", got)
	}
}
