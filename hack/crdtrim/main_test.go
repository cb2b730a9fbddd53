package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var root = filepath.Join("..", "..")

// crdVersions returns the openAPIV3Schema of every version of every CustomResourceDefinition in
// the YAML stream at path.
func crdVersions(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj["kind"] != "CustomResourceDefinition" {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		spec, _ := obj["spec"].(map[string]any)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			vm, _ := v.(map[string]any)
			s, _ := vm["schema"].(map[string]any)
			rs, _ := s["openAPIV3Schema"].(map[string]any)
			out[md["name"].(string)+"/"+vm["name"].(string)] = rs
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no CRD", path)
	}
	return out
}

// defaultsUnder lists the paths of the schemas below node that declare a default.
func defaultsUnder(node map[string]any, path string) []string {
	var out []string
	var walk func(n map[string]any, p string)
	walk = func(n map[string]any, p string) {
		if _, ok := n["default"]; ok {
			out = append(out, p)
		}
		children(n, p, walk)
	}
	walk(node, path)
	return out
}

// mapKeysWithoutDefault lists the keys of lists of type map under node that are neither required
// nor defaulted, which the API server's CRD validation refuses ("this property is in
// x-kubernetes-list-map-keys, so it must have a default or be a required property").
func mapKeysWithoutDefault(node map[string]any, path string) []string {
	var out []string
	var walk func(n map[string]any, p string)
	walk = func(n map[string]any, p string) {
		if n["x-kubernetes-list-type"] == "map" {
			items, _ := n["items"].(map[string]any)
			props, _ := items["properties"].(map[string]any)
			req, _ := items["required"].([]any)
			keys, _ := n["x-kubernetes-list-map-keys"].([]any)
			for _, k := range keys {
				key, _ := k.(string)
				prop, _ := props[key].(map[string]any)
				if _, defaulted := prop["default"]; !defaulted && !slices.Contains(req, any(key)) {
					out = append(out, fmt.Sprintf("%s[].%s is a list-map key, neither required nor defaulted", p, key))
				}
			}
		}
		children(n, p, walk)
	}
	walk(node, path)
	return out
}

// The CRD as committed (and as the chart and the installer ship it) declares no default inside
// any embedded pod template, so the stored RoutingService is the manifest as written (a GitOps
// diff finds nothing), while schemagate's own fields keep theirs.
func TestNoDefaultsInsidePodTemplates(t *testing.T) {
	wantTemplates := []string{
		"spec.schema.check.template",
		"spec.schema.contract.migration.template",
		"spec.schema.migration.template",
		"spec.strategy.checks[].job.template",
		"spec.template",
	}
	for _, file := range []string{
		"config/crd/bases/routing.schemagate.io_routingservices.yaml",
		"charts/schemagate/crds/routing.schemagate.io_routingservices.yaml",
		"dist/install.yaml",
	} {
		for name, schema := range crdVersions(t, file) {
			if !strings.HasPrefix(name, "routingservices.") {
				continue // the RoutingShard CRD embeds no template and is not trimmed
			}
			var paths []string
			for _, tmpl := range PodTemplates(schema) {
				paths = append(paths, tmpl.Path)
				if d := defaultsUnder(tmpl.Node, tmpl.Path); len(d) > 0 {
					t.Errorf("%s %s: %d defaults inside the pod template %s, e.g. %s (run make manifests)", file, name, len(d), tmpl.Path, d[0])
				}
			}
			if !slices.Equal(paths, wantTemplates) {
				t.Errorf("%s %s: pod templates %v, want %v", file, name, paths, wantTemplates)
			}
			for _, d := range defaultsUnder(schema, "") {
				if strings.Contains(d, "[]") {
					t.Errorf("%s %s: a default inside a list element, %s: a GitOps diff replaces the list whole and sees it as drift", file, name, d)
				}
			}
			for _, k := range mapKeysWithoutDefault(schema, "") {
				t.Errorf("%s %s: %s (the API server refuses the CRD)", file, name, k)
			}
			if len(defaultsUnder(schema, "")) == 0 {
				t.Errorf("%s %s: no default left at all: schemagate's own defaults must stay", file, name)
			}
		}
	}
}

