package invariants

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// revisionRS is us-east's ReplicaSet of revision rev at rv, with replicas asked and available.
func revisionRS(rev string, rv int, replicas, available int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-a-us-east-" + rev, UID: types.UID("uid-" + rev), ResourceVersion: strconv.Itoa(rv),
			Labels:          map[string]string{rollout.LabelName: "rs-a", rollout.LabelShard: "us-east", rollout.LabelRevision: rev},
			Annotations:     map[string]string{"schemagate.io/requires-schema": "1"},
			OwnerReferences: []metav1.OwnerReference{rsvcRef(rsvcUID)}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)},
		Status: appsv1.ReplicaSetStatus{AvailableReplicas: available},
	}
}

// The checker's view after a kube-apiserver restart, as CI saw it on 2026-12-06: the relist
// delivered the old revision scaled to 0 while the new one was still at its state from before
// the outage (1 asked, 0 available). Whether that is a violation is for the API server's state at
// the same revision to say: a dip it holds too is one; a dip it does not hold is the checker's view
// lagging; a revision it can no longer serve leaves the dip undecided.
func TestI2DipOfTheCheckersViewIsCheckedAtItsRevision(t *testing.T) {
	shard := func() *routingv1alpha1.RoutingService {
		r := testRSVC()
		r.Spec.Shards = []routingv1alpha1.ShardSpec{{Name: "us-east", Replicas: 3}}
		return r
	}
	for _, tc := range []struct {
		name                             string
		held                             []appsv1.ReplicaSet // what the API server returns at rv 1007
		err                              error
		violations, corrected, undecided int
	}{
		{name: "the API server held 3 available: the view lagged",
			held:      []appsv1.ReplicaSet{*revisionRS("cx", 1003, 3, 3), *revisionRS("zb", 1007, 0, 0)},
			corrected: 1},
		{name: "the API server held the dip too",
			held:       []appsv1.ReplicaSet{*revisionRS("cx", 904, 1, 0), *revisionRS("zb", 1007, 0, 0)},
			violations: 1},
		{name: "a ReplicaSet of another RoutingService does not make up the floor",
			held: []appsv1.ReplicaSet{func() appsv1.ReplicaSet {
				rs := *revisionRS("cx", 1003, 3, 3)
				rs.OwnerReferences = []metav1.OwnerReference{rsvcRef("another-uid")}
				return rs
			}(), *revisionRS("zb", 1007, 0, 0)},
			violations: 1},
		{name: "the revision was compacted away",
			err:       errors.New("the resourceVersion for the provided list is too old"),
			undecided: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := New()
			var asked []string
			k.replicaSetsAt = func(_ context.Context, namespace, selector string, rv int64) ([]appsv1.ReplicaSet, error) {
				asked = append(asked, namespace+" "+selector+" @"+strconv.FormatInt(rv, 10))
				return tc.held, tc.err
			}
			for _, e := range []any{shard(), revisionRS("zb", 830, 3, 3), revisionRS("cx", 904, 1, 0), revisionRS("zb", 1007, 0, 0)} {
				k.observe(e)
			}
			v := i2(k)
			if len(v) != tc.violations || len(k.correctedI2) != tc.corrected || len(k.undecided) != tc.undecided {
				t.Fatalf("violations %q, corrected %q, undecided %q; want %d, %d, %d", v, k.correctedI2, k.undecided, tc.violations, tc.corrected, tc.undecided)
			}
			want := ns + " " + rollout.LabelName + "=rs-a," + rollout.LabelShard + "=us-east @1007"
			if len(asked) != 1 || asked[0] != want {
				t.Errorf("read %q, want one read %q", asked, want)
			}
			if tc.violations == 1 && !strings.Contains(v[0], "as the API server held it at resourceVersion 1007") {
				t.Errorf("violation %q does not say which state it was judged on", v[0])
			}
		})
	}

	// A read that fails for another reason than compaction (the API server restarting) is tried
	// again, and then decides.
	k := New()
	calls := 0
	k.replicaSetsAt = func(context.Context, string, string, int64) ([]appsv1.ReplicaSet, error) {
		if calls++; calls == 1 {
			return nil, errors.New("connection refused")
		}
		return []appsv1.ReplicaSet{*revisionRS("cx", 1003, 3, 3), *revisionRS("zb", 1007, 0, 0)}, nil
	}
	for _, e := range []any{shard(), revisionRS("zb", 830, 3, 3), revisionRS("cx", 904, 1, 0), revisionRS("zb", 1007, 0, 0)} {
		k.observe(e)
	}
	k.verifyDips(context.Background(), false)
	if len(k.pendingI2) != 1 || len(k.undecided) != 0 {
		t.Fatalf("after a failed read: %d pending, undecided %q; want the dip pending", len(k.pendingI2), k.undecided)
	}
	if v := i2(k); len(v) != 0 || len(k.correctedI2) != 1 || calls != 2 {
		t.Errorf("after the second read: violations %q, corrected %q, %d reads", v, k.correctedI2, calls)
	}

	// Without a way to read the API server (events fed by hand), a dip of the view is a violation.
	k = New()
	for _, e := range []any{shard(), revisionRS("zb", 830, 3, 3), revisionRS("zb", 1007, 0, 0)} {
		k.observe(e)
	}
	if v := i2(k); len(v) != 1 {
		t.Errorf("no API server to ask: want the dip as a violation, got %q", v)
	}
}

// i2 returns k's I2 violations (these timelines confirm no schema, so I1 is not their concern).
func i2(k *Checker) []string {
	all, _ := k.Violations()
	var out []string
	for _, v := range all {
		if strings.HasPrefix(v, "I2") {
			out = append(out, v)
		}
	}
	return out
}
