package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Revision identifies a spec's routing pods: a 10-character hash of spec.template,
// spec.schema.version and every shard's nodeSelector (the parts that end up in a shard's pod
// template). Replicas, strategy and migration settings are not part of it, so changing them starts
// no new revision. A nil spec hashes like an empty one.
//
// The hash is taken over a canonical form, so that revisions are stable across upgrades
// (scenario S-22). The canonical form is the JSON document
//
//	{"schemaVersion": <spec.schema.version>,
//	 "shardNodeSelectors": [<shards[0].nodeSelector>, <shards[1].nodeSelector>, ...],
//	 "template": <T>}
//
// where each nodeSelector is an object ({} when unset) in shard order, and T is spec.template
//
//  1. encoded with encoding/json and decoded into unstructured JSON (numbers kept exact);
//  2. with every field that earlier releases' CRDs defaulted inside spec.template removed where its
//     value equals that default (templateDefaults: ports[].protocol "TCP",
//     volumes[].azureDisk.fsType "ext4", the "" and false defaults, ...), exactly as if it had been
//     omitted;
//  3. pruned, recursively and bottom-up, of every object member whose value is null, {} or []
//     (list elements are kept in place, so a list's length and order still count);
//
// and the whole document is pruned like T, then encoded with object keys sorted (encoding/json's
// map order) and hashed: the first 5 bytes of its SHA-256, hex, in Kubernetes' vowel-free alphabet.
//
// Why: step 2 makes the form a client reads from a manifest and the form the API server stored
// under an earlier CRD (those defaults filled in) hash the same. Today's CRD declares no default
// inside a pod template (hack/crdtrim removes them, so a GitOps diff of manifest and live object
// finds nothing), but a RoutingService stored before keeps the filled-in values until its
// template is applied again; both forms keep their revision. Step 3 makes a new empty or zero member of a Go type, such as "resources": {} or
// "creationTimestamp": null after a k8s.io/api bump, change no revision. Only a change a pod
// would see (an image, an env value, the schema version, a shard's nodeSelector) renames the
// revision. Changing this canonical form or templateDefaults renames the revision of every
// RoutingService, and so re-rolls every shard on upgrade: TestRevisionGolden pins it.
func Revision(spec *routingv1alpha1.RoutingServiceSpec) string {
	if spec == nil {
		spec = &routingv1alpha1.RoutingServiceSpec{}
	}
	tmpl, err := toUnstructured(spec.Template)
	if err != nil {
		// Marshalling API types cannot fail; a panic here is a programming error.
		panic(err)
	}
	return shortHash(revisionDocument(tmpl, spec))
}

// revisionDocument is Revision's canonical form, given spec.template as unstructured JSON (which it
// modifies).
func revisionDocument(tmpl any, spec *routingv1alpha1.RoutingServiceSpec) any {
	selectors := make([]any, 0, len(spec.Shards))
	for _, s := range spec.Shards {
		sel := make(map[string]any, len(s.NodeSelector))
		for k, v := range s.NodeSelector {
			sel[k] = v
		}
		selectors = append(selectors, sel)
	}
	doc := map[string]any{
		"schemaVersion":      spec.Schema.Version,
		"shardNodeSelectors": selectors,
		"template":           canonicalTemplate(tmpl),
	}
	// The readiness gate of a check at PodReady is part of every pod (NewReplicaSet); only a spec
	// with such a check names it, so every other revision keeps its name.
	if spec.Strategy.PodReadyCheck() != nil {
		doc["podReadinessGates"] = []any{string(routingv1alpha1.PodCheckGate)}
	}
	// The range is part of the revision only when declared (pruned when empty), so every revision
	// of a spec without it keeps its name.
	if c := spec.Schema.Compatibility; c != nil {
		doc["compatibility"] = map[string]any{"min": c.Min, "max": c.Max}
	}
	return prune(doc)
}

// canonicalTemplate is steps 2 and 3 of Revision's canonical form, on a pod template as
// unstructured JSON (which it modifies).
func canonicalTemplate(tmpl any) any {
	for _, d := range templateDefaults {
		removeDefault(tmpl, d.segments, d.value)
	}
	return prune(tmpl)
}

