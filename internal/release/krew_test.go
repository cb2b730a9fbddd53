package release

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestKrewManifestNamesEachArchiveAndItsDigest(t *testing.T) {
	template, err := os.ReadFile("../../plugins/schemagate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for i, p := range PluginPlatforms {
		digests[PluginArchive(p)] = strings.Repeat(string(rune('a'+i)), 64)
	}
	const base = "http://127.0.0.1:9/v0.1.0/"
	out, err := krewManifest(template, "v0.1.0", base, digests)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "placeholder") || strings.Contains(string(out), strings.Repeat("0", 64)) {
		t.Errorf("the manifest still carries a placeholder:\n%s", out)
	}
	var m struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != "v0.1.0" || len(m.Spec.Platforms) != len(PluginPlatforms) {
		t.Fatalf("version %q, %d platforms", m.Spec.Version, len(m.Spec.Platforms))
	}
	for _, p := range m.Spec.Platforms {
		name := PluginArchive(Platform{p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]})
		if p.URI != base+name || p.SHA256 != digests[name] || p.Bin != "kubectl-schemagate" {
			t.Errorf("%s: uri %q sha256 %q bin %q", name, p.URI, p.SHA256, p.Bin)
		}
	}

	missing := map[string]string{PluginArchive(PluginPlatforms[0]): digests[PluginArchive(PluginPlatforms[0])]}
	if _, err := krewManifest(template, "v0.1.0", base, missing); err == nil || !strings.Contains(err.Error(), "has no archive") {
		t.Errorf("a platform without its archive: %v", err)
	}
	extra := map[string]string{"kubectl-schemagate_windows_amd64.tar.gz": "x"}
	for k, v := range digests {
		extra[k] = v
	}
	if _, err := krewManifest(template, "v0.1.0", base, extra); err == nil || !strings.Contains(err.Error(), "windows") {
		t.Errorf("an archive no platform selects: %v", err)
	}
}
