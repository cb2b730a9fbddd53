package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// A deletion that waits for a cluster it cannot reach says so once per set of clusters, not on
// every 5 s retry (the time left used to change the text, so every retry was a new Event); past
// the cleanup timeout it says the cleanup was abandoned, once, and lets the deletion go. A
// reconciler without a recorder records nothing and does not panic.
func TestSpokeCleanupPendingOncePerClusterSet(t *testing.T) {
	for _, withRecorder := range []bool{true, false} {
		ctx := context.Background()
		rsvc := story.Fixture("ns")
		withUID(rsvc)
		rsvc.Spec.Shards[1].Cluster = &routingv1alpha1.ShardCluster{Name: "eu"}
		rsvc.Finalizers = []string{routingv1alpha1.FinalizerClusters}
		deleted := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		rsvc.DeletionTimestamp = &metav1.Time{Time: deleted}
		c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(rsvc).Build()
		clock := clocktesting.NewFakePassiveClock(deleted)
		rec := &recorded{}
		r := &RoutingServiceReconciler{Client: c, Clock: clock, SpokeCleanupTimeout: 5 * time.Minute} // no Spokes: eu cannot be reached
		if withRecorder {
			r.Recorder = rec
		}
		// Every 5 s for 5 minutes, as the requeue asks.
		for at := time.Duration(0); at < 5*time.Minute; at += 5 * time.Second {
			clock.SetTime(deleted.Add(at))
			res, err := r.finalizeSpokes(ctx, rsvc)
			if err != nil || res.RequeueAfter == 0 {
				t.Fatalf("at %s: %v %+v, want a retry", at, err, res)
			}
		}
		clock.SetTime(deleted.Add(5 * time.Minute))
		if _, err := r.finalizeSpokes(ctx, rsvc); err != nil {
			t.Fatal(err)
		}
		var got routingv1alpha1.RoutingService
		if err := c.Get(ctx, client.ObjectKeyFromObject(rsvc), &got); err == nil && len(got.Finalizers) != 0 {
			t.Fatalf("finalizers %v after the timeout", got.Finalizers)
		}
		if !withRecorder {
			continue
		}
		if n, m := rec.count(EventSpokeCleanupPending), rec.count(EventSpokeCleanupAbandoned); n != 1 || m != 1 {
			t.Fatalf("%d %s and %d %s Events over 61 retries, want 1 and 1 (%s)", n, EventSpokeCleanupPending, m, EventSpokeCleanupAbandoned, strings.Join(rec.reasons, ","))
		}
	}
}
