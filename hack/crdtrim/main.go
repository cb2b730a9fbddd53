// Command crdtrim removes the field descriptions that controller-gen copies from Kubernetes' own
// PodTemplateSpec into the RoutingService CRD (two embedded pod templates, ~1.3 MB of YAML with
// them, ~0.2 MB without). The schema and every validation stay; schemagate's own field docs stay,
// so `kubectl explain routingservice.spec` still documents every schemagate field, and
// `kubectl explain pod.spec` documents the embedded template.
//
// Usage: go run ./hack/crdtrim FILE... (rewrites each file in place).
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// embedded lists, from a version's openAPIV3Schema, the paths of embedded Kubernetes pod
// templates: their own description is kept, their properties' descriptions are dropped.
var embedded = [][]string{
	{"spec", "template"},
	{"spec", "schema", "migration", "template"},
}

func main() {
	for _, path := range os.Args[1:] {
		if err := trim(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdtrim: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func trim(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		version, _ := v.(map[string]any)
		schema, _ := version["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		for _, p := range embedded {
			node := root
			for _, name := range p {
				props, _ := node["properties"].(map[string]any)
				node, _ = props[name].(map[string]any)
				if node == nil {
					return fmt.Errorf("no property %v in the schema", p)
				}
			}
			if props, ok := node["properties"].(map[string]any); ok {
				for _, child := range props {
					dropDescriptions(child)
				}
			}
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

func dropDescriptions(node any) {
	switch n := node.(type) {
	case map[string]any:
		delete(n, "description")
		for k, child := range n {
			if k == "x-kubernetes-validations" {
				continue
			}
			dropDescriptions(child)
		}
	case []any:
		for _, child := range n {
			dropDescriptions(child)
		}
	}
}
