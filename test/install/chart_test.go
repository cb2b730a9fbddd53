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

// repository is the image repository the tests render with: the chart has no default (no image
// is published), see TestChartNeedsImageRepository.
const repository = "registry.example/schemagate"

// withImage returns vals (nil: none) with image.repository set to repository, as every install
// must set it.
func withImage(vals map[string]any) map[string]any {
	out := map[string]any{"image": map[string]any{"repository": repository}}
	for k, v := range vals {
		out[k] = v
	}
	return out
}

// teams is the namespace-scoped configuration the tests render.
var teams = withImage(map[string]any{"watchNamespaces": []any{"team-a", "team-b"}})

// `helm lint --strict` finds nothing, neither for the defaults nor for namespace-scoped mode.
func TestChartLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range map[string]map[string]any{"defaults": withImage(nil), "watchNamespaces": teams} {
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

// No image is published, so the chart has no default repository: an install without one stops
// before anything reaches the cluster and says what to set.
func TestChartNeedsImageRepository(t *testing.T) {
	const want = "set image.repository (and image.tag) to the image you built: see docs/image.md"
	for name, vals := range map[string]map[string]any{
		"defaults":   nil,
		"tag only":   {"image": map[string]any{"tag": "v0.1.0"}},
		"empty name": {"image": map[string]any{"repository": ""}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", vals)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one saying %q", err, want)
			}
			t.Log(err)
		})
	}
}

// The defaults (with the one required value, image.repository): cluster-wide, the manager's pod
// locked down as in dist/install.yaml, its ServiceAccount granted what the reconciler's markers
// ask for by a ClusterRole, the manager's own defaults for its client.
func TestChartDefaults(t *testing.T) {
	r, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", withImage(nil))
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	d := oneDeployment(t, objs)
	checkManagerPod(t, d)
	c := d.Spec.Template.Spec.Containers[0]
	if want := repository + ":" + r.Release.Chart.Metadata.AppVersion; c.Image != want || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s (%s), want %s (the appVersion), IfNotPresent", c.Image, c.ImagePullPolicy, want)
	}
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %d, want 2", *d.Spec.Replicas)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--watch-namespaces") }) {
		t.Errorf("cluster-wide manager has %v", c.Args)
	}
	if !slices.Contains(c.Args, "--max-concurrent-reconciles=4") {
		t.Errorf("args %v lack --max-concurrent-reconciles=4", c.Args)
	}
	for _, unset := range []string{"--kube-api-qps", "--kube-api-burst", "--metrics-cert-dir"} {
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, unset) }) {
			t.Errorf("args %v set %s, which the defaults leave to the manager", c.Args, unset)
		}
	}
	if len(d.Spec.Template.Spec.Volumes) != 0 || len(c.VolumeMounts) != 0 {
		t.Errorf("volumes %v, mounts %v by default", d.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
	svcs := only(objs, "Service", "schemagate-system")
	if len(svcs) != 1 {
		t.Fatalf("want 1 Service, got %d", len(svcs))
	}
	// The name config/default gives it, so docs and commands hold for both installs.
	if svcs[0].Name != "schemagate-manager-metrics" {
		t.Errorf("metrics Service %s, want schemagate-manager-metrics", svcs[0].Name)
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
	// Secrets get and pods delete are bound nowhere by default (rbac.namespaces, rbac.clusterWide).
	if m := missing(boundRules(t, objs, d), perNamespaceRules(t)); len(m) != len(perNamespaceRules(t)) {
		t.Errorf("by default the manager's ServiceAccount is granted %v of %v", len(perNamespaceRules(t))-len(m), perNamespaceRules(t))
	}
	if len(r.CRDs) != 2 {
		t.Errorf("want 2 CRDs in crds/ (RoutingService, RoutingShard), got %d", len(r.CRDs))
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
	if svcs := only(objs, "Service", "ops"); len(svcs) != 1 || svcs[0].Name != "sg-schemagate-manager-metrics" {
		t.Errorf("metrics Services %v, want ops/sg-schemagate-manager-metrics", svcs)
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
		namespaced := perNamespaceRules(t)
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

// Issue 42 item 12: a cluster-wide manager reads Secrets and deletes pods only where it is bound
// for that. rbac.namespaces [team-a]: a RoleBinding in team-a to <release>-manager-namespaced,
// which holds exactly config/rbac/namespaced_role.yaml's rules, and nothing binds it
// cluster-wide; rbac.clusterWide: a ClusterRoleBinding does, and then no RoleBinding is needed.
func TestChartSecretsAndPodDeletionPerNamespace(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rbac        map[string]any
		clusterWide bool
		namespaces  []string
	}{
		{"namespaces", map[string]any{"namespaces": []any{"team-a"}}, false, []string{"team-a"}},
		{"clusterWide", map[string]any{"clusterWide": true}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := RenderChart(ChartDir(), "sg", "ops", withImage(map[string]any{"rbac": tc.rbac}))
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, []byte(r.Manifest))
			d := oneDeployment(t, objs)
			var role *rbacv1.ClusterRole
			for _, o := range only(objs, "ClusterRole", "") {
				if o.Name == "sg-schemagate-manager-namespaced" {
					role = decode[rbacv1.ClusterRole](t, o)
				}
			}
			if role == nil {
				t.Fatal("no ClusterRole sg-schemagate-manager-namespaced")
			}
			want := perNamespaceRules(t)
			if m, extra := missing(role.Rules, want), missing(want, role.Rules); len(m)+len(extra) > 0 {
				t.Errorf("sg-schemagate-manager-namespaced lacks %v and grants more: %v", m, extra)
			}
			var boundIn []string
			clusterWide := false
			for _, o := range append(only(objs, "ClusterRoleBinding", ""), only(objs, "RoleBinding", "")...) {
				b := decode[rbacv1.RoleBinding](t, o)
				if b.RoleRef.Name != role.Name || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
					return s.Name == d.Spec.Template.Spec.ServiceAccountName && s.Namespace == d.Namespace
				}) {
					continue
				}
				if o.Kind == "ClusterRoleBinding" {
					clusterWide = true
				} else {
					boundIn = append(boundIn, o.Namespace)
				}
			}
			if clusterWide != tc.clusterWide || !slices.Equal(boundIn, tc.namespaces) {
				t.Errorf("bound cluster-wide %v and in %v, want %v and %v", clusterWide, boundIn, tc.clusterWide, tc.namespaces)
			}
		})
	}
	if _, err := RenderChart(ChartDir(), "sg", "ops", withImage(map[string]any{"rbac": map[string]any{"namespaces": []any{"Team A"}}})); err == nil || !strings.Contains(err.Error(), "rbac") {
		t.Errorf("rbac.namespaces [\"Team A\"]: %v, want a refusal naming rbac", err)
	}
}

