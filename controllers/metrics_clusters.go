package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Shards in other clusters (spec.shards[].cluster, docs/clusters.md).
var (
	// clusterState: schemagate_shard_cluster_state{namespace, name, shard, cluster, state}: 1 for
	// each cluster shard's current state (Reachable, Connecting, Unreachable, CredentialsRefused,
	// ManagedElsewhere), as status.shards[].cluster.state says; one series per cluster shard.
	clusterState = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_shard_cluster_state",
		Help: "1 for the state of each shard's cluster (status.shards[].cluster.state): Reachable, Connecting, Unreachable, CredentialsRefused or ManagedElsewhere.",
	}, []string{"namespace", "name", "shard", "cluster", "state"})

	// clusterLastContact: schemagate_shard_cluster_last_contact_timestamp_seconds{namespace,
	// name, shard, cluster}: when the shard's cluster last answered (Unix seconds); absent until it
	// first has.
	clusterLastContact = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "schemagate_shard_cluster_last_contact_timestamp_seconds",
		Help: "When each shard's cluster last answered the manager, in Unix seconds (status.shards[].cluster.lastContactTime).",
	}, []string{"namespace", "name", "shard", "cluster"})
)

func init() {
	metrics.Registry.MustRegister(clusterState, clusterLastContact)
}

// recordClusterMetrics replaces rsvc's cluster series with those of the status it wrote.
func recordClusterMetrics(rsvc *routingv1alpha1.RoutingService, shards []routingv1alpha1.ShardStatus) {
	forgetClusterMetrics(rsvc.Namespace, rsvc.Name)
	for _, ss := range shards {
		c := ss.Cluster
		if c == nil {
			continue
		}
		clusterState.WithLabelValues(rsvc.Namespace, rsvc.Name, ss.Name, c.Name, string(c.State)).Set(1)
		if c.LastContactTime != nil {
			clusterLastContact.WithLabelValues(rsvc.Namespace, rsvc.Name, ss.Name, c.Name).Set(float64(c.LastContactTime.Unix()))
		}
	}
}

func forgetClusterMetrics(namespace, name string) {
	clusterState.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	clusterLastContact.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}
