package rollout

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// BenchmarkCompute measures one planner decision for RoutingServices of 3 and 50 shards (the CRD's
// maximum), mid-rollout: every shard has a stable and an update ReplicaSet, the first shard is
// progressing. Run with `make bench`.
func BenchmarkCompute(b *testing.B) {
	for _, shards := range []int{3, 50} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			rsvc := fixture()
			rsvc.Spec.Shards = nil
			for i := 0; i < shards; i++ {
				rsvc.Spec.Shards = append(rsvc.Spec.Shards, routingv1alpha1.ShardSpec{Name: fmt.Sprintf("shard-%d", i), Replicas: 10})
			}
			update := Revision(&rsvc.Spec)
			rsvc.Status.StableRevision = "stable0000"
			var rss []*appsv1.ReplicaSet
			for _, s := range rsvc.Spec.Shards {
				old := NewReplicaSet(rsvc, s, "stable0000", 10)
				old.Status = appsv1.ReplicaSetStatus{Replicas: 10, AvailableReplicas: 10}
				old.CreationTimestamp = metav1.Time{Time: time.Unix(1, 0)}
				rss = append(rss, old)
			}
			rss = append(rss, NewReplicaSet(rsvc, rsvc.Spec.Shards[0], update, 3))
			job := NewMigrationJob(rsvc, "1", 1)
			job.Status.Conditions = completeConditions()
			o := Observed{RoutingService: rsvc, ReplicaSets: rss, Jobs: []*batchv1.Job{job}, Now: time.Unix(100, 0)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = Compute(o)
			}
		})
	}
}
