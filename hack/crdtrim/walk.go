package main

import (
	"slices"
	"strings"
)

// Template is an embedded pod template in an OpenAPI v3 schema: its path, as properties joined by
// "." with "[]" for a list's items, and its schema node.
type Template struct {
	Path string
	Node map[string]any
}

// PodTemplates returns every embedded pod template under root (an openAPIV3Schema), in path
// order. A pod template is an object schema with metadata and spec properties whose spec has a
// containers property (the shape of core/v1 PodTemplateSpec); nothing below a template is searched.
func PodTemplates(root map[string]any) []Template {
	var out []Template
	var walk func(node map[string]any, path string)
	walk = func(node map[string]any, path string) {
		if isPodTemplate(node) {
			out = append(out, Template{Path: path, Node: node})
			return
		}
		children(node, path, walk)
	}
	walk(root, "")
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func isPodTemplate(node map[string]any) bool {
	props, _ := node["properties"].(map[string]any)
	if _, ok := props["metadata"].(map[string]any); !ok {
		return false
	}
	spec, _ := props["spec"].(map[string]any)
	specProps, _ := spec["properties"].(map[string]any)
	_, ok := specProps["containers"].(map[string]any)
	return ok
}

// eachSchema calls f on node and on every schema below it: properties' values, items,
// additionalProperties and the subschemas of allOf, anyOf, oneOf and not. It knows the
// difference between a keyword and a property of that name (a field called "default" is walked
// into, not deleted), and never enters x-kubernetes-validations.
func eachSchema(node map[string]any, f func(map[string]any)) {
	f(node)
	children(node, "", func(child map[string]any, _ string) { eachSchema(child, f) })
}

// children calls visit on each direct subschema of node with its path below path.
func children(node map[string]any, path string, visit func(map[string]any, string)) {
	if props, ok := node["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if c, ok := props[name].(map[string]any); ok {
				visit(c, strings.TrimPrefix(path+"."+name, "."))
			}
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		visit(items, path+"[]")
	}
	if ap, ok := node["additionalProperties"].(map[string]any); ok {
		visit(ap, path+"{}")
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		subs, _ := node[kw].([]any)
		for _, s := range subs {
			if c, ok := s.(map[string]any); ok {
				visit(c, path)
			}
		}
	}
	if not, ok := node["not"].(map[string]any); ok {
		visit(not, path)
	}
}
