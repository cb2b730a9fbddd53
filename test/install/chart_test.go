package install

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
)

// teams is the namespace-scoped configuration the tests render.
var teams = map[string]any{"watchNamespaces": []any{"team-a", "team-b"}}

// `helm lint --strict` finds nothing, neither for the defaults nor for namespace-scoped mode.
func TestChartLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]map[string]any{"defaults": {}, "watchNamespaces": teams} {
		t.Run(name, func(t *testing.T) {
			res := lint.RunAll(ChartDir(), vals, "schemagate-system", lint.WithKubeVersion(kv))
			for _, m := range res.Messages {
				// INFO is "icon is recommended"; anything from WARNING up fails, as --strict does.
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				}
			}
		})
	}
}

// Helm installs crds/ as they are and never upgrades them; that file must be the CRD
// controller-gen generates, byte for byte (`make chart-crds` copies it).
func TestChartCRDIsGenerated(t *testing.T) {
	want, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs under config/crd/bases: %v", err)
	}
	got, _ := filepath.Glob(filepath.Join(ChartDir(), "crds", "*"))
	if len(got) != len(want) {
		t.Errorf("charts/schemagate/crds has %d files, config/crd/bases %d: run `make chart-crds`", len(got), len(want))
	}
	for _, w := range want {
		a, _ := os.ReadFile(w)
		b, err := os.ReadFile(filepath.Join(ChartDir(), "crds", filepath.Base(w)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("charts/schemagate/crds/%s differs from config/crd/bases (%v): run `make chart-crds`", filepath.Base(w), err)
		}
	}
}

// The defaults: cluster-wide, the manager's pod locked down as in dist/install.yaml, its
// ServiceAccount granted what the reconciler's markers ask for by a ClusterRole.
func TestChartDefaults(t *testing.T) {
	r, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	d := oneDeployment(t, objs)
	checkManagerPod(t, d)
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "schemagate/manager:0.1.0" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s (%s), want schemagate/manager:0.1.0 (the appVersion), IfNotPresent", c.Image, c.ImagePullPolicy)
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--watch-namespaces") }) {
		t.Errorf("cluster-wide manager has %v", c.Args)
	}
	svcs := only(objs, "Service", "schemagate-system")
	if len(svcs) != 1 {
		t.Fatalf("want 1 Service, got %d", len(svcs))
	}
	checkMetrics(t, d, decode[corev1.Service](t, svcs[0]))
	if len(only(objs, "ServiceMonitor", "")) != 0 {
		t.Error("ServiceMonitor rendered by default")
	}
	if len(only(objs, "Role", "")) != 1 {
		t.Errorf("want only the leader election Role, got %d Roles", len(only(objs, "Role", "")))
	}
	if m := missing(boundRules(t, objs, d), generatedRules(t)); len(m) > 0 {
		t.Errorf("the manager's ServiceAccount lacks %v", m)
	}
	if len(r.CRDs) != 1 {
		t.Errorf("want 1 CRD in crds/, got %d", len(r.CRDs))
	}
}

// watchNamespaces [team-a, team-b]: the manager is told so and gets a Role in each; no
// ClusterRole grants it anything namespaced.
func TestChartWatchNamespaces(t *testing.T) {
	r, err := RenderChart(ChartDir(), "sg", "ops", teams)
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	d := oneDeployment(t, objs)
	checkManagerPod(t, d)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--watch-namespaces=team-a,team-b") {
		t.Errorf("args %v lack --watch-namespaces=team-a,team-b", d.Spec.Template.Spec.Containers[0].Args)
	}
	if d.Name != "sg-schemagate-manager" || d.Namespace != "ops" {
		t.Errorf("Deployment %s/%s, want ops/sg-schemagate-manager", d.Namespace, d.Name)
	}
	all := boundRules(t, objs, d)
	if m := missing(all, generatedRules(t)); len(m) > 0 {
		t.Errorf("the manager's ServiceAccount lacks %v", m)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		roles := only(objs, "Role", ns)
		if len(roles) != 1 || len(only(objs, "RoleBinding", ns)) != 1 {
			t.Errorf("%s: want 1 Role and 1 RoleBinding, got %d, %d", ns, len(roles), len(only(objs, "RoleBinding", ns)))
			continue
		}
		rules := decode[rbacv1.Role](t, roles[0]).Rules
		var namespaced []rbacv1.PolicyRule
		for _, rule := range generatedRules(t) {
			if !clusterScoped(rule) {
				namespaced = append(namespaced, rule)
			}
		}
		if m := missing(rules, namespaced); len(m) > 0 {
			t.Errorf("Role in %s lacks %v", ns, m)
		}
	}
	for _, o := range only(objs, "ClusterRole", "") {
		for _, rule := range decode[rbacv1.ClusterRole](t, o).Rules {
			if len(rule.NonResourceURLs) == 0 && !clusterScoped(rule) {
				t.Errorf("ClusterRole %s grants %v in namespace-scoped mode", o.Name, rule)
			}
		}
	}
}

