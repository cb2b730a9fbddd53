package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemaversion"
)

// Revision history. A ReplicaSet's labels say which RoutingService, shard and revision it is, but
// anyone who may create ReplicaSets can write them. The update revision's ReplicaSet is checked
// against the spec (matchTemplates); an older revision's cannot be, since its spec is gone. So, as
// the StatefulSet and DaemonSet controllers do, schemagate keeps one apps/v1 ControllerRevision per
// revision, <routingservice>-<revision>, whose data is the part of the spec the revision is
// computed from (recordSpec). A record counts only when Revision of its data is the revision it
// is labelled with: an edited or planted record that does not hash to its label is ignored,
// whoever owns it.
//
// An orphaned ReplicaSet of an older revision (no controller: its RoutingService was deleted with
// --cascade=orphan, or someone created it) is adopted, as before, but it is a rollback or resize
// target only when a verified record of its revision exists and its pod template is the one that
// record gives for its shard. Otherwise it is untrusted: never scaled up, never the serving set,
// never confirming a schema; its pods still count for availability. It stays so after adoption
// (annotationAdopted). ReplicaSets schemagate created itself stay trusted without a record, so
// an upgrade from a release that wrote none changes nothing.

// ComponentHistory labels the revision records.
const ComponentHistory = "revision-history"

// annotationAdopted marks a ReplicaSet schemagate adopted as an orphan: unlike one it created,
// it is trusted only with a verified record of its revision.
const annotationAdopted = "schemagate.io/adopted"

// RevisionRecordName is <routingservice>-<revision>, at most 40+1+10 characters.
func RevisionRecordName(rsvcName, revision string) string {
	return rsvcName + "-" + revision
}

// recordSpec is the part of spec a revision is computed from (Revision): the pod template, the
// schema version and compatibility, every shard's name and nodeSelector, and the check at PodReady
// (its readiness gate is in every pod). Revision(recordSpec(s))
// is Revision(s).
func recordSpec(spec *routingv1alpha1.RoutingServiceSpec) *routingv1alpha1.RoutingServiceSpec {
	out := &routingv1alpha1.RoutingServiceSpec{
		Template: *spec.Template.DeepCopy(),
		Schema:   routingv1alpha1.SchemaSpec{Version: spec.Schema.Version, Compatibility: spec.Schema.Compatibility.DeepCopy()},
	}
	for _, s := range spec.Shards {
		out.Shards = append(out.Shards, routingv1alpha1.ShardSpec{Name: s.Name, NodeSelector: maps.Clone(s.NodeSelector)})
	}
	if c := spec.Strategy.PodReadyCheck(); c != nil {
		// The check at PodReady puts its readiness gate in every pod of the revision.
		out.Strategy.Checks = []routingv1alpha1.ShardCheck{*c.DeepCopy()}
	}
	return out
}

