package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// replicasWriter names the newest writer of spec.replicas from managedFields, skipping entries
// that own other fields or do not parse; keepReplicasWriter keeps only the entries it reads.
func TestReplicasWriter(t *testing.T) {
	at := func(s int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 12, 8, 1, 0, s, 0, time.UTC)} }
	entry := func(manager string, s int, raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Time: at(s), FieldsV1: metav1.NewFieldsV1(raw)}
	}
	created := entry("schemagate", 0, `{"f:metadata":{"f:labels":{}},"f:spec":{"f:replicas":{}}}`)
	status := entry("schemagate", 5, `{"f:status":{"f:replicas":{}}}`)
	scaled := entry("kube-controller-manager", 9, `{"f:spec":{"f:replicas":{}}}`)
	garbage := entry("mallory", 20, `{"f:spec":`)
	labels := entry("kubectl-label", 30, `{"f:metadata":{"f:labels":{"f:team":{}}}}`)
	for _, tc := range []struct {
		entries []metav1.ManagedFieldsEntry
		want    string
	}{
		{nil, ""},
		{[]metav1.ManagedFieldsEntry{created, status}, "schemagate"},
		{[]metav1.ManagedFieldsEntry{created, status, scaled, garbage, labels}, "kube-controller-manager"},
		{[]metav1.ManagedFieldsEntry{scaled, created}, "kube-controller-manager"},
		{[]metav1.ManagedFieldsEntry{garbage, labels, {Manager: "no-fields"}}, ""},
	} {
		if got := replicasWriter(tc.entries); got != tc.want {
			t.Errorf("%d entries: %q, want %q", len(tc.entries), got, tc.want)
		}
	}
	rshard := &routingv1alpha1.RoutingShard{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{created, status, scaled, garbage, labels}}}
	out, err := keepReplicasWriter(rshard)
	if err != nil {
		t.Fatal(err)
	}
	if kept := out.(*routingv1alpha1.RoutingShard).ManagedFields; len(kept) != 2 || kept[0].Manager != "schemagate" || kept[1].Manager != "kube-controller-manager" {
		t.Errorf("kept %v", kept)
	}
}
