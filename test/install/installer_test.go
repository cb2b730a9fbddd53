package install

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
)

// IMG as `make build-installer IMG=…` and `make deploy IMG=…` pass it must be the manager's
// image, whatever form the reference takes.
func TestInstallerSetsIMG(t *testing.T) {
	for _, img := range []string{
		"registry.example/schemagate:v0.1.0",
		"registry.example:5000/team/schemagate:v0.1.0",
		"registry.example/schemagate@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"schemagate",
	} {
		t.Run(img, func(t *testing.T) {
			want := img
			if img == "schemagate" {
				want = "schemagate:latest" // no tag: kustomize would keep config/manager's
			}
			out, err := installer.Render(filepath.Join(RepoRoot(), "config"), img)
			if err != nil {
				t.Fatal(err)
			}
			d := oneDeployment(t, objects(t, out))
			if got := d.Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("manager image = %q, want %q", got, want)
			}
		})
	}
}

// dist/install.yaml is what `make installer` renders from config/ today: a change under
// config/ without a new render fails here. The image is the one dist/install.yaml was rendered
// with (IMG), so only the rest is compared.
func TestInstallerIsFresh(t *testing.T) {
	dist, err := ReadFile("dist/install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	img := oneDeployment(t, objects(t, dist)).Spec.Template.Spec.Containers[0].Image
	want, err := installer.Render(filepath.Join(RepoRoot(), "config"), img)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dist, want) {
		t.Errorf("dist/install.yaml is stale (rendered with IMG=%s): run `make installer` and commit it", img)
	}
}

// The installer holds everything a cluster needs, in an order `kubectl apply -f` can follow
// (namespace and CRD first), with the manager's pod locked down and RBAC that grants at least
// what the reconciler's markers ask for.
func TestInstallerContents(t *testing.T) {
	dist, err := ReadFile("dist/install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := objects(t, dist)
	if objs[0].Kind != "Namespace" || objs[0].Name != "schemagate-system" {
		t.Errorf("first object is %s %s, want Namespace schemagate-system", objs[0].Kind, objs[0].Name)
	}
	ns := decode[corev1.Namespace](t, objs[0])
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace labels %v: want pod-security.kubernetes.io/enforce=restricted", ns.Labels)
	}
	if crds := only(objs, "CustomResourceDefinition", ""); len(crds) != 2 || crds[0].Name != "routingservices.routing.schemagate.io" || crds[1].Name != "routingshards.routing.schemagate.io" {
		var names []string
		for _, c := range crds {
			names = append(names, c.Name)
		}
		t.Errorf("CRDs %v, want routingservices and routingshards", names)
	}
	for _, o := range objs {
		if o.Kind != "Namespace" && o.Kind != "CustomResourceDefinition" && o.Kind != "ClusterRole" && o.Kind != "ClusterRoleBinding" && o.Namespace != "schemagate-system" {
			t.Errorf("%s %s is in namespace %q, want schemagate-system", o.Kind, o.Name, o.Namespace)
		}
	}

	d := oneDeployment(t, objs)
	checkManagerPod(t, d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas = %v, want ≥ 2 (one leads, one waits)", d.Spec.Replicas)
	}
	svcs := only(objs, "Service", "schemagate-system")
	if len(svcs) != 1 {
		t.Fatalf("want 1 Service, got %d", len(svcs))
	}
	checkMetrics(t, d, decode[corev1.Service](t, svcs[0]))

	// The ServiceAccount the pod runs as is bound to the generated ClusterRole and the leader
	// election Role.
	sa := d.Spec.Template.Spec.ServiceAccountName
	var bound []rbacv1.PolicyRule
	roles := map[string][]rbacv1.PolicyRule{}
	for _, o := range only(objs, "ClusterRole", "") {
		roles["ClusterRole/"+o.Name] = decode[rbacv1.ClusterRole](t, o).Rules
	}
	for _, o := range only(objs, "Role", "") {
		roles["Role/"+o.Name] = decode[rbacv1.Role](t, o).Rules
	}
	for _, o := range append(only(objs, "ClusterRoleBinding", ""), only(objs, "RoleBinding", "")...) {
		b := decode[rbacv1.ClusterRoleBinding](t, o) // same shape as a RoleBinding
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == "schemagate-system"
		}) {
			bound = append(bound, roles[b.RoleRef.Kind+"/"+b.RoleRef.Name]...)
		}
	}
	if m := missing(bound, generatedRules(t)); len(m) > 0 {
		t.Errorf("ServiceAccount %s lacks %v", sa, m)
	}
	leases := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	if m := missing(bound, leases); len(m) > 0 {
		t.Errorf("ServiceAccount %s lacks %v (leader election)", sa, m)
	}
	reader := roles["ClusterRole/schemagate-metrics-reader"]
	if m := missing(reader, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}); len(m) > 0 || len(reader) != 1 {
		t.Errorf("ClusterRole schemagate-metrics-reader = %+v, want only get /metrics", reader)
	}
}

// The selector picks every object of the installer but the CRD and the namespace: deleting with
// it removes the manager, its RBAC and its Service, and keeps the CRD, so RoutingServices and
// their ReplicaSets and pods survive. The Makefile and docs/install.md use this selector.
func TestManagerSelectorKeepsTheCRD(t *testing.T) {
	sel, err := labels.Parse(ManagerSelector)
	if err != nil {
		t.Fatal(err)
	}
	dist, err := ReadFile("dist/install.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var picked []string
	for _, o := range objects(t, dist) {
		meta, _ := o.Raw["metadata"].(map[string]any)
		set := labels.Set{}
		if m, ok := meta["labels"].(map[string]any); ok {
			for k, v := range m {
				set[k], _ = v.(string)
			}
		}
		keep := o.Kind == "CustomResourceDefinition" || o.Kind == "Namespace"
		if got := sel.Matches(set); got == keep {
			t.Errorf("%s %s: selected %v, want %v", o.Kind, o.Name, got, !keep)
		}
		if sel.Matches(set) {
			picked = append(picked, o.Kind)
		}
	}
	slices.Sort(picked)
	want := []string{"ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"}
	if !slices.Equal(picked, want) {
		t.Errorf("the selector picks %v, want %v", picked, want)
	}
	for _, f := range []string{"Makefile", "docs/install.md"} {
		b, err := ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("-l "+ManagerSelector)) {
			t.Errorf("%s does not delete with -l %s", f, ManagerSelector)
		}
	}
}
