package spoke

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// An anchor is the spoke-local owner of what schemagate creates in a spoke: a ConfigMap named
// <routingservice>-schemagate in the shard's namespace. Owner references cannot point across
// clusters (the spoke's garbage collector would delete dependents whose owner it cannot find), so
// the spoke's ReplicaSets are controlled by the anchor instead, and the anchor records whose they
// are. Nothing in a spoke refers to the hub: with the hub gone, the spoke's ReplicaSets keep
// running as they are. Deleting the anchor (the RoutingService's finalizer does) lets the spoke's
// garbage collector remove them.
const (
	// ComponentAnchor is the app.kubernetes.io/component label value of an anchor.
	ComponentAnchor = "anchor"
	// Keys of an anchor's data.
	KeyHub           = "hub"
	KeyNamespace     = "routingServiceNamespace"
	KeyName          = "routingService"
	KeyUID           = "routingServiceUID"
	KeyGeneration    = "generation"
	KeyRevisions     = "revisions"
	KeySchemaVersion = "schemaVersion"
	KeyTakenOverFrom = "takenOverFrom"
	// AnnotationRoutingService and AnnotationRoutingServiceUID are put on each Job schemagate
	// creates in a spoke ("<namespace>/<name>" and the UID of the RoutingService in the hub, as
	// its anchor records them), for a person or a tool reading the spoke alone; schemagate itself
	// reads ownership from the anchor.
	AnnotationRoutingService    = "schemagate.io/routingservice"
	AnnotationRoutingServiceUID = "schemagate.io/routingservice-uid"
	// maxAnchorValue bounds each value read from an anchor (it is untrusted input).
	maxAnchorValue = 1024
)

// AnchorName is the anchor's name for the RoutingService named name.
func AnchorName(name string) string { return name + "-schemagate" }

// Anchor is what an anchor records.
type Anchor struct {
	Hub                string
	Namespace, Name    string
	UID                types.UID
	Generation         int64
	Revisions          []string
	SchemaVersion      string
	TakenOverFrom      string
	ConfigMapUID       types.UID
	ConfigMapNamespace string
	ResourceVersion    string
}

// NewAnchor returns the anchor ConfigMap for rsvc in namespace ns of a spoke, managed by hub.
func NewAnchor(rsvc *routingv1alpha1.RoutingService, ns, hub string, revisions []string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      AnchorName(rsvc.Name),
			Namespace: ns,
			Labels: map[string]string{
				rollout.LabelName:      rsvc.Name,
				rollout.LabelManagedBy: rollout.ManagedByValue,
				rollout.LabelComponent: ComponentAnchor,
			},
		},
	}
	SetAnchorData(cm, rsvc, hub, revisions)
	return cm
}

// SetAnchorData writes what the anchor records of rsvc (keeping takenOverFrom).
func SetAnchorData(cm *corev1.ConfigMap, rsvc *routingv1alpha1.RoutingService, hub string, revisions []string) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[KeyHub] = hub
	cm.Data[KeyNamespace] = rsvc.Namespace
	cm.Data[KeyName] = rsvc.Name
	cm.Data[KeyUID] = string(rsvc.UID)
	cm.Data[KeyGeneration] = strconv.FormatInt(rsvc.Generation, 10)
	cm.Data[KeyRevisions] = strings.Join(revisions, ",")
	cm.Data[KeySchemaVersion] = rsvc.Spec.Schema.Version
}

// ReadAnchor reads an anchor ConfigMap. It never fails: values over 1 KiB are cut, and a
// generation that does not parse reads as 0.
func ReadAnchor(cm *corev1.ConfigMap) Anchor {
	get := func(k string) string {
		v := cm.Data[k]
		if len(v) > maxAnchorValue {
			v = v[:maxAnchorValue]
		}
		return v
	}
	gen, _ := strconv.ParseInt(get(KeyGeneration), 10, 64)
	var revs []string
	if r := get(KeyRevisions); r != "" {
		revs = strings.Split(r, ",")
	}
	return Anchor{
		Hub: get(KeyHub), Namespace: get(KeyNamespace), Name: get(KeyName), UID: types.UID(get(KeyUID)),
		Generation: gen, Revisions: revs, SchemaVersion: get(KeySchemaVersion), TakenOverFrom: get(KeyTakenOverFrom),
		ConfigMapUID: cm.UID, ConfigMapNamespace: cm.Namespace, ResourceVersion: cm.ResourceVersion,
	}
}

// Owner says whether the anchor belongs to rsvc as managed by hub: "" when it does; otherwise
// why not (another hub manages it, or another RoutingService of that name).
func (a Anchor) Owner(rsvc *routingv1alpha1.RoutingService, hub string) string {
	switch {
	case a.Namespace != rsvc.Namespace || a.Name != rsvc.Name:
		return fmt.Sprintf("its anchor belongs to RoutingService %s/%s", a.Namespace, a.Name)
	case a.Hub != hub:
		return fmt.Sprintf("it is managed by hub %q (this hub is %q); set the annotation %s=%s on the RoutingService to take it over", a.Hub, hub, routingv1alpha1.AnnotationTakeover, a.Hub)
	}
	return ""
}

// AnchorRef is the controller reference of the spoke objects an anchor owns.
func AnchorRef(cm *corev1.ConfigMap) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}
}