// NewRevisionRecord builds the record of rsvc's spec, whose revision is revision, numbered n: a
// ControllerRevision controlled by rsvc.
func NewRevisionRecord(rsvc *routingv1alpha1.RoutingService, revision string, n int64) *appsv1.ControllerRevision {
	data, err := canonicalJSON(recordSpec(&rsvc.Spec))
	if err != nil {
		// Marshalling API types cannot fail; a panic here is a programming error.
		panic(err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      RevisionRecordName(rsvc.Name, revision),
			Namespace: rsvc.Namespace,
			Labels: map[string]string{
				LabelManagedBy: ManagedByValue,
				LabelComponent: ComponentHistory,
				LabelName:      rsvc.Name,
				LabelRevision:  revision,
			},
			OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: n,
	}
}

// canonicalJSON encodes v as the API server re-encodes a ControllerRevision's data when it
// applies a patch to the object: object keys sorted, numbers as written. A ControllerRevision's
// data is immutable, so data in any other form (encoding/json writes struct fields in declaration
// order) makes every later patch of the record fail with "data: field is immutable": the garbage
// collector could then not orphan it, and a RoutingService deleted with --cascade=orphan never
// went away.
func canonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// maxRecordBytes bounds how much of a record's data is decoded (untrusted input).
const maxRecordBytes = 1 << 20

// readRecords finds, in Observed, the records that are this RoutingService's by name and labels,
// that no other object controls, and whose data hashes to their revision label. Called first in
// newPlanner.
func (p *planner) readRecords() {
	p.records = map[string]*routingv1alpha1.RoutingServiceSpec{}
	for _, cr := range p.observed.ControllerRevisions {
		rev, ok := p.recordRevision(cr)
		if !ok {
			continue
		}
		if ref := metav1.GetControllerOf(cr); ref != nil && ref.UID != p.rsvc.UID {
			continue
		}
		if spec := verifyRecord(cr, rev); spec != nil {
			p.records[rev] = spec
			p.verifiedRecords[cr] = true
		}
	}
}

// recordRevision returns the revision cr is labelled with, and whether it is labelled and named as
// a record of this RoutingService.
func (p *planner) recordRevision(cr *appsv1.ControllerRevision) (string, bool) {
	if cr == nil || cr.DeletionTimestamp != nil || cr.Namespace != p.rsvc.Namespace {
		return "", false
	}
	l := cr.Labels
	rev := l[LabelRevision]
	if l[LabelManagedBy] != ManagedByValue || l[LabelComponent] != ComponentHistory || l[LabelName] != p.rsvc.Name || rev == "" {
		return "", false
	}
	return rev, cr.Name == RevisionRecordName(p.rsvc.Name, rev)
}

// verifyRecord decodes cr's data and returns it when its revision is rev, else nil. It never
// panics.
func verifyRecord(cr *appsv1.ControllerRevision, rev string) *routingv1alpha1.RoutingServiceSpec {
	raw := cr.Data.Raw
	if len(raw) == 0 || len(raw) > maxRecordBytes {
		return nil
	}
	var spec routingv1alpha1.RoutingServiceSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil
	}
	if Revision(&spec) != rev {
		return nil
	}
	return recordSpec(&spec)
}

// revisionRecord returns the spec subset of revision rev as its verified record gives it, or nil
// when there is none. The caller must not modify it.
func (p *planner) revisionRecord(rev string) *routingv1alpha1.RoutingServiceSpec {
	return p.records[rev]
}

// needsRecord reports whether rs is trusted only with a verified record: it is an orphan being
// adopted now, or one adopted earlier.
func (p *planner) needsRecord(rs *appsv1.ReplicaSet) bool {
	_, adopted := rs.Annotations[annotationAdopted]
	return adopted || !metav1.IsControlledBy(rs, p.rsvc)
}

// recordMatches reports whether a verified record of rs's revision exists and gives rs's pod
// template for rs's shard (built as NewReplicaSet builds it, the shard's nodeSelector merged in)
// and rs's required schema; when not, why.
func (p *planner) recordMatches(rs *appsv1.ReplicaSet) (bool, string) {
	rev, shardName := rs.Labels[LabelRevision], rs.Labels[LabelShard]
	spec := p.revisionRecord(rev)
	if spec == nil {
		return false, fmt.Sprintf("no verified revision record %s", RevisionRecordName(p.rsvc.Name, rev))
	}
	for _, shard := range spec.Shards {
		if shard.Name != shardName {
			continue
		}
		if !schemaversion.Equal(RequiredSchema(rs), spec.Schema.Version) {
			return false, fmt.Sprintf("it requires schema %q, its revision record says %q", RequiredSchema(rs), spec.Schema.Version)
		}
		recorded := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Name: p.rsvc.Name, Namespace: p.rsvc.Namespace}, Spec: *spec}
		if ok, diff := TemplateMatches(NewReplicaSet(recorded, shard, rev, 0).Spec.Template, rs.Spec.Template); !ok {
			return false, "its template is not the one its revision record gives (" + diff + ")"
		}
		return true, ""
	}
	return false, fmt.Sprintf("its revision record has no shard %s", shardName)
}

