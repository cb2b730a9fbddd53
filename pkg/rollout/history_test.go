package rollout

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// orphanDelete plays `kubectl delete --cascade=orphan` and a re-apply: a new UID, no status, and
// the garbage collector has removed every owner reference to the old object.
func (w *world) orphanDelete() {
	w.rsvc.UID = "uid-rs-a-2"
	w.rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
	for _, rs := range w.rss {
		rs.OwnerReferences = nil
	}
	for _, j := range w.jobs {
		j.OwnerReferences = nil
	}
	for _, cr := range w.records {
		cr.OwnerReferences = nil
	}
}

// plant adds, in us-east, a ReplicaSet with schemagate's labels for rs-a and revision rev, no
// controller, no replicas, served-order 999 (above anything schemagate wrote) and image.
func (w *world) plant(rev, image string) *appsv1.ReplicaSet {
	shard := w.rsvc.Spec.Shards[0]
	planted := NewReplicaSet(w.rsvc, shard, rev, 0)
	planted.OwnerReferences = nil
	planted.UID = types.UID("uid-planted-" + rev)
	planted.Spec.Template.Spec.Containers[0].Image = image
	planted.Annotations[annotationSchemaVersion] = "1"
	SetServedOrder(planted, 999)
	planted.CreationTimestamp = metav1.Time{Time: w.now}
	planted.Generation = 1
	w.rss[planted.Name] = planted
	return planted
}

