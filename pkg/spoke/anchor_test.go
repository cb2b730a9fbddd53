package spoke

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

func rsvc() *routingv1alpha1.RoutingService {
	r := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Namespace: "edge", Name: "edge-router", UID: "uid-1", Generation: 7}}
	r.Spec.Schema.Version = "3"
	return r
}

// NewAnchor names and labels the anchor and records what ReadAnchor reads back.
func TestAnchorRoundTrip(t *testing.T) {
	cm := NewAnchor(rsvc(), "edge-eu", "hub-a", []string{"cc447w65w7", "4c59v6bw28"})
	if cm.Name != "edge-router-schemagate" || cm.Namespace != "edge-eu" {
		t.Errorf("anchor %s/%s", cm.Namespace, cm.Name)
	}
	if cm.Labels[rollout.LabelName] != "edge-router" || cm.Labels[rollout.LabelManagedBy] != rollout.ManagedByValue || cm.Labels[rollout.LabelComponent] != ComponentAnchor {
		t.Errorf("labels %v", cm.Labels)
	}
	cm.UID, cm.ResourceVersion = "cm-uid", "42"
	a := ReadAnchor(cm)
	if a.Hub != "hub-a" || a.Namespace != "edge" || a.Name != "edge-router" || a.UID != "uid-1" || a.Generation != 7 ||
		strings.Join(a.Revisions, ",") != "cc447w65w7,4c59v6bw28" || a.SchemaVersion != "3" || a.TakenOverFrom != "" ||
		a.ConfigMapUID != "cm-uid" || a.ConfigMapNamespace != "edge-eu" || a.ResourceVersion != "42" {
		t.Errorf("read back %+v", a)
	}

	// SetAnchorData brings the record up to date and keeps takenOverFrom.
	r := rsvc()
	r.Generation, r.UID, r.Spec.Schema.Version = 8, "uid-2", "4"
	cm.Data[KeyTakenOverFrom] = "hub-b"
	SetAnchorData(cm, r, "hub-a", []string{"4c59v6bw28"})
	a = ReadAnchor(cm)
	if a.Generation != 8 || a.UID != "uid-2" || a.SchemaVersion != "4" || len(a.Revisions) != 1 || a.TakenOverFrom != "hub-b" {
		t.Errorf("after SetAnchorData %+v", a)
	}
	// On a ConfigMap without data.
	empty := &corev1.ConfigMap{}
	SetAnchorData(empty, r, "hub-a", nil)
	if a := ReadAnchor(empty); a.Hub != "hub-a" || a.Revisions != nil {
		t.Errorf("no revisions: %+v", a)
	}
	if ref := AnchorRef(cm); ref.Kind != "ConfigMap" || ref.APIVersion != "v1" || ref.UID != "cm-uid" || ref.Name != cm.Name ||
		ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion == nil || *ref.BlockOwnerDeletion {
		t.Errorf("AnchorRef %+v", ref)
	}
}

// An anchor is untrusted input: whatever its data, ReadAnchor returns, and no value it returns
// is over maxAnchorValue.
func TestReadAnchorHostile(t *testing.T) {
	huge := strings.Repeat("a,", 1<<20)
	cases := map[string]map[string]string{
		"no data":             nil,
		"missing keys":        {KeyHub: "hub-a"},
		"huge values":         {KeyHub: huge, KeyNamespace: huge, KeyName: huge, KeyUID: huge, KeyRevisions: huge, KeySchemaVersion: huge, KeyTakenOverFrom: huge, KeyGeneration: huge},
		"garbage generation":  {KeyGeneration: "seven"},
		"overflow generation": {KeyGeneration: "99999999999999999999999"},
		"negative generation": {KeyGeneration: "-1"},
		"only commas":         {KeyRevisions: ",,,"},
		"binary":              {KeyHub: "\x00\xff\xfe", KeyRevisions: "\xff,\x00"},
		"unknown keys":        {"x": "y"},
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			a := ReadAnchor(&corev1.ConfigMap{Data: data})
			checkBounded(t, a)
		})
	}
	a := ReadAnchor(&corev1.ConfigMap{Data: cases["huge values"]})
	if len(a.Hub) != maxAnchorValue || len(a.Revisions) != maxAnchorValue/2+1 {
		t.Errorf("huge values: hub %d bytes, %d revisions", len(a.Hub), len(a.Revisions))
	}
	if a := ReadAnchor(&corev1.ConfigMap{Data: cases["garbage generation"]}); a.Generation != 0 {
		t.Errorf("garbage generation reads as %d", a.Generation)
	}
}

func checkBounded(t *testing.T, a Anchor) {
	t.Helper()
	for _, v := range []string{a.Hub, a.Namespace, a.Name, string(a.UID), a.SchemaVersion, a.TakenOverFrom} {
		if len(v) > maxAnchorValue {
			t.Errorf("a value of %d bytes", len(v))
		}
	}
	n := 0
	for _, r := range a.Revisions {
		n += len(r) + 1
	}
	if n > maxAnchorValue+1 {
		t.Errorf("revisions of %d bytes", n)
	}
}

// Owner: an anchor is this RoutingService's when it records its namespace and name and this hub.
// Its UID is not compared: a RoutingService deleted and created again under the same name on the
// same hub takes its anchor back (SetAnchorData then records the new UID). takenOverFrom only
// records history: the hub that took the anchor over owns it, and the hub it was taken from is
// told it is managed elsewhere.
func TestAnchorOwner(t *testing.T) {
	anchor := func(edit func(map[string]string)) Anchor {
		cm := NewAnchor(rsvc(), "edge", "hub-a", []string{"r1"})
		if edit != nil {
			edit(cm.Data)
		}
		return ReadAnchor(cm)
	}
	cases := []struct {
		name   string
		anchor Anchor
		hub    string
		want   string // "" owned; else part of why not
	}{
		{"this hub", anchor(nil), "hub-a", ""},
		{"another hub", anchor(nil), "hub-b", `it is managed by hub "hub-a" (this hub is "hub-b"); set the annotation schemagate.io/takeover=hub-a on the RoutingService to take it over`},
		{"taken over by this hub", anchor(func(d map[string]string) { d[KeyTakenOverFrom] = "hub-b" }), "hub-a", ""},
		{"taken over from this hub", anchor(func(d map[string]string) { d[KeyTakenOverFrom] = "hub-b" }), "hub-b", `managed by hub "hub-a"`},
		{"another UID, same name, this hub", anchor(func(d map[string]string) { d[KeyUID] = "uid-old" }), "hub-a", ""},
		{"another name", anchor(func(d map[string]string) { d[KeyName] = "other" }), "hub-a", "its anchor belongs to RoutingService edge/other"},
		{"another namespace", anchor(func(d map[string]string) { d[KeyNamespace] = "prod" }), "hub-a", "its anchor belongs to RoutingService prod/edge-router"},
		{"another name wins over another hub", anchor(func(d map[string]string) { d[KeyName] = "other" }), "hub-b", "its anchor belongs to RoutingService edge/other"},
		{"no hub recorded", anchor(func(d map[string]string) { delete(d, KeyHub) }), "hub-a", `managed by hub "" (this hub is "hub-a")`},
		{"empty ConfigMap", ReadAnchor(&corev1.ConfigMap{}), "hub-a", "its anchor belongs to RoutingService /"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.anchor.Owner(rsvc(), c.hub)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Errorf("Owner: %q, want %q", got, c.want)
			}
		})
	}
}