// trustAdopted marks untrusted every adopted (or now adopting) ReplicaSet of a revision other than
// the update revision that its verified record does not vouch for (matchTemplates has checked the
// update revision's against the spec). Called after matchTemplates.
func (p *planner) trustAdopted() {
	for _, shard := range slices.Sorted(maps.Keys(p.shards)) {
		set := p.shards[shard]
		for _, rs := range set.all {
			if rs == set.byRev[p.update] || p.untrusted[rs] || !p.needsRecord(rs) {
				continue
			}
			if ok, why := p.recordMatches(rs); !ok {
				p.untrusted[rs] = true
				if rev := rs.Labels[LabelRevision]; set.byRev[rev] == rs {
					delete(set.byRev, rev)
				}
				if !metav1.IsControlledBy(rs, p.rsvc) {
					p.event(true, EventReplicaSetAdopted, "adopted orphaned ReplicaSet %s (shard %s, revision %s) is never scaled up or rolled back to: %s",
						rs.Name, shard, rs.Labels[LabelRevision], why)
				}
			}
		}
	}
}

// MarkAdopted sets, on an orphaned ReplicaSet being adopted, the annotation that keeps it trusted
// only with a verified record (needsRecord).
func MarkAdopted(rs *appsv1.ReplicaSet) {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[annotationAdopted] = "true"
}

// keepHistory plans the records: the update revision's is created once any shard has, or is
// being given, a ReplicaSet of it (and so for every revision that serves, also ReplicaSets an
// earlier release created); an orphaned verified record is adopted; a record this RoutingService
// controls is deleted when it does not verify, or when no ReplicaSet of its revision is left
// (cleanup deletes those beyond revisionHistoryLimit), never the update revision's. Called after
// cleanup.
func (p *planner) keepHistory() {
	has := map[string]bool{}
	for _, set := range p.shards {
		for _, rs := range set.all {
			has[rs.Labels[LabelRevision]] = true
		}
	}
	serving := false
	for _, shard := range p.rsvc.Spec.Shards {
		if p.set(shard.Name).byRev[p.update] != nil {
			serving = true
		}
	}
	for _, a := range p.plan.Actions {
		if a.Kind == CreateReplicaSet && a.ReplicaSet.Labels[LabelRevision] == p.update {
			serving = true
		}
	}
	// A revision none of whose ReplicaSets is seen may still have one where a shard's cluster does
	// not answer: its record is kept until every place is seen (S-43).
	blind := len(p.unseenPlaces()) > 0
	taken, highest := false, int64(0)
	for _, cr := range p.observed.ControllerRevisions {
		if cr == nil {
			continue
		}
		if cr.Name == RevisionRecordName(p.rsvc.Name, p.update) {
			taken = true
		}
		rev, ok := p.recordRevision(cr)
		if !ok {
			continue
		}
		highest = max(highest, cr.Revision)
		switch {
		case metav1.GetControllerOf(cr) == nil && p.verifiedRecords[cr]:
			p.act(Action{Kind: AdoptRecord, Record: cr, Note: fmt.Sprintf("orphaned revision record of revision %s", rev)})
		case !metav1.IsControlledBy(cr, p.rsvc):
		case !p.verifiedRecords[cr]:
			p.act(Action{Kind: DeleteRecord, Record: cr, Note: fmt.Sprintf("revision record %s does not hash to revision %s", cr.Name, rev)})
		case !has[rev] && rev != p.update && !blind:
			p.act(Action{Kind: DeleteRecord, Record: cr, Note: fmt.Sprintf("no ReplicaSet of revision %s is left", rev)})
		}
	}
	if serving && !taken {
		p.act(Action{Kind: CreateRecord, Record: NewRevisionRecord(p.rsvc, p.update, min(highest, maxServedOrder)+1),
			Note: fmt.Sprintf("revision %s's pod template, schema and shards", p.update)})
	}
}
