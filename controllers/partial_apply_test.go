package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// A create that meets AlreadyExists (the object was created by an earlier reconcile the cache has
// not caught up with) records none of the plan's Events: MigrationStarted is said once, by the
// reconcile that created the migration Job, not again by one that decided on a stale cache.
func TestAlreadyExistsRecordsNoEvents(t *testing.T) {
	rsvc := story.Fixture("ns")
	const stale = true
	c := indexed(fake.NewClientBuilder().WithScheme(Scheme())).
		WithObjects(rsvc).WithStatusSubresource(rsvc).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := c.Create(ctx, obj, opts...); err != nil {
					return err
				}
				if _, job := obj.(*batchv1.Job); job && stale {
					// Created, but the answer is the one a create of an object that exists gets.
					return apierrors.NewAlreadyExists(batchv1.Resource("jobs"), obj.GetName())
				}
				return nil
			},
		}).Build()
	rec := &recorded{}
	r := &RoutingServiceReconciler{Client: c, Recorder: rec, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "rs-a"}}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	if err := c.List(context.Background(), &jobs); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("migration Jobs %d (%v), want the one the first reconcile made", len(jobs.Items), err)
	}
	if n := rec.count(rollout.EventMigrationStarted); n != 0 || res.RequeueAfter != time.Second {
		t.Fatalf("after AlreadyExists: %d MigrationStarted Events (%s), requeue %s; want none, and a look again in 1s", n, strings.Join(rec.reasons, ","), res.RequeueAfter)
	}
}
