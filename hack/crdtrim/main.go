// Command crdtrim post-processes the RoutingService CRD that controller-gen writes. Inside every
// embedded Kubernetes pod template (spec.template, the migration and check Jobs' templates, the
// Job shard checks' templates) it:
//
//   - removes every default. controller-gen copies Kubernetes' own +default markers
//     (ports[].protocol: TCP, the "" names of references, ...) into the CRD, and the API server
//     then fills them in when it stores a RoutingService. A GitOps tool that diffs the manifest
//     with the live object (Argo CD's client-side diff replaces a list as a whole) then sees every
//     template with a container port out of sync, for ever. The API server defaults pods, Jobs and
//     ReplicaSets itself where they are created, so the RoutingService needs none of them.
//   - removes the field descriptions below every template (Kubernetes' documentation of the pod
//     API, ~0.6 MB of YAML per template). The schema and every validation stay; the template's own
//     description and schemagate's field docs stay, so `kubectl explain routingservice.spec`
//     still documents every schemagate field, and `kubectl explain pod.spec` documents the
//     embedded template.
//
// Inside every template it also replaces the schema of spec.ephemeralContainers with an empty
// list: Kubernetes refuses ephemeral containers in any pod template ("ephemeral containers not
// allowed in pod template", ValidatePodTemplateSpec), so a ReplicaSet or Job made from such a
// template could never be created. The API server now refuses them in the RoutingService itself,
// naming the field, and each template's schema is 12 KB of JSON smaller.
//
// It also removes every default inside a list element anywhere else (spec.strategy.checks[]:
// count, intervalSeconds, when, ...), for the same reason: the diff replaces the list whole, so a
// default filled in one element is drift in the whole list. schemagate reads those fields through
// accessors that apply the same defaults (api/v1alpha1, the *OrDefault methods), so an omitted
// field means what the default said.
//
// The API server requires every key of a list of type map to be required or defaulted. Inside a
// pod template two lists have a defaulted key: a container's ports (containerPort and protocol,
// TCP by default) and imagePullSecrets (name, "" by default). Those become atomic lists, as
// controller-gen writes a list without list-type markers: server-side apply then replaces such a
// list as a whole instead of merging it by key, which changes nothing for a RoutingService whose
// manifest owns its template. Kubernetes still merges ports by key in the pods, Jobs and
// ReplicaSets schemagate creates.
//
// A pod template is found by its shape (an object with metadata and a spec that has containers),
// wherever it is, so a template added to the API later is handled without a change here.
//
// Usage: go run ./hack/crdtrim FILE... (rewrites each file in place).
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := trimFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdtrim: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

// atomicUnlessKeysRequired makes s, when it is a list of type map with a key that its items do
// not require, an atomic list: that key must otherwise keep a default.
func atomicUnlessKeysRequired(s map[string]any) {
	if s["x-kubernetes-list-type"] != "map" {
		return
	}
	items, _ := s["items"].(map[string]any)
	required := map[string]bool{}
	req, _ := items["required"].([]any)
	for _, r := range req {
		if name, ok := r.(string); ok {
			required[name] = true
		}
	}
	keys, _ := s["x-kubernetes-list-map-keys"].([]any)
	for _, k := range keys {
		if name, ok := k.(string); ok && !required[name] {
			s["x-kubernetes-list-type"] = "atomic"
			delete(s, "x-kubernetes-list-map-keys")
			return
		}
	}
}

// forbidEphemeralContainers replaces the schema of tmpl's spec.ephemeralContainers, if it has
// one, with a list that must be empty.
func forbidEphemeralContainers(tmpl map[string]any) {
	props, _ := tmpl["properties"].(map[string]any)
	spec, _ := props["spec"].(map[string]any)
	specProps, _ := spec["properties"].(map[string]any)
	if _, ok := specProps["ephemeralContainers"]; !ok {
		return
	}
	specProps["ephemeralContainers"] = map[string]any{
		"description":            "Not allowed: Kubernetes refuses ephemeral containers in a pod template.",
		"type":                   "array",
		"maxItems":               0,
		"x-kubernetes-list-type": "atomic",
		"items":                  map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
	}
}

func trimFile(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := trim(raw)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// trim returns the CRD raw with the defaults and the descriptions inside pod templates removed. An error says the document is not a CRD with the expected paths,
// or has no pod template at all (a renamed field would otherwise leave its defaults in silently).
func trim(raw []byte) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) == 0 {
		return nil, fmt.Errorf("no spec.versions")
	}
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		if root == nil {
			return nil, fmt.Errorf("version %v has no openAPIV3Schema", version["name"])
		}
		if n := len(PodTemplates(root)); n == 0 {
			return nil, fmt.Errorf("version %v: found no embedded pod template", version["name"])
		}
		for _, tmpl := range PodTemplates(root) {
			eachSchema(tmpl.Node, atomicUnlessKeysRequired)
			eachSchema(tmpl.Node, func(s map[string]any) { delete(s, "default") })
			children(tmpl.Node, "", func(c map[string]any, _ string) {
				eachSchema(c, func(s map[string]any) { delete(s, "description") })
			})
			forbidEphemeralContainers(tmpl.Node)
		}
		eachSchema(root, func(s map[string]any) {
			if items, ok := s["items"].(map[string]any); ok {
				eachSchema(items, func(e map[string]any) { delete(e, "default") })
			}
		})
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}
