package spoke

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
	"github.com/schemagate/schemagate/test/install"
)

// granted is the brief's grant, as (group, resource, verb) triples: in the one namespace,
// replicasets get,list,watch,create,patch,delete; pods list,watch,delete; configmaps
// get,list,watch,create,patch,delete (the anchor: never update); poddisruptionbudgets get,list,watch,create,patch,
// delete; events create,patch (core and events.k8s.io).
func granted() []string {
	var out []string
	add := func(group, resource string, verbs ...string) {
		for _, v := range verbs {
			out = append(out, group+"/"+resource+":"+v)
		}
	}
	add("apps", "replicasets", "get", "list", "watch", "create", "patch", "delete")
	add("", "pods", "list", "watch", "delete")
	add("", "pods/status", "patch")                                    // the readiness gate of a check at PodReady
	add("batch", "jobs", "list", "watch", "create", "patch", "delete") // job checks; schema Jobs with runWithShard
	add("", "configmaps", "get", "list", "watch", "create", "patch", "delete")
	add("policy", "poddisruptionbudgets", "get", "list", "watch", "create", "patch", "delete")
	add("", "events", "create", "patch")
	add("events.k8s.io", "events", "create", "patch")
	sort.Strings(out)
	return out
}

// triples expands rules into sorted (group, resource, verb) triples; resourceNames and
// nonResourceURLs are reported as such, so that no narrowing or widening passes unseen.
func triples(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					s := g + "/" + res + ":" + v
					if len(r.ResourceNames) > 0 {
						s += fmt.Sprintf("%v", r.ResourceNames)
					}
					out = append(out, s)
				}
			}
		}
		for _, u := range r.NonResourceURLs {
			out = append(out, "url "+u)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func decode[T any](t *testing.T, o installer.Object) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Raw, &v, true); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Name, err)
	}
	return &v
}

// summary is what must agree between config/spoke and the chart: every object's kind, namespace
// and name; the Role's grant; the RoleBinding's role and subjects (an unqualified ServiceAccount
// subject is in the binding's namespace, as RBAC resolves it); the token Secret's type and
// ServiceAccount.
func summary(t *testing.T, manifest []byte) []string {
	t.Helper()
	objs, err := installer.SplitDocuments(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		id := o.Kind + " " + o.Namespace + "/" + o.Name
		out = append(out, id)
		switch o.Kind {
		case "Role":
			for _, tr := range triples(decode[rbacv1.Role](t, o).Rules) {
				out = append(out, id+" grants "+tr)
			}
		case "RoleBinding":
			b := decode[rbacv1.RoleBinding](t, o)
			out = append(out, fmt.Sprintf("%s binds %s %s", id, b.RoleRef.Kind, b.RoleRef.Name))
			for _, s := range b.Subjects {
				ns := s.Namespace
				if ns == "" && s.Kind == rbacv1.ServiceAccountKind {
					ns = b.Namespace
				}
				out = append(out, fmt.Sprintf("%s to %s %s/%s", id, s.Kind, ns, s.Name))
			}
		case "Secret":
			s := decode[corev1.Secret](t, o)
			out = append(out, fmt.Sprintf("%s %s for %s", id, s.Type, s.Annotations[corev1.ServiceAccountNameKey]))
		}
	}
	sort.Strings(out)
	return out
}

func diff(a, b []string) (onlyA, onlyB []string) {
	for _, s := range a {
		if !slices.Contains(b, s) {
			onlyA = append(onlyA, s)
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			onlyB = append(onlyB, s)
		}
	}
	return onlyA, onlyB
}

