package rollout

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxFieldsBytes bounds the managedFields entry ReplicasWriter parses: the API server bounds an
// object's size, and an entry beyond this owns far more than a replica count.
const maxFieldsBytes = 64 << 10

// ReplicasWriter is the newest managedFields entry that owns spec.replicas (the zero entry when
// none does). An entry that does not parse, or is over maxFieldsBytes, is skipped: managedFields
// are read from the cluster and untrusted.
func ReplicasWriter(entries []metav1.ManagedFieldsEntry) metav1.ManagedFieldsEntry {
	var out metav1.ManagedFieldsEntry
	found := false
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		raw := e.FieldsV1.GetRawBytes()
		if len(raw) > maxFieldsBytes {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(raw, &fields) != nil {
			continue
		}
		if _, ok := fields.Spec["f:replicas"]; !ok {
			continue
		}
		if !found || (e.Time != nil && (out.Time == nil || out.Time.Before(e.Time))) {
			out, found = e, true
		}
	}
	return out
}

// foreignScale says who scaled rs through its /scale subresource, when that is the last write of
// its spec.replicas (schemagate never writes a ReplicaSet's /scale; a HorizontalPodAutoscaler or
// kubectl scale pointed at it does): "" otherwise.
func foreignScale(rs *appsv1.ReplicaSet) string {
	if e := ReplicasWriter(rs.ManagedFields); e.Subresource == "scale" {
		return e.Manager
	}
	return ""
}

// reportForeignScale records a Warning Event when schemagate is about to set back the replicas of
// a ReplicaSet that someone else scaled through /scale: the other writer is named, so a
// HorizontalPodAutoscaler pointed at a shard's ReplicaSet does not fight the manager unseen.
func (p *planner) reportForeignScale(shard string, rs *appsv1.ReplicaSet, to int32) {
	who := foreignScale(rs)
	if who == "" {
		return
	}
	what := fmt.Sprintf("spec.shards[].replicas says %d", to)
	if p.scaling[shard] != nil {
		what = fmt.Sprintf("the shard's RoutingShard %s says %d", p.scaling[shard].RoutingShard, to)
	}
	p.event(true, EventReplicasOverwritten, "ReplicaSet %s of shard %s was scaled to %d by %s through /scale; schemagate owns that number (%s) and sets it back. To let an autoscaler size the shard, set spec.shards[].autoscaling and point it at the shard's RoutingShard (docs/autoscaling.md)",
		rs.Name, shard, replicasOf(rs), who, what)
}
