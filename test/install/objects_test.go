package install

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
)

// objects decodes a manifest, failing the test on YAML errors.
func objects(t *testing.T, manifest []byte) []installer.Object {
	t.Helper()
	objs, err := installer.SplitDocuments(manifest)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// only returns the objects of kind; namespace "" matches any.
func only(objs []installer.Object, kind, namespace string) []installer.Object {
	var out []installer.Object
	for _, o := range objs {
		if o.Kind == kind && (namespace == "" || o.Namespace == namespace) {
			out = append(out, o)
		}
	}
	return out
}

// decode converts a generic object into a typed one (e.g. *appsv1.Deployment), failing on
// unknown shapes.
func decode[T any](t *testing.T, o installer.Object) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Raw, &v, true); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Name, err)
	}
	return &v
}

// oneDeployment returns the manifest's only Deployment.
func oneDeployment(t *testing.T, objs []installer.Object) *appsv1.Deployment {
	t.Helper()
	ds := only(objs, "Deployment", "")
	if len(ds) != 1 {
		t.Fatalf("want 1 Deployment, got %d", len(ds))
	}
	return decode[appsv1.Deployment](t, ds[0])
}

// checkManagerPod asserts the settings both installers promise for the manager's pod: restricted
// Pod Security (non-root as 65532:65532, RuntimeDefault seccomp, no privilege escalation, all capabilities
// dropped, read-only root), probes on /healthz and /readyz at 8081, resource requests and
// limits, leader election on, metrics on :8443 behind a port named https.
func checkManagerPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod securityContext.runAsNonRoot not true: %+v", pod.SecurityContext)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile not RuntimeDefault: %+v", pod.SecurityContext)
	}
	// The image's nonroot user and group (docs/image.md).
	if sc := pod.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.RunAsGroup == nil || *sc.RunAsGroup != 65532 {
		t.Errorf("pod securityContext does not run as 65532:65532: %+v", sc)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want 1 container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation not false")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem not true")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("capabilities.drop = %v, want [ALL]", sc.Capabilities)
	}
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name {
			t.Errorf("no probe on %s: %+v", name, p)
			continue
		}
		if port := containerPort(c, p.HTTPGet.Port.String()); port != 8081 {
			t.Errorf("probe %s on port %s = %d, want 8081", name, p.HTTPGet.Port.String(), port)
		}
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("no %s request", r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("no %s limit", r)
		}
	}
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("args %v lack --leader-elect", c.Args)
	}
	if !slices.Contains(c.Args, "--health-probe-bind-address=:8081") {
		t.Errorf("args %v lack --health-probe-bind-address=:8081", c.Args)
	}
}

// checkMetrics asserts the manager serves metrics on :8443 behind a container port named
// https, and that svc forwards its port https (8443) there.
func checkMetrics(t *testing.T, d *appsv1.Deployment, svc *corev1.Service) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--metrics-bind-address=:8443") {
		t.Errorf("args %v lack --metrics-bind-address=:8443", c.Args)
	}
	if containerPort(c, "https") != 8443 {
		t.Errorf("container port https is not 8443: %+v", c.Ports)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "https" {
		t.Errorf("metrics Service ports = %+v, want https 8443 → https", svc.Spec.Ports)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selects %s=%s, which the manager pods lack", k, v)
		}
	}
}

// containerPort resolves a probe or Service port (a number or a port name) to a number.
func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	var n int32
	_, _ = fmt.Sscan(port, &n)
	return n
}

// grant is one permission: verb on group/resource (subresource included, "pods/log"), or verb on
// a non-resource URL (group and resource empty).
type grant struct{ group, resource, url, verb string }

func (g grant) String() string {
	if g.url != "" {
		return g.verb + " " + g.url
	}
	return fmt.Sprintf("%s %s.%s", g.verb, g.resource, g.group)
}

// grants expands rules into single permissions. Wildcards are kept as "*", which allows() honours.
func grants(rules []rbacv1.PolicyRule) []grant {
	var out []grant
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out = append(out, grant{url: u, verb: v})
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					out = append(out, grant{group: g, resource: res, verb: v})
				}
			}
		}
	}
	return out
}

// missing returns the permissions in want that have lacks, honouring "*" in have.
func missing(have, want []rbacv1.PolicyRule) []string {
	match := func(h, w string) bool { return h == "*" || h == w }
	var out []string
	for _, w := range grants(want) {
		ok := slices.ContainsFunc(grants(have), func(h grant) bool {
			return match(h.verb, w.verb) && match(h.group, w.group) && match(h.resource, w.resource) && h.url == w.url
		})
		if !ok {
			out = append(out, w.String())
		}
	}
	return out
}

// generatedRules reads config/rbac/role.yaml, which controller-gen writes from the reconciler's
// RBAC markers: what the manager needs.
func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := ReadFile("config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	roles := only(objects(t, b), "ClusterRole", "")
	if len(roles) != 1 {
		t.Fatalf("config/rbac/role.yaml: want 1 ClusterRole, got %d", len(roles))
	}
	return decode[rbacv1.ClusterRole](t, roles[0]).Rules
}

// perNamespaceRules returns the rules of config/rbac/namespaced_role.yaml: Secrets get and pods
// delete, granted only where a binding says (docs/security.md).
func perNamespaceRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	b, err := ReadFile("config/rbac/namespaced_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	roles := only(objects(t, b), "ClusterRole", "")
	if len(roles) != 1 || roles[0].Name != "schemagate-manager-namespaced" {
		t.Fatalf("config/rbac/namespaced_role.yaml: want the one ClusterRole schemagate-manager-namespaced, got %d", len(roles))
	}
	return decode[rbacv1.ClusterRole](t, roles[0]).Rules
}