// trim removes defaults and only defaults inside pod templates, whatever a field is called, and
// keeps the ones outside.
func TestTrim(t *testing.T) {
	in := `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties:
              bake: {type: integer, default: 30}
              checks:
                items:
                  properties:
                    count: {type: integer, default: 1}
              template:
                description: keep me
                properties:
                  metadata: {type: object}
                  spec:
                    properties:
                      containers:
                        items:
                          properties:
                            ports:
                              x-kubernetes-list-type: map
                              x-kubernetes-list-map-keys: [containerPort, protocol]
                              items:
                                required: [containerPort]
                                properties:
                                  containerPort: {type: integer}
                                  protocol: {type: string, default: TCP, description: drop me}
                            env:
                              x-kubernetes-list-type: map
                              x-kubernetes-list-map-keys: [name]
                              items:
                                required: [name]
                                properties:
                                  name: {type: string}
                            default: {type: string}
                            description: {type: string}
              schema:
                properties:
                  migration:
                    properties:
                      template:
                        properties:
                          metadata: {type: object}
                          spec:
                            properties:
                              containers: {type: array}
                              volumes:
                                items:
                                  properties:
                                    rbd:
                                      properties:
                                        pool: {type: string, default: rbd}
              jobs:
                items:
                  properties:
                    template:
                      properties:
                        metadata: {type: object}
                        spec:
                          properties:
                            containers: {type: array}
                            dnsPolicy: {type: string, default: ClusterFirst, description: kept here}
                            ephemeralContainers:
                              type: array
                              x-kubernetes-list-type: map
                              x-kubernetes-list-map-keys: [name]
                              items:
                                required: [name]
                                properties:
                                  name: {type: string}
                                  image: {type: string}
                            default: {type: string, default: x, description: a field called default}
`
	out, err := trim([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(out, &crd); err != nil {
		t.Fatal(err)
	}
	schema := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
	if bad := mapKeysWithoutDefault(schema, ""); len(bad) > 0 {
		t.Errorf("list-map keys left without a default: %v", bad)
	}
	if got := defaultsUnder(schema, ""); !slices.Equal(got, []string{"spec.bake"}) {
		t.Errorf("defaults left: %v, want only spec.bake", got)
	}
	s := string(out)
	if !strings.Contains(s, "keep me") {
		t.Errorf("lost the template's own description:\n%s", s)
	}
	// Every template found by its shape loses its descriptions, not only spec.template.
	for _, drop := range []string{"drop me", "kept here", "a field called default"} {
		if strings.Contains(s, drop) {
			t.Errorf("a description inside a pod template is left (%q):\n%s", drop, s)
		}
	}
	jobSpec := schema["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["jobs"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["template"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	if _, ok := jobSpec["default"]; !ok {
		t.Error("the property called default in jobs[].template was removed")
	}
	// Ephemeral containers, which Kubernetes refuses in any pod template, must be an empty list.
	eph, _ := jobSpec["ephemeralContainers"].(map[string]any)
	if eph["maxItems"] != float64(0) || eph["x-kubernetes-list-type"] != "atomic" || eph["items"] == nil {
		t.Errorf("ephemeralContainers: %v, want an atomic list with maxItems 0", eph)
	}
	// The two properties named like keywords stay.
	containers := schema["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["template"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)["containers"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	for _, p := range []string{"default", "description", "ports"} {
		if _, ok := containers[p]; !ok {
			t.Errorf("property %q removed", p)
		}
	}
	// ports (a defaulted key) became atomic; env (a required key) stays a map.
	if ports := containers["ports"].(map[string]any); ports["x-kubernetes-list-type"] != "atomic" || ports["x-kubernetes-list-map-keys"] != nil {
		t.Errorf("ports: %v", ports)
	}
	if env := containers["env"].(map[string]any); env["x-kubernetes-list-type"] != "map" {
		t.Errorf("env: %v", env)
	}

	for _, bad := range []string{"kind: CustomResourceDefinition\n", "spec: {versions: [{name: v1, schema: {openAPIV3Schema: {properties: {spec: {}}}}}]}\n"} {
		if _, err := trim([]byte(bad)); err == nil {
			t.Errorf("trim(%q): no error", bad)
		}
	}
}

// crdJSONBudget bounds each version's schema as the API server stores it (compact JSON), in
// bytes. The whole CRD is one etcd object (etcd refuses requests over 1.5 MiB by default), Helm
// keeps the chart's crds/ in its release Secret (1 MiB), and every client that discovers the
// API downloads it. Trimmed, the RoutingService's schema is ~0.33 MB (1.14 MB before the
// descriptions of all five pod templates went); the budget leaves room for one more template.
const crdJSONBudget = 400_000

// The CRD as committed stays within crdJSONBudget: a new embedded pod template is trimmed like
// the others, and a new field's schema does not grow unseen.
func TestCRDSize(t *testing.T) {
	for _, file := range []string{
		"config/crd/bases/routing.schemagate.io_routingservices.yaml",
		"charts/schemagate/crds/routing.schemagate.io_routingservices.yaml",
		"dist/install.yaml",
	} {
		for name, schema := range crdVersions(t, file) {
			raw, err := json.Marshal(schema)
			if err != nil {
				t.Fatal(err)
			}
			for _, tmpl := range PodTemplates(schema) {
				spec, _ := tmpl.Node["properties"].(map[string]any)["spec"].(map[string]any)
				eph, _ := spec["properties"].(map[string]any)["ephemeralContainers"].(map[string]any)
				if eph["maxItems"] != float64(0) {
					t.Errorf("%s %s: %s.spec.ephemeralContainers may have items; Kubernetes refuses them in a pod template", file, name, tmpl.Path)
				}
			}
			if len(raw) > crdJSONBudget {
				t.Errorf("%s %s: the schema is %d bytes of JSON, over the budget of %d (run make manifests; a new pod template must be found by crdtrim)", file, name, len(raw), crdJSONBudget)
			}
		}
	}
}
