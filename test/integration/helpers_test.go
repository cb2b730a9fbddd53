package integration

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// steadyV1 creates rs-a and waits until v1 serves every shard.
func steadyV1(t *testing.T) string {
	t.Helper()
	ns := kit.NewNamespace(t)
	if err := k8s.Create(context.Background(), story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v1 everywhere", kit.ServingIs(t, ns, story.AllV1))
	return ns
}

// finishJob finishes the first migration Job for version (a "manual" one) as the Job controller would.
func finishJob(t *testing.T, ns, version string, success bool) {
	t.Helper()
	finishAttempt(t, ns, version, 1, success)
}

// finishAttempt finishes the migration Job of (version, attempt).
func finishAttempt(t *testing.T, ns, version string, attempt int32, success bool) {
	t.Helper()
	name := rollout.MigrationJobName("rs-a", version, attempt)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		return fake.finish(context.Background(), j, success)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func kitKey(ns string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "rs-a"} }

// loseStatus empties rs-a's status, as a lost status or a restore without it would: on a fresh
// read, again when the manager wrote in between (a conflict under load).
func loseStatus(t *testing.T, ns string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r := &routingv1alpha1.RoutingService{}
		if err := k8s.Get(context.Background(), kitKey(ns), r); err != nil {
			return err
		}
		r.Status = routingv1alpha1.RoutingServiceStatus{}
		return k8s.Status().Update(context.Background(), r)
	})
	if err != nil {
		t.Fatal(err)
	}
}