// onlyRecord returns the one record the world holds (the fixture's v1 revision after steady).
func (w *world) onlyRecord(t *testing.T) *appsv1.ControllerRevision {
	t.Helper()
	if len(w.records) != 1 {
		t.Fatalf("records: %v, want one", keys(w.records))
	}
	for _, cr := range w.records {
		return cr
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// failV2 applies v2 on schema 2 with a template that never becomes available, plants (plant)
// a ReplicaSet in us-east once v2 is rolling there (so that no reconcile has seen us-east served
// since, and the planted served-order is the highest), and runs until us-east misses its progress
// deadline and the RoutingService is Stalled and, when back, no broken pod is asked for.
func (w *world) failV2(t *testing.T, back bool) *appsv1.ReplicaSet {
	t.Helper()
	w.update("app:broken", "2", "migrate:ok")
	w.run(100, func() bool { return strings.Contains(w.shardImages(), "us-east=app:broken") })
	planted := w.plant("planted01", "app:evil")
	w.run(400, func() bool {
		return w.isTrue(routingv1alpha1.ConditionStalled) && (!back || !strings.Contains(w.shardImages(), "app:broken"))
	})
	for range 5 {
		w.step(time.Second)
	}
	return planted
}

// A ReplicaSet planted with schemagate's labels for rs-a while it was deleted with
// --cascade=orphan, with the highest served-order, is adopted but never rolled back to: it has no
// verified revision record. The genuine v1 ReplicaSets have one (orphaned with them, adopted
// with them), and us-east returns to v1. The planted one's pods would still count.
func TestHistoryPlantedOrphanIsNeverRolledBackTo(t *testing.T) {
	w := steady(t)
	v1 := w.onlyRecord(t)
	w.orphanDelete()
	plan := w.step(time.Second)
	adoptedRecord := false
	for _, a := range plan.Actions {
		if a.Kind == AdoptRecord && a.Record.Name == v1.Name {
			adoptedRecord = true
		}
	}
	if !adoptedRecord {
		t.Fatalf("the orphaned record %s is not adopted: %v", v1.Name, plan.Actions)
	}
	w.events = nil
	planted := w.failV2(t, true)
	warned := false
	for _, e := range w.events {
		if e.Reason == EventReplicaSetAdopted && e.Warning && strings.Contains(e.Message, planted.Name) && strings.Contains(e.Message, "never scaled up") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no Warning for the untrusted adopted ReplicaSet: %+v", w.events)
	}
	if *w.rss[planted.Name].Spec.Replicas != 0 {
		t.Fatalf("the planted ReplicaSet was scaled up: %s", w.shardImages())
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("after the rollback: %s\nlog:\n%s", got, strings.Join(w.log, "\n"))
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonProgressDeadlineExceeded || !strings.Contains(c.Message, "rolled back") {
		t.Fatalf("Stalled = %+v", c)
	}
}

// The same rollback without the v1 record (deleted, or never written), or with a record whose
// data was edited (it no longer hashes to its revision), leaves the adopted v1 ReplicaSets
// untrusted: us-east is not rolled back to them, and nothing else either. A record planted for the
// planted ReplicaSet's revision with data that does not hash to it is ignored too.
func TestHistoryAdoptedOldRevisionNeedsAVerifiedRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(w *world, cr *appsv1.ControllerRevision)
	}{
		{"missing", func(w *world, cr *appsv1.ControllerRevision) { delete(w.records, cr.Name) }},
		{"forged", func(w *world, cr *appsv1.ControllerRevision) {
			spec := recordSpec(&w.rsvc.Spec)
			spec.Template.Spec.Containers[0].Image = "app:evil"
			forged := NewRevisionRecord(&routingv1alpha1.RoutingService{ObjectMeta: w.rsvc.ObjectMeta, Spec: *spec}, "planted01", 7)
			forged.OwnerReferences = nil
			w.records[forged.Name] = forged
			// And the genuine one edited to the planted template.
			cr.Data = forged.Data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := steady(t)
			tc.record(w, w.onlyRecord(t))
			w.orphanDelete()
			planted := w.failV2(t, false)
			if *w.rss[planted.Name].Spec.Replicas != 0 {
				t.Fatalf("the planted ReplicaSet was scaled up: %s", w.shardImages())
			}
			c := w.condition(routingv1alpha1.ConditionStalled)
			if c.Reason != routingv1alpha1.ReasonProgressDeadlineExceeded || !strings.Contains(c.Message, "no earlier revision to roll back to") {
				t.Fatalf("Stalled = %+v\n%s", c, w.shardImages())
			}
			if _, ok := w.records[RevisionRecordName("rs-a", "planted01")]; ok && tc.name == "forged" {
				// An orphaned record that does not verify is neither adopted nor deleted.
				if metav1.GetControllerOf(w.records[RevisionRecordName("rs-a", "planted01")]) != nil {
					t.Fatal("a forged record was adopted")
				}
			}
		})
	}
}

// Records follow the ReplicaSets: one per revision that has a ReplicaSet, written once (no second
// create), and deleted with the last ReplicaSet of its revision (revisionHistoryLimit 2); a
// record edited in place is replaced.
func TestHistoryRecordsArePrunedWithTheirReplicaSets(t *testing.T) {
	w := steady(t)
	for i, image := range []string{"app:v2", "app:v3", "app:v4", "app:v5"} {
		w.update(image, "1", "migrate:ok")
		w.run(400, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
		revs := map[string]bool{}
		for _, rs := range w.rss {
			revs[rs.Labels[LabelRevision]] = true
		}
		w.idle()
		for name, cr := range w.records {
			if !revs[cr.Labels[LabelRevision]] {
				t.Fatalf("after update %d: record %s has no ReplicaSet left", i, name)
			}
			if verifyRecord(cr, cr.Labels[LabelRevision]) == nil {
				t.Fatalf("record %s does not verify", name)
			}
		}
		if len(w.records) != len(revs) {
			t.Fatalf("after update %d: records %v, revisions %v", i, keys(w.records), keys(revs))
		}
	}
	update := RevisionRecordName("rs-a", w.rsvc.Status.UpdateRevision)
	w.records[update].Data.Raw = []byte(`{"template":{}}`)
	w.step(time.Second)
	w.step(time.Second)
	if cr := w.records[update]; cr == nil || verifyRecord(cr, w.rsvc.Status.UpdateRevision) == nil {
		t.Fatalf("the edited record of the update revision is not replaced: %+v", cr)
	}
}

// A record that is not valid JSON, too large, or not a spec never verifies and never panics.
func TestHistoryRecordDataIsUntrusted(t *testing.T) {
	w := newWorld(t)
	rev := Revision(&w.rsvc.Spec)
	cr := NewRevisionRecord(w.rsvc, rev, 1)
	if verifyRecord(cr, rev) == nil {
		t.Fatal("a genuine record does not verify")
	}
	for _, raw := range []string{"", "null", "{", `{"template":5}`, `[]`, strings.Repeat(" ", maxRecordBytes+1) + "{}"} {
		cr.Data.Raw = []byte(raw)
		if verifyRecord(cr, rev) != nil {
			t.Fatalf("%.20q verifies", raw)
		}
	}
}

// A record's data is in the form the API server re-encodes it in when it patches the object
// (keys sorted, compact): ControllerRevision data is immutable, so any other form makes every
// later patch of the record fail, the garbage collector's orphaning patch included.
func TestRevisionRecordDataIsCanonicalJSON(t *testing.T) {
	rsvc := fixture()
	rsvc.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: "2"}
	cr := NewRevisionRecord(rsvc, Revision(&rsvc.Spec), 1)
	var doc any
	dec := json.NewDecoder(bytes.NewReader(cr.Data.Raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, cr.Data.Raw) {
		t.Fatalf("record data is not in the API server's form:\n%s\nre-encoded:\n%s", cr.Data.Raw, again)
	}
}
