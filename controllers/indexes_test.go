package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/schemagate/schemagate/pkg/rollout"
)

// indexed adds IndexRoutingService to a fake client, as SetupWithManager adds it to the manager's
// cache.
func indexed(b *fake.ClientBuilder) *fake.ClientBuilder {
	for _, obj := range indexedKinds() {
		b = b.WithIndex(obj, IndexRoutingService, routingServiceOf)
	}
	return b
}

// Only objects labelled as schemagate's are indexed, under their RoutingService's name.
func TestRoutingServiceOf(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{rollout.LabelName: "rs-a", rollout.LabelManagedBy: rollout.ManagedByValue}, "rs-a"},
		{map[string]string{rollout.LabelName: "rs-a"}, ""},
		{map[string]string{rollout.LabelManagedBy: rollout.ManagedByValue}, ""},
		{nil, ""},
	} {
		got := routingServiceOf(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Labels: c.labels}})
		if (c.want == "" && len(got) != 0) || (c.want != "" && (len(got) != 1 || got[0] != c.want)) {
			t.Errorf("labels %v: got %v, want %q", c.labels, got, c.want)
		}
	}
}
