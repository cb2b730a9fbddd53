package install

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The PrometheusRule and the Grafana dashboard are off by default. On, the rule carries the
// labels a Prometheus's ruleSelector needs, and the dashboard's ConfigMap the sidecar's label and
// the dashboard JSON as files/grafana-dashboard.json has it; the ServiceMonitor keeps the
// manager's own namespace label (honorLabels).
func TestChartMonitoring(t *testing.T) {
	r, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", withImage(nil))
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	if n := len(only(objs, "PrometheusRule", "")) + len(only(objs, "ConfigMap", "")); n != 0 {
		t.Fatalf("defaults render %d PrometheusRules and ConfigMaps, want none", n)
	}

	r, err = RenderChart(ChartDir(), "sg", "ops", withImage(map[string]any{
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"monitoring": map[string]any{
			"prometheusRule":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"grafanaDashboard": map[string]any{"enabled": true, "namespace": "grafana", "annotations": map[string]any{"grafana_folder": "Schemagate"}},
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	objs = objects(t, []byte(r.Manifest))
	rules := only(objs, "PrometheusRule", "ops")
	if len(rules) != 1 || rules[0].Name != "sg-schemagate" {
		t.Fatalf("PrometheusRules %v, want ops/sg-schemagate", rules)
	}
	meta := rules[0].Raw["metadata"].(map[string]any)
	if meta["labels"].(map[string]any)["release"] != "prometheus" {
		t.Errorf("PrometheusRule labels %v lack release: prometheus", meta["labels"])
	}
	spec, _ := json.Marshal(rules[0].Raw["spec"])
	if !strings.Contains(string(spec), `up{job=\"sg-schemagate-manager-metrics\"}`) {
		t.Errorf("the manager's job is not the metrics Service's name: %s", spec)
	}

	cms := only(objs, "ConfigMap", "grafana")
	if len(cms) != 1 || cms[0].Name != "sg-schemagate-dashboard" {
		t.Fatalf("ConfigMaps %v, want grafana/sg-schemagate-dashboard", cms)
	}
	cmMeta := cms[0].Raw["metadata"].(map[string]any)
	if cmMeta["labels"].(map[string]any)["grafana_dashboard"] != "1" || cmMeta["annotations"].(map[string]any)["grafana_folder"] != "Schemagate" {
		t.Errorf("ConfigMap metadata %v: want the label grafana_dashboard: \"1\" and the folder annotation", cmMeta)
	}
	want, err := os.ReadFile(filepath.Join(ChartDir(), "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := cms[0].Raw["data"].(map[string]any)["schemagate.json"].(string)
	if !bytes.Equal(bytes.TrimSpace([]byte(got)), bytes.TrimSpace(want)) {
		t.Errorf("the ConfigMap's dashboard differs from files/grafana-dashboard.json")
	}
	if !json.Valid([]byte(got)) {
		t.Errorf("the ConfigMap's dashboard is not JSON")
	}

	sm := only(objs, "ServiceMonitor", "ops")
	if len(sm) != 1 || endpoint(t, sm[0])["honorLabels"] != true {
		t.Errorf("ServiceMonitor %v: want one endpoint with honorLabels: true", sm)
	}
}

// A duration that is not Prometheus' and a ratio outside (0, 1] are refused before anything is
// rendered, as an unknown key under monitoring is.
func TestChartMonitoringRejectsBadValues(t *testing.T) {
	for name, mon := range map[string]map[string]any{
		"for":     {"prometheusRule": map[string]any{"alerts": map[string]any{"stalled": map[string]any{"for": "15 minutes"}}}},
		"window":  {"prometheusRule": map[string]any{"alerts": map[string]any{"shardRolledBack": map[string]any{"window": "0"}}}},
		"ratio":   {"prometheusRule": map[string]any{"alerts": map[string]any{"migrationNearDeadline": map[string]any{"deadlineRatio": 1.5}}}},
		"job":     {"prometheusRule": map[string]any{"managerJob": `a"} or vector(1) #`}},
		"unknown": {"prometheusRule": map[string]any{"alerts": map[string]any{"stalled": map[string]any{"threshold": 3}}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", withImage(map[string]any{"monitoring": mon})); err == nil {
				t.Fatalf("monitoring %v rendered", mon)
			}
		})
	}
}
