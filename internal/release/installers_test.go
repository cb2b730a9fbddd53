package release

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestInstallersKeepTheCRDApart(t *testing.T) {
	const ref = "registry.example/schemagate/manager:v0.1.0@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	crds, rest, err := installers("../..", ref)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(b []byte) map[string]int {
		out := map[string]int{}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var m struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatal(err)
			}
			out[m.Kind]++
		}
		return out
	}
	if k := kinds(crds); len(k) != 1 || k["CustomResourceDefinition"] != 2 {
		t.Errorf("crds.yaml holds %v, want the two CRDs alone", k)
	}
	k := kinds(rest)
	if k["CustomResourceDefinition"] != 0 || k["Deployment"] != 1 || k["Namespace"] != 1 {
		t.Errorf("install.yaml holds %v, want the Deployment and its namespace and no CRD", k)
	}
	if !strings.Contains(string(rest), "image: "+ref+"\n") {
		t.Errorf("install.yaml does not run %s", ref)
	}
}