// fieldDefault is a default an earlier CRD declared inside spec.template: path is relative to the
// template, with "[]" after a list field meaning each of its elements.
type fieldDefault struct {
	path     string
	value    any // string or bool; a numeric default would be a json.Number
	segments []string
}

// containerDefaults are the earlier CRDs' defaults inside a container (containers[], initContainers[] and
// ephemeralContainers[] share them).
var containerDefaults = []fieldDefault{
	{path: "env[].valueFrom.configMapKeyRef.name", value: ""},
	{path: "env[].valueFrom.fileKeyRef.optional", value: false},
	{path: "env[].valueFrom.secretKeyRef.name", value: ""},
	{path: "envFrom[].configMapRef.name", value: ""},
	{path: "envFrom[].secretRef.name", value: ""},
	{path: "livenessProbe.grpc.service", value: ""},
	{path: "ports[].protocol", value: "TCP"},
	{path: "readinessProbe.grpc.service", value: ""},
	{path: "startupProbe.grpc.service", value: ""},
}

// podDefaults are the earlier CRDs' defaults inside spec.template.spec, outside containers.
var podDefaults = []fieldDefault{
	{path: "imagePullSecrets[].name", value: ""},
	{path: "volumes[].azureDisk.fsType", value: "ext4"},
	{path: "volumes[].azureDisk.readOnly", value: false},
	{path: "volumes[].cephfs.secretRef.name", value: ""},
	{path: "volumes[].cinder.secretRef.name", value: ""},
	{path: "volumes[].configMap.name", value: ""},
	{path: "volumes[].csi.nodePublishSecretRef.name", value: ""},
	{path: "volumes[].flexVolume.secretRef.name", value: ""},
	{path: "volumes[].iscsi.iscsiInterface", value: "default"},
	{path: "volumes[].iscsi.secretRef.name", value: ""},
	{path: "volumes[].projected.sources[].configMap.name", value: ""},
	{path: "volumes[].projected.sources[].secret.name", value: ""},
	{path: "volumes[].rbd.keyring", value: "/etc/ceph/keyring"},
	{path: "volumes[].rbd.pool", value: "rbd"},
	{path: "volumes[].rbd.secretRef.name", value: ""},
	{path: "volumes[].rbd.user", value: "admin"},
	{path: "volumes[].scaleIO.fsType", value: "xfs"},
	{path: "volumes[].scaleIO.secretRef.name", value: ""},
	{path: "volumes[].scaleIO.storageMode", value: "ThinProvisioned"},
	{path: "volumes[].storageos.secretRef.name", value: ""},
}

// templateDefaults are all the defaults the CRDs of earlier releases declared inside spec.template,
// with paths relative to the template; today's CRD declares none (TestCRDDeclaresNoTemplateDefaults).
// The list is frozen: removing an entry renames the revision of every RoutingService stored with
// that field filled in, and adding one renames the revisions of templates that set that field to
// that value explicitly.
var templateDefaults = func() []fieldDefault {
	var all []fieldDefault
	for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
		for _, d := range containerDefaults {
			all = append(all, fieldDefault{path: "spec." + list + "[]." + d.path, value: d.value})
		}
	}
	for _, d := range podDefaults {
		all = append(all, fieldDefault{path: "spec." + d.path, value: d.value})
	}
	for i := range all {
		all[i].segments = strings.Split(all[i].path, ".")
	}
	return all
}()

// removeDefault deletes, under node, the field at segments if its value equals value.
func removeDefault(node any, segments []string, value any) {
	m, ok := node.(map[string]any)
	if !ok || len(segments) == 0 {
		return
	}
	key, each := strings.CutSuffix(segments[0], "[]")
	if len(segments) == 1 {
		if v, ok := m[key]; ok && !each && v == value {
			delete(m, key)
		}
		return
	}
	if !each {
		removeDefault(m[key], segments[1:], value)
		return
	}
	list, _ := m[key].([]any)
	for _, e := range list {
		removeDefault(e, segments[1:], value)
	}
}

// prune drops, recursively, every object member whose value is null, {} or [] once pruned itself.
// List elements are pruned but kept in place. It modifies v.
func prune(v any) any { return dropMembers(v, isEmptyJSON) }