// The chart with its defaults, installed into a namespace, renders what config/spoke builds into
// the same namespace: the same objects, the same grant, the same binding and token Secret.
func TestChartMatchesKustomization(t *testing.T) {
	const ns = "team-a"
	k, err := Manifest(ns)
	if err != nil {
		t.Fatal(err)
	}
	r, err := install.RenderChart(ChartDir(), "spoke", ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, got := summary(t, k), summary(t, []byte(r.Manifest))
	onlyK, onlyC := diff(want, got)
	for _, s := range onlyK {
		t.Errorf("config/spoke only: %s", s)
	}
	for _, s := range onlyC {
		t.Errorf("chart only: %s", s)
	}
	if len(want) < 4 {
		t.Fatalf("config/spoke built only %v", want)
	}
}

// Both grant exactly the brief's rules, in their namespace only: four objects (ServiceAccount,
// Role, RoleBinding, token Secret), nothing cluster-scoped, the binding to the Role in the same
// namespace.
func TestGrantIsExactlyTheShardsNeeds(t *testing.T) {
	const ns = "spoke-ns"
	k, err := Manifest(ns)
	if err != nil {
		t.Fatal(err)
	}
	r, err := install.RenderChart(ChartDir(), "spoke", "elsewhere", map[string]any{"namespace": ns})
	if err != nil {
		t.Fatal(err)
	}
	for name, manifest := range map[string][]byte{"config/spoke": k, "chart": []byte(r.Manifest)} {
		t.Run(name, func(t *testing.T) {
			objs, err := installer.SplitDocuments(manifest)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.Kind)
				if o.Namespace != ns {
					t.Errorf("%s %s in namespace %q, want %q", o.Kind, o.Name, o.Namespace, ns)
				}
				switch o.Kind {
				case "Role":
					if got, want := triples(decode[rbacv1.Role](t, o).Rules), granted(); !slices.Equal(got, want) {
						extra, lacking := diff(got, want)
						t.Errorf("Role %s grants also %v and lacks %v", o.Name, extra, lacking)
					}
				case "RoleBinding":
					b := decode[rbacv1.RoleBinding](t, o)
					if b.RoleRef.Kind != "Role" || b.RoleRef.Name != ServiceAccount {
						t.Errorf("RoleBinding refers to %s %s", b.RoleRef.Kind, b.RoleRef.Name)
					}
					if len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind || b.Subjects[0].Name != ServiceAccount ||
						(b.Subjects[0].Namespace != "" && b.Subjects[0].Namespace != ns) {
						t.Errorf("RoleBinding subjects %+v", b.Subjects)
					}
				case "Secret":
					s := decode[corev1.Secret](t, o)
					if s.Name != TokenSecret || s.Type != corev1.SecretTypeServiceAccountToken || s.Annotations[corev1.ServiceAccountNameKey] != ServiceAccount {
						t.Errorf("Secret %s type %s for %q", s.Name, s.Type, s.Annotations[corev1.ServiceAccountNameKey])
					}
				}
			}
			sort.Strings(kinds)
			if want := []string{"Role", "RoleBinding", "Secret", "ServiceAccount"}; !slices.Equal(kinds, want) {
				t.Errorf("kinds %v, want %v", kinds, want)
			}
		})
	}
}

// The chart's values rename everything after serviceAccount.name and move it to namespace.
func TestChartValues(t *testing.T) {
	r, err := install.RenderChart(ChartDir(), "spoke", "default", map[string]any{
		"namespace": "payments", "serviceAccount": map[string]any{"name": "hub-eu"}})
	if err != nil {
		t.Fatal(err)
	}
	got := summary(t, []byte(r.Manifest))
	for _, want := range []string{
		"ServiceAccount payments/hub-eu", "Role payments/hub-eu", "RoleBinding payments/hub-eu binds Role hub-eu",
		"RoleBinding payments/hub-eu to ServiceAccount payments/hub-eu",
		"Secret payments/hub-eu-token kubernetes.io/service-account-token for hub-eu",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("no %q in %v", want, got)
		}
	}
	if _, err := install.RenderChart(ChartDir(), "spoke", "default", map[string]any{"serviceAccount": map[string]any{"name": "Not_A_Name"}}); err == nil {
		t.Error("serviceAccount.name Not_A_Name rendered")
	}
}

// `helm lint --strict` finds nothing.
func TestChartLint(t *testing.T) {
	kv, err := common.ParseKubeVersion(install.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	res := lint.RunAll(ChartDir(), nil, "spoke-ns", lint.WithKubeVersion(kv))
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("lint: %s", m)
		}
	}
}
