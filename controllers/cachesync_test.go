package controllers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

func TestWrittenVersionsSkipsOnlyTheReplacedVersion(t *testing.T) {
	var w writtenVersions
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "edge"}
	if w.stale(key, "10", now) {
		t.Fatal("nothing written: nothing is stale")
	}
	w.wrote(key, "10", "11", now)
	if !w.stale(key, "10", now) || !w.stale(key, "10", now.Add(time.Second)) {
		t.Fatal("the cache still serving the replaced version 10 must be stale, for as long as it does")
	}
	if w.stale(types.NamespacedName{Namespace: "ns", Name: "other"}, "10", now) {
		t.Fatal("another RoutingService's version is not stale")
	}
	if w.stale(key, "11", now) {
		t.Fatal("the cache moved past the write: not stale")
	}
	if w.stale(key, "10", now) {
		t.Fatal("once the cache moved on, the record is cleared (a restored object may reuse nothing, but never skip twice)")
	}
	w.wrote(key, "12", "13", now)
	w.forget(key)
	if w.stale(key, "12", now) {
		t.Fatal("forgotten RoutingService still skipped")
	}
}

// A status write the server answered with the version it replaced stored nothing: no watch event
// will come, so nothing may be skipped for it. A write whose watch event never arrives is skipped
// for at most maxCacheLag.
func TestWrittenVersionsNeverSkipForever(t *testing.T) {
	var w writtenVersions
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "edge"}
	w.wrote(key, "10", "10", now)
	if w.stale(key, "10", now) {
		t.Fatal("a write the server stored as a no-op (same resourceVersion back) must not make its version stale")
	}
	w.wrote(key, "10", "", now)
	if w.stale(key, "10", now) {
		t.Fatal("a write with no resourceVersion in its answer must not make its version stale")
	}
	w.wrote(key, "10", "11", now)
	if !w.stale(key, "10", now.Add(maxCacheLag-time.Second)) {
		t.Fatal("within maxCacheLag the replaced version is stale")
	}
	if w.stale(key, "10", now.Add(maxCacheLag)) {
		t.Fatalf("after %s the skip must end, whatever the cache serves", maxCacheLag)
	}
	w.wrote(key, "20", "21", now)
	if w.stale(key, "20", now.Add(-time.Hour)) {
		t.Fatal("a clock that went back must not extend the skip")
	}
}

// The reconciler end to end on a client whose status writes the server stores as no-ops (it
// answers with the same resourceVersion, as the API server does when the encoded object is
// unchanged): every later reconcile still runs, instead of waiting for a watch event that never
// comes.
func TestReconcileAfterANoOpStatusWriteIsNotSkipped(t *testing.T) {
	rsvc := story.Fixture("ns")
	var statusWrites atomic.Int32
	c := indexed(fake.NewClientBuilder().WithScheme(Scheme())).
		WithObjects(rsvc).WithStatusSubresource(rsvc).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				// The server stored nothing new: the object comes back as it was, same resourceVersion.
				statusWrites.Add(1)
				return c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			},
		}).Build()
	r := &RoutingServiceReconciler{Client: c, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "rs-a"}}
	for i := 1; i <= 3; i++ {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got := statusWrites.Load(); got != int32(i) {
			t.Fatalf("after %d reconciles, %d status writes: a reconcile was skipped for a write the server stored as a no-op", i, got)
		}
	}
}

// countingReader counts the Gets that go past the cache.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets.Add(1)
	return c.Reader.Get(ctx, key, obj, opts...)
}

// A reconcile on a cache that lacks the manager's own last status write is skipped, unless schema
// evidence waits: then it reads the RoutingService from the API server and decides at once,
// rather than waiting for the write's watch event.
func TestStaleCacheReadsPastItOnlyWhileEvidenceWaits(t *testing.T) {
	rsvc := story.Fixture("ns")
	var statusWrites atomic.Int32
	c := indexed(fake.NewClientBuilder().WithScheme(Scheme())).
		WithObjects(rsvc).WithStatusSubresource(rsvc).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				statusWrites.Add(1)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	api := &countingReader{Reader: c}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	r := &RoutingServiceReconciler{Client: c, APIReader: api, Clock: clocktesting.NewFakePassiveClock(now)}
	key := types.NamespacedName{Namespace: "ns", Name: "rs-a"}
	var cached routingv1alpha1.RoutingService
	if err := c.Get(context.Background(), key, &cached); err != nil {
		t.Fatal(err)
	}
	// The cache serves the version the manager's last write replaced.
	r.written.wrote(key, cached.ResourceVersion, "written-later", now)

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	if api.gets.Load() != 0 || statusWrites.Load() != 0 || res.RequeueAfter != staleCacheRecheck {
		t.Fatalf("no evidence waits: %d reads past the cache, %d status writes, requeue after %s; want 0, 0 and the skip's %s",
			api.gets.Load(), statusWrites.Load(), res.RequeueAfter, staleCacheRecheck)
	}

	r.gate.mark(key, now)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if api.gets.Load() != 1 {
		t.Fatalf("evidence waits: %d reads past the cache, want 1", api.gets.Load())
	}
	if statusWrites.Load() == 0 {
		t.Fatal("evidence waits: the reconcile was skipped instead of deciding on the object read past the cache")
	}
}