// clusterScoped reports whether a rule names only the cluster-scoped resources the manager
// needs: the reviews its metrics endpoint asks the API server for, and the kube-system namespace
// its hub identity is read from.
func clusterScoped(r rbacv1.PolicyRule) bool {
	for _, res := range r.Resources {
		if res != "tokenreviews" && res != "subjectaccessreviews" && res != "namespaces" {
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
		{"digest without its algorithm", map[string]any{"image": map[string]any{"digest": "0123"}}, "'/image/digest'"},
		{"watchNamespaces a string", map[string]any{"watchNamespaces": "team-a"}, "'/watchNamespaces'"},
		{"watchNamespaces not DNS labels", map[string]any{"watchNamespaces": []any{"Team_A"}}, "'/watchNamespaces/0'"},
		{"unknown logLevel", map[string]any{"logLevel": "verbose"}, "'/logLevel'"},
		{"misspelt key", map[string]any{"replicas": 3}, "'replicas' not allowed"},
		{"serviceMonitor without metrics", map[string]any{"metrics": map[string]any{"enabled": false, "serviceMonitor": map[string]any{"enabled": true}}}, "metrics.enabled"},
		{"certSecret without metrics", map[string]any{"metrics": map[string]any{"enabled": false, "certSecret": "sg-metrics-tls"}}, "metrics.enabled"},
		{"certSecret not a Secret name", map[string]any{"metrics": map[string]any{"certSecret": "Metrics_TLS"}}, "'/metrics/certSecret'"},
		{"maxConcurrentReconciles zero", map[string]any{"maxConcurrentReconciles": 0}, "'/maxConcurrentReconciles'"},
		{"kubeAPIQPS zero", map[string]any{"kubeAPIQPS": 0}, "'/kubeAPIQPS'"},
		{"kubeAPIQPS a word", map[string]any{"kubeAPIQPS": "fast"}, "'/kubeAPIQPS'"},
		{"kubeAPIBurst negative", map[string]any{"kubeAPIBurst": -1}, "'/kubeAPIBurst'"},
		{"extraArgs a string", map[string]any{"extraArgs": "--zap-devel"}, "'/extraArgs'"},
		{"extraArgs a number", map[string]any{"extraArgs": []any{8}}, "'/extraArgs/0'"},
		{"extraVolumeMounts without mountPath", map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "x"}}}, "'/extraVolumeMounts/0'"},
		{"extraVolumes without name", map[string]any{"extraVolumes": []any{map[string]any{"emptyDir": map[string]any{}}}}, "'/extraVolumes/0'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := withImage(tc.values)
			if img, ok := tc.values["image"].(map[string]any); ok {
				img["repository"] = repository
				vals["image"] = img
			}
			_, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", vals)
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
		"image": map[string]any{"repository": "registry.example/schemagate", "tag": "v0.2.0", "pullPolicy": "Always",
			"digest": "sha256:" + strings.Repeat("ab", 32)},
		"imagePullSecrets":        []any{map[string]any{"name": "regcred"}},
		"replicaCount":            3,
		"logLevel":                "debug",
		"maxConcurrentReconciles": 8,
		"kubeAPIQPS":              50,
		"kubeAPIBurst":            1000000, // a float64 in Helm's values: must not print as 1e+06
		"extraArgs":               []any{"--zap-encoder=console", "--enable-http2"},
		"extraVolumes":            []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}},
		"extraVolumeMounts":       []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}},
		"nodeSelector":            map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":             []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		"metrics": map[string]any{
			"certSecret": "sg-metrics-tls",
			"serviceMonitor": map[string]any{
				"enabled": true, "labels": map[string]any{"release": "prometheus"},
				"extraEndpointConfig": map[string]any{
					"scrapeTimeout": "10s",
					"tlsConfig":     map[string]any{"insecureSkipVerify": false, "serverName": "schemagate-manager-metrics.schemagate-system.svc"},
				},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	d := oneDeployment(t, objs)
	checkManagerPod(t, d)
	pod, c := d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0]
	switch {
	case c.Image != "registry.example/schemagate:v0.2.0@sha256:"+strings.Repeat("ab", 32) || c.ImagePullPolicy != corev1.PullAlways:
		t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
	case *d.Spec.Replicas != 3:
		t.Errorf("replicas %d", *d.Spec.Replicas)
	case len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred":
		t.Errorf("imagePullSecrets %v", pod.ImagePullSecrets)
	case pod.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Tolerations) != 1:
		t.Errorf("nodeSelector %v tolerations %v", pod.NodeSelector, pod.Tolerations)
	}
	for _, arg := range []string{"--zap-log-level=debug", "--max-concurrent-reconciles=8", "--kube-api-qps=50",
		"--kube-api-burst=1000000", "--metrics-cert-dir=/etc/schemagate/metrics-cert"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	// extraArgs come last, so that they win over the chart's own for the same flag.
	if n := len(c.Args); n < 2 || c.Args[n-2] != "--zap-encoder=console" || c.Args[n-1] != "--enable-http2" {
		t.Errorf("args %v do not end with extraArgs", c.Args)
	}
	// The certificate Secret, mounted read-only where --metrics-cert-dir points, beside the
	// extra volume.
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	if v := vols["metrics-cert"]; v.Secret == nil || v.Secret.SecretName != "sg-metrics-tls" {
		t.Errorf("volume metrics-cert %+v, want the Secret sg-metrics-tls", v)
	}
	if v := vols["scratch"]; v.EmptyDir == nil || len(vols) != 2 {
		t.Errorf("volumes %+v, want metrics-cert and scratch", pod.Volumes)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["metrics-cert"]; m.MountPath != "/etc/schemagate/metrics-cert" || !m.ReadOnly {
		t.Errorf("mount metrics-cert %+v, want read-only at /etc/schemagate/metrics-cert", m)
	}
	if m := mounts["scratch"]; m.MountPath != "/scratch" || len(mounts) != 2 {
		t.Errorf("mounts %+v, want metrics-cert and scratch", c.VolumeMounts)
	}

	sm := only(objs, "ServiceMonitor", "schemagate-system")
	if len(sm) != 1 {
		t.Fatalf("want 1 ServiceMonitor, got %d", len(sm))
	}
	if labels, _ := sm[0].Raw["metadata"].(map[string]any)["labels"].(map[string]any); labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor labels %v lack release=prometheus", labels)
	}
	ep := endpoint(t, sm[0])
	tls, _ := ep["tlsConfig"].(map[string]any)
	switch {
	case ep["port"] != "https" || ep["scheme"] != "https" || ep["path"] != "/metrics" || ep["interval"] != "30s":
		t.Errorf("endpoint %v lost the chart's port, scheme, path or interval", ep)
	case ep["scrapeTimeout"] != "10s" || ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token":
		t.Errorf("endpoint %v: want scrapeTimeout merged in and bearerTokenFile kept", ep)
	case tls["insecureSkipVerify"] != false || tls["serverName"] != "schemagate-manager-metrics.schemagate-system.svc":
		t.Errorf("tlsConfig %v: want extraEndpointConfig's", tls)
	}
}

