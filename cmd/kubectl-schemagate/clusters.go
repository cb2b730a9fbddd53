package main

import (
	"strings"
	"time"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// ClusterView is the cluster a shard runs in (spec.shards[].cluster), as status.shards[].cluster
// reports it. The shard's ReplicaSets and pods live in that cluster, so `get` (which reads the
// RoutingService's own cluster) does not list them.
type ClusterView struct {
	Name string `json:"name"`
	// Namespace is the namespace there (spec.shards[].cluster.namespace, default the
	// RoutingService's).
	Namespace string `json:"namespace"`
	// State is Reachable, Connecting, Unreachable, CredentialsRefused, ManagedElsewhere, or
	// Unknown while the status does not report this cluster yet.
	State            string     `json:"state"`
	Message          string     `json:"message,omitempty"`
	LastContact      *time.Time `json:"lastContactTime,omitempty"`
	LastContactAge   string     `json:"lastContactAge,omitempty"`
	UnreachableSince *time.Time `json:"unreachableSince,omitempty"`
	UnreachableFor   string     `json:"unreachableFor,omitempty"`
}

// clusterView is the cluster of shard (nil when it runs in the RoutingService's cluster): its name
// from the spec, its state from the status when the status reports that cluster.
func clusterView(r *routingv1alpha1.RoutingService, shard *routingv1alpha1.ShardSpec, ss *routingv1alpha1.ShardStatus, now time.Time) *ClusterView {
	if shard == nil || shard.Cluster == nil {
		return nil
	}
	v := &ClusterView{Name: shard.Cluster.Name, Namespace: shard.Cluster.NamespaceOr(r.Namespace), State: "Unknown",
		Message: "the status does not report this cluster yet"}
	if ss == nil || ss.Cluster == nil || ss.Cluster.Name != shard.Cluster.Name {
		return v
	}
	cs := ss.Cluster
	v.State, v.Message = string(cs.State), cs.Message
	if t := cs.LastContactTime; t != nil {
		u := t.UTC()
		v.LastContact, v.LastContactAge = &u, age(now, u)
	}
	if t := cs.UnreachableSince; t != nil {
		u := t.UTC()
		v.UnreachableSince, v.UnreachableFor = &u, age(now, u)
	}
	return v
}

// clusterColor: green while the cluster answers, red otherwise.
func clusterColor(state string) string {
	if state == string(routingv1alpha1.ClusterReachable) {
		return sgrGreen
	}
	return sgrRed
}

// clusterNode is the line under a shard that names its cluster: its state, the namespace there
// when it is not the RoutingService's, when it last answered, since when it does not, and why.
func clusterNode(c *ClusterView, rsvcNamespace string) *node {
	var parts []string
	if c.Namespace != rsvcNamespace {
		parts = append(parts, "namespace "+c.Namespace)
	}
	if c.LastContactAge != "" {
		parts = append(parts, "last contact "+c.LastContactAge+" ago")
	} else {
		parts = append(parts, "no contact yet")
	}
	if c.UnreachableFor != "" {
		parts[len(parts)-1] += ", not reachable for " + c.UnreachableFor
	}
	details := strings.Join(parts, "; ")
	if c.Message != "" && c.State != string(routingv1alpha1.ClusterReachable) {
		details += ": " + c.Message
	}
	details += "; its ReplicaSets and pods are there, not listed"
	return &node{cells: []cell{{text: "Cluster/" + c.Name}, {text: c.State, color: clusterColor(c.State)}, {text: details}, {text: ""}}}
}