// dropMembers drops, recursively, every object member whose value, once itself handled, drop
// says to drop. List elements are handled but kept in place. It modifies v.
func dropMembers(v any, drop func(any) bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e = dropMembers(e, drop)
			if drop(e) {
				delete(t, k)
				continue
			}
			t[k] = e
		}
	case []any:
		for i, e := range t {
			t[i] = dropMembers(e, drop)
		}
	}
	return v
}

func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// toUnstructured encodes v with encoding/json and decodes it into maps, lists, strings, bools,
// json.Numbers and nils.
func toUnstructured(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// TemplateMatches says whether have, the pod template stored in a ReplicaSet, is the template
// schemagate would create, want. The API server defaults a ReplicaSet's template with the apps/v1
// pod defaults (terminationMessagePath, imagePullPolicy, dnsPolicy, schedulerName, restartPolicy,
// securityContext: {}, ...), so have is compared to want as a superset: want and have are encoded
// as JSON, want's null members and empty lists are dropped (they require nothing: a protobuf round
// trip turns [] into nothing), and then every member of want must be in have with a matching
// value: objects match when each of want's members matches (members only in have are allowed, as
// defaults), lists when they have the same length and match element by element, and scalars when
// they are equal. An empty object in want requires an object in have, so an emptyDir volume
// replaced by a hostPath one is a mismatch. No CRD default is removed from want here: a field want
// sets to its default value must still have that value in have.
//
// A superset match does not see what was only added to have: a container securityContext added by
// hand, for example, still matches.
//
// When they do not match, diff names the first difference, in sorted key order, as a JSON path
// and both values, for a condition message: `spec.containers[0].image: want "app:v2", have
// "app:evil"`. It never panics.
func TemplateMatches(want, have corev1.PodTemplateSpec) (ok bool, diff string) {
	w, err := toUnstructured(want)
	if err != nil {
		return false, fmt.Sprintf("cannot encode the wanted template: %v", err)
	}
	h, err := toUnstructured(have)
	if err != nil {
		return false, fmt.Sprintf("cannot encode the ReplicaSet's template: %v", err)
	}
	return matchJSON("", dropNullsAndEmptyLists(w), h)
}

// dropNullsAndEmptyLists drops, recursively, the object members whose value is null or [] once
// dropped itself. It modifies v.
func dropNullsAndEmptyLists(v any) any {
	return dropMembers(v, func(e any) bool {
		l, isList := e.([]any)
		return e == nil || (isList && len(l) == 0)
	})
}

// matchJSON reports whether have matches want (see TemplateMatches), and where not.
func matchJSON(path string, want, have any) (bool, string) {
	switch w := want.(type) {
	case nil:
		return true, ""
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false, mismatch(path, want, have)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if w[k] == nil {
				continue
			}
			hv, present := h[k]
			if !present {
				return false, fmt.Sprintf("%s: want %s, have nothing", jsonPath(path, k), jsonValue(w[k]))
			}
			if ok, diff := matchJSON(jsonPath(path, k), w[k], hv); !ok {
				return false, diff
			}
		}
		return true, ""
	case []any:
		h, ok := have.([]any)
		if !ok {
			return false, mismatch(path, want, have)
		}
		if len(w) != len(h) {
			return false, fmt.Sprintf("%s: want %s, have %s", displayPath(path), items(len(w)), items(len(h)))
		}
		for i := range w {
			if ok, diff := matchJSON(path+"["+strconv.Itoa(i)+"]", w[i], h[i]); !ok {
				return false, diff
			}
		}
		return true, ""
	default:
		// Strings, bools and json.Numbers (encoding/json writes each number one way).
		if have != want {
			return false, mismatch(path, want, have)
		}
		return true, ""
	}
}

func mismatch(path string, want, have any) string {
	return fmt.Sprintf("%s: want %s, have %s", displayPath(path), jsonValue(want), jsonValue(have))
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jsonPath appends key to path: .key for an identifier, ["key"] otherwise (label keys).
func jsonPath(path, key string) string {
	if !identifier.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func displayPath(path string) string {
	if path == "" {
		return "template"
	}
	return path
}

func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return strconv.Itoa(n) + " items"
}

// jsonValue renders v as JSON, cut to 80 bytes, for a condition message.
func jsonValue(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if len(s) > 80 {
		s = strings.ToValidUTF8(s[:77], "") + "..."
	}
	return s
}