// A ServiceMonitor endpoint given authorization (a Secret's token) scrapes with it, not also
// with the Prometheus pod's token file.
func TestChartServiceMonitorAuthorization(t *testing.T) {
	auth := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "scraper-token", "key": "token"}}
	r, err := RenderChart(ChartDir(), "sg", "ops", withImage(map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "extraEndpointConfig": map[string]any{"authorization": auth}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	sm := only(objects(t, []byte(r.Manifest)), "ServiceMonitor", "ops")
	if len(sm) != 1 || sm[0].Name != "sg-schemagate-manager-metrics" {
		t.Fatalf("ServiceMonitors %v, want ops/sg-schemagate-manager-metrics", sm)
	}
	ep := endpoint(t, sm[0])
	if _, ok := ep["bearerTokenFile"]; ok || ep["authorization"] == nil {
		t.Errorf("endpoint %v: want authorization and no bearerTokenFile", ep)
	}
}

// endpoint returns a ServiceMonitor's only endpoint.
func endpoint(t *testing.T, sm installer.Object) map[string]any {
	t.Helper()
	eps, _ := sm.Raw["spec"].(map[string]any)["endpoints"].([]any)
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want 1", eps)
	}
	ep, _ := eps[0].(map[string]any)
	return ep
}

// Helm keeps each release in a Secret: the release, chart files included (the 1.9 MB CRD), as
// JSON, gzipped, base64-encoded (helm's storage/driver). A Secret holds at most 1 MiB
// (k8s.io/api core/v1 MaxSecretSize), so a chart whose release grows past it can be rendered but
// never installed.
func TestChartReleaseFitsASecret(t *testing.T) {
	r, err := RenderChart(ChartDir(), "schemagate", "schemagate-system", withImage(nil))
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

// hubID names the hub: the manager is told so, and the ClusterRole that lets it read the
// kube-system namespace's UID (its identity otherwise) is not rendered; without it the
// ClusterRole grants get on that one namespace and nothing else.
func TestChartHubID(t *testing.T) {
	r, err := RenderChart(ChartDir(), "sg", "ops", withImage(map[string]any{"hubID": "hub-eu-1"}))
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, []byte(r.Manifest))
	d := oneDeployment(t, objs)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--hub-id=hub-eu-1") {
		t.Errorf("args %v lack --hub-id=hub-eu-1", d.Spec.Template.Spec.Containers[0].Args)
	}
	for _, o := range only(objs, "ClusterRole", "") {
		for _, rule := range decode[rbacv1.ClusterRole](t, o).Rules {
			if slices.Contains(rule.Resources, "namespaces") {
				t.Errorf("ClusterRole %s grants %v although hubID is set", o.Name, rule)
			}
		}
	}
	r, err = RenderChart(ChartDir(), "sg", "ops", teams)
	if err != nil {
		t.Fatal(err)
	}
	objs = objects(t, []byte(r.Manifest))
	found := false
	for _, o := range only(objs, "ClusterRole", "") {
		for _, rule := range decode[rbacv1.ClusterRole](t, o).Rules {
			if !slices.Contains(rule.Resources, "namespaces") {
				continue
			}
			found = true
			if !slices.Equal(rule.ResourceNames, []string{"kube-system"}) || !slices.Equal(rule.Verbs, []string{"get"}) {
				t.Errorf("ClusterRole %s: %v, want get on kube-system only", o.Name, rule)
			}
		}
	}
	if !found {
		t.Error("no ClusterRole lets the manager read kube-system's UID")
	}
	if _, err := RenderChart(ChartDir(), "sg", "ops", withImage(map[string]any{"hubID": "two words"})); err == nil {
		t.Error("hubID with a space rendered")
	}
}