// clusterScoped reports whether a rule names only the cluster-scoped resources the manager
// needs: the reviews its metrics endpoint asks the API server for.
func clusterScoped(r rbacv1.PolicyRule) bool {
	for _, res := range r.Resources {
		if res != "tokenreviews" && res != "subjectaccessreviews" {
			return false
		}
	}
	return len(r.Resources) > 0
}

// boundRules returns the rules of every Role and ClusterRole in objs bound to d's ServiceAccount.
func boundRules(t *testing.T, objs []installer.Object, d *appsv1.Deployment) []rbacv1.PolicyRule {
	t.Helper()
	sa, ns := d.Spec.Template.Spec.ServiceAccountName, d.Namespace
	if len(only(objs, "ServiceAccount", ns)) != 1 || only(objs, "ServiceAccount", ns)[0].Name != sa {
		t.Errorf("ServiceAccount %s/%s is not in the chart", ns, sa)
	}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range only(objs, "ClusterRole", "") {
		roles["ClusterRole//"+o.Name] = decode[rbacv1.ClusterRole](t, o).Rules
	}
	for _, o := range only(objs, "Role", "") {
		roles["Role/"+o.Namespace+"/"+o.Name] = decode[rbacv1.Role](t, o).Rules
	}
	var out []rbacv1.PolicyRule
	for _, o := range append(only(objs, "ClusterRoleBinding", ""), only(objs, "RoleBinding", "")...) {
		b := decode[rbacv1.RoleBinding](t, o)
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns
		}) {
			continue
		}
		key := "ClusterRole//" + b.RoleRef.Name
		if b.RoleRef.Kind == "Role" {
			key = "Role/" + b.Namespace + "/" + b.RoleRef.Name
		}
		rules, ok := roles[key]
		if !ok {
			t.Errorf("%s %s refers to %s, which the chart lacks", o.Kind, o.Name, key)
		}
		out = append(out, rules...)
	}
	return out
}

// Values that make no sense are refused before anything reaches a cluster, by values.schema.json
// (or a template's fail), and the message names the value.
func TestChartRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string // in the error
	}{
		{"replicaCount a word", map[string]any{"replicaCount": "two"}, "'/replicaCount'"},
		{"replicaCount zero", map[string]any{"replicaCount": 0}, "'/replicaCount'"},
		{"unknown pullPolicy", map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "'/image/pullPolicy'"},
		{"watchNamespaces a string", map[string]any{"watchNamespaces": "team-a"}, "'/watchNamespaces'"},
		{"watchNamespaces not DNS labels", map[string]any{"watchNamespaces": []any{"Team_A"}}, "'/watchNamespaces/0'"},
		{"unknown logLevel", map[string]any{"logLevel": "verbose"}, "'/logLevel'"},
		{"misspelt key", map[string]any{"replicas": 3}, "'replicas' not allowed"},
		{"serviceMonitor without metrics", map[string]any{"metrics": map[string]any{"enabled": false, "serviceMonitor": map[string]any{"enabled": true}}}, "metrics.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", tc.values)
			if err == nil {
				t.Fatalf("values %v accepted", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name %s: %v", tc.want, err)
			}
			t.Logf("%v", err)
		})
	}
}

// Each value the chart documents reaches the manager's pod.
func TestChartValuesReachThePod(t *testing.T) {
	r, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", map[string]any{
		"image":            map[string]any{"repository": "registry.example/schemagate", "tag": "v0.2.0", "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
		"replicaCount":     3,
		"logLevel":         "debug",
		"nodeSelector":     map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		"metrics":          map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	d := oneDeployment(t, objs)
	pod, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
	switch {
	case c.Image != "registry.example/schemagate:v0.2.0" || c.ImagePullPolicy != corev1.PullAlways:
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	case *d.Spec.Replicas != 3:
		t.Errorf("replicas %d", *d.Spec.Replicas)
	case !slices.Contains(c.Args, "--zap-log-level=debug"):
		t.Errorf("args %v", c.Args)
	case len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred":
		t.Errorf("imagePullSecrets %v", pod.ImagePullSecrets)
	case pod.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Tolerations) != 1:
		t.Errorf("nodeSelector %v tolerations %v", pod.NodeSelector, pod.Tolerations)
	}
	sm := only(objs, "ServiceMonitor", "schemagate-system")
	if len(sm) != 1 {
		t.Fatalf("want 1 ServiceMonitor, got %d", len(sm))
	}
	if labels, _ := sm[0].Raw["metadata"].(map[string]any)["labels"].(map[string]any); labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack release=prometheus", labels)
	}
}

// Helm keeps each release in a Secret: the release, chart files included (the 1.9 MB CRD), as
// JSON, gzipped, base64-encoded (helm's storage/driver). A Secret holds at most 1 MiB
// (k8s.io/api core/v1 MaxSecretSize), so a chart whose release grows past it can be rendered but
// never installed.
func TestChartReleaseFitsASecret(t *testing.T) {
	r, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r.Release)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = w.Write(b)
	_ = w.Close()
	stored := base64.StdEncoding.EncodedLen(z.Len())
	t.Logf("release: %d bytes of JSON, %d stored in the Secret", len(b), stored)
	if stored > corev1.MaxSecretSize {
		t.Errorf("the release Secret would hold %d bytes, more than %d", stored, corev1.MaxSecretSize)
	}
}