// The migration probe is on by default, with the manager's own image (it holds
// /schemagate-schema) and the official postgres image; probe.image and probe.databaseImage name
// others, and probe.enabled false turns it off (--probe-image= with nothing).
func TestChartProbe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
	}{
		{"defaults", nil, []string{"--probe-image=" + repository + ":0.1.0", "--probe-database-image=postgres:18"}},
		{"by digest", map[string]any{"image": map[string]any{"repository": repository, "tag": "v1", "digest": "sha256:" + strings.Repeat("a", 64)}},
			[]string{"--probe-image=" + repository + ":v1@sha256:" + strings.Repeat("a", 64)}},
		{"images named", map[string]any{"probe": map[string]any{"image": "mirror.example/sg:v1", "databaseImage": "mirror.example/postgres:16"}},
			[]string{"--probe-image=mirror.example/sg:v1", "--probe-database-image=mirror.example/postgres:16"}},
		{"off", map[string]any{"probe": map[string]any{"enabled": false}}, []string{"--probe-image="}},
	} {
		values := withImage(tc.values)
		r, err := RenderChart(ChartDir(), "sg", "ops", values)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		args := oneDeployment(t, objects(t, []byte(r.Manifest))).Spec.Template.Spec.Containers[0].Args
		for _, w := range tc.want {
			if !slices.Contains(args, w) {
				t.Errorf("%s: args %v lack %s", tc.name, args, w)
			}
		}
		if tc.name == "off" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--probe-database-image") }) {
			t.Errorf("off: args %v", args)
		}
	}
}
