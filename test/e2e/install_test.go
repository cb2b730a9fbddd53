//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/hack/render-installer/installer"
	"github.com/schemagate/schemagate/test/install"
	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/story"
)

// TestInstall installs schemagate as a cluster administrator would, on a control plane of its
// own whose kube-apiserver enforces OwnerReferencesPermissionEnforcement (the suite's shared
// cluster does not, and its manager runs as admin, which the plugin never checks):
//
//  1. dist/install.yaml, server-side apply, dry run then for real: every object exists, and the
//     manager Deployment's pods pass the namespace's restricted Pod Security level. kwok stands
//     in for the kubelet, so those pods are Running and Ready without running any container.
//  2. The manager binary runs as the installer's ServiceAccount (a TokenRequest token): its
//     RBAC, and nothing more, must let it create a RoutingService's Job and ReplicaSet, whose
//     owner references block their owner's deletion (the plugin asks for update on
//     routingservices/finalizers), hold its leader Lease and serve metrics to a reader bound to
//     schemagate-metrics-reader only.
//  3. The Helm chart rendered with the Helm v4 library and applied the same way (its crds/ with
//     Helm's field manager, as Helm v4 creates them), then upgraded to watchNamespaces
//     [team-a, team-b] as `helm upgrade` would (objects the new render lacks are deleted, crds/
//     left alone): the CRD and the RoutingServices survive, and a manager running as the chart's
//     ServiceAccount with --watch-namespaces acts in team-a through its Role. A changed CRD
//     applied server-side as docs/install.md says conflicts with Helm's field manager without
//     --force-conflicts and goes through with it.
//  4. The one-file install's manager removed as docs/install.md says (`kubectl delete -f
//     dist/install.yaml -l app.kubernetes.io/name=schemagate`): its Deployment, RBAC and Service
//     are gone; the CRD (same UID), the namespace, the RoutingService and its ReplicaSet, and the
//     chart's objects, which carry the same label but are not in the file, stay.
func TestInstall(t *testing.T) {
	t.Parallel() // its own control plane; nothing on the real stack
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ic, c := startOwnCluster(t, ctx, "schemagate-install-", "--enable-admission-plugins=OwnerReferencesPermissionEnforcement")
	state := filepath.Dir(ic.Kubeconfig)
	kubectl := kubectlOn(ic.Kubeconfig)
	step := func(name string) func() {
		s := time.Now()
		return func() { t.Logf("%-44s %5.1fs", name, time.Since(s).Seconds()) }
	}
	t.Logf("%-44s %5.1fs", "cluster with OwnerReferencesPermissionEnforcement", time.Since(start).Seconds())

	// 1. The one-file installer.
	done := step("dist/install.yaml applied, objects checked")
	dist := filepath.Join(rootDir, "dist", "install.yaml")
	distBytes, err := os.ReadFile(dist)
	if err != nil {
		t.Fatal(err)
	}
	// A server-side dry run creates nothing, not even the namespace the other objects are
	// checked against: on a fresh cluster it needs the namespace first (docs/install.md).
	if _, err := kubectl("create", "namespace", "schemagate-system"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("apply", "--server-side", "--dry-run=server", "-f", dist); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "routingservices.routing.schemagate.io"}, &apiextensionsv1.CustomResourceDefinition{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the dry run, the CRD: %v (want NotFound)", err)
	}
	if _, err := kubectl("apply", "--server-side", "-f", dist); err != nil {
		t.Fatal(err)
	}
	objs, err := installer.SplitDocuments(distBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind))
		if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u); err != nil {
			t.Errorf("%s %s/%s: %v", o.Kind, o.Namespace, o.Name, err)
		}
	}
	story.Eventually(t, 30*time.Second, "the installer's Deployment has 2 ready (kwok) pods", func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: "schemagate-system", Name: "schemagate-manager"}, &d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%d ready; conditions %+v", d.Status.ReadyReplicas, d.Status.Conditions)
		}
		return nil
	})
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "routingservices.routing.schemagate.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	done()

	// 2. The manager with the installer's RBAC only.
	done = step("manager as schemagate-system/schemagate-manager")
	mgr := runManagerAs(t, ic, "schemagate-system", "schemagate-manager", "--leader-elect=true", "--leader-election-namespace=schemagate-system")
	ensureNamespace(t, c, "shop")
	waitForReplicaSet(t, c, "shop", mgr)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "schemagate-system", Name: "schemagate-manager"}, &appsv1.Deployment{}); err != nil {
		t.Error(err)
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace("schemagate-system")); err != nil || len(leases.Items) == 0 {
		t.Errorf("no leader Lease in schemagate-system: %v", err)
	}
	checkMetricsReader(t, c, ic, mgr.metricsURL, "schemagate-metrics-reader")
	mgr.stop(t)
	done()

	// 3. The chart: install cluster-wide, then upgrade to namespace-scoped.
	done = step("chart installed and upgraded")
	for _, ns := range []string{"sg-ops", "team-a", "team-b"} {
		ensureNamespace(t, c, ns)
	}
	image := map[string]any{"repository": "registry.example/schemagate", "tag": "v0.1.0"}
	first, err := install.RenderChart(install.ChartDir(), "sg", "sg-ops", map[string]any{"image": image})
	if err != nil {
		t.Fatal(err)
	}
	// Helm v4 creates crds/ by server-side apply with its own field manager ("helm", its
	// binary's name), then the templates.
	crdFile := filepath.Join(state, "chart-crds.yaml")
	if err := os.WriteFile(crdFile, bytes.Join(first.CRDs, []byte("\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("apply", "--server-side", "--field-manager=helm", "-f", crdFile); err != nil {
		t.Fatal(err)
	}
	applyRendered(t, kubectl, state, "chart-install.yaml", []byte(first.Manifest))
	second, err := install.RenderChart(install.ChartDir(), "sg", "sg-ops", map[string]any{
		"image": image, "watchNamespaces": []any{"team-a", "team-b"}, "replicaCount": 1, "logLevel": "debug",
	})
	if err != nil {
		t.Fatal(err)
	}
	// helm upgrade applies the new templates and deletes what the new render lacks; it never
	// touches crds/.
	applyRendered(t, kubectl, state, "chart-upgrade.yaml", []byte(second.Manifest))
	for _, gone := range removed(t, first.Manifest, second.Manifest) {
		if _, err := kubectl(append([]string{"delete"}, gone...)...); err != nil {
			t.Fatal(err)
		}
		t.Logf("upgrade removed %s", gone)
	}
	var after apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &after); err != nil || after.UID != crd.UID {
		t.Fatalf("CRD after the upgrade: %v, uid %s (was %s)", err, after.UID, crd.UID)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "rs-a"}, &routingv1alpha1.RoutingService{}); err != nil {
		t.Errorf("RoutingService shop/rs-a after the chart's install and upgrade: %v", err)
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: "sg-ops", Name: "sg-schemagate-manager"}, &d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--watch-namespaces=team-a,team-b") {
		t.Errorf("upgraded Deployment: replicas %d, args %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	done()

	done = step("changed CRD applied over Helm's")
	upgradeCRD(t, c, kubectl, crdFile, crd.UID)
	done()

	done = step("manager as sg-ops/sg-schemagate-manager, team-a")
	mgr = runManagerAs(t, ic, "sg-ops", "sg-schemagate-manager", "--leader-elect=true", "--leader-election-namespace=sg-ops", "--watch-namespaces=team-a,team-b")
	waitForReplicaSet(t, c, "team-a", mgr)
	checkMetricsReader(t, c, ic, mgr.metricsURL, "sg-schemagate-metrics-reader")
	mgr.stop(t)
	done()

	// 4. The one-file install's manager removed, the CRD kept.
	done = step("one-file manager deleted by label, CRD kept")
	if _, err := kubectl("delete", "-f", dist, "-l", install.ManagerSelector); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind))
		err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u)
		switch kept := o.Kind == "CustomResourceDefinition" || o.Kind == "Namespace"; {
		case kept && err != nil:
			t.Errorf("%s %s deleted: %v", o.Kind, o.Name, err)
		case !kept && !apierrors.IsNotFound(err):
			t.Errorf("%s %s/%s still there: %v", o.Kind, o.Namespace, o.Name, err)
		}
	}
	var kept apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &kept); err != nil || kept.UID != crd.UID {
		t.Errorf("CRD after the delete: %v, uid %s (was %s)", err, kept.UID, crd.UID)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "rs-a"}, &routingv1alpha1.RoutingService{}); err != nil {
		t.Errorf("RoutingService shop/rs-a after the delete: %v", err)
	}
	var rss appsv1.ReplicaSetList
	if err := c.List(ctx, &rss, client.InNamespace("shop")); err != nil || len(rss.Items) == 0 {
		t.Errorf("shop's ReplicaSets after the delete: %d, %v", len(rss.Items), err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "sg-ops", Name: "sg-schemagate-manager"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("the chart's Deployment, not in dist/install.yaml: %v", err)
	}
	done()
	t.Logf("%-44s %5.1fs", "total", time.Since(start).Seconds())
}

// upgradeCRD applies a changed copy of the chart's CRD (file, created with Helm's field manager)
// as docs/install.md says: server-side without --force-conflicts it must be refused for a
// conflict with "helm", with it the change must land on the same CRD (uid).
func upgradeCRD(t *testing.T, c client.Client, kubectl func(...string) (string, error), file string, uid types.UID) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// A new value for an annotation both kubectl (dist/install.yaml) and Helm applied.
	const from, to = "controller-gen.kubebuilder.io/version: ", "controller-gen.kubebuilder.io/version: next-"
	if !bytes.Contains(b, []byte(from)) {
		t.Fatalf("%s lacks %q to change", file, from)
	}
	changed := filepath.Join(filepath.Dir(file), "chart-crds-next.yaml")
	if err := os.WriteFile(changed, bytes.Replace(b, []byte(from), []byte(to), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl("apply", "--server-side", "-f", changed)
	if err == nil || !strings.Contains(out, `conflict with "helm"`) {
		t.Errorf("without --force-conflicts: %v, %s; want a conflict with \"helm\"", err, out)
	}
	if _, err := kubectl("apply", "--server-side", "--force-conflicts", "-f", changed); err != nil {
		t.Fatal(err)
	}
	var got apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: "routingservices.routing.schemagate.io"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.UID != uid || !strings.HasPrefix(got.Annotations["controller-gen.kubebuilder.io/version"], "next-") {
		t.Errorf("CRD after --force-conflicts: uid %s (was %s), annotations %v", got.UID, uid, got.Annotations)
	}
}

// managerRun is a manager process running as a ServiceAccount.
type managerRun struct {
	proc       *localcluster.Process
	metricsURL string
	// as is a client that acts as the manager's ServiceAccount (the admin impersonating it).
	as client.Client
}

// runManagerAs starts bin/manager with a kubeconfig holding a token of ServiceAccount ns/sa,
// secure metrics on a free loopback port and extra args.
func runManagerAs(t *testing.T, ic *localcluster.Cluster, ns, sa string, args ...string) *managerRun {
	t.Helper()
	kc, _ := serviceAccountKubeconfig(t, ic.Config, ic.Kubeconfig, ns, sa)
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"--kubeconfig=" + kc, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--health-probe-bind-address=0"}, args...)
	p, err := localcluster.StartProcess("manager-"+sa, filepath.Join(binDir, "manager"), args, filepath.Join(filepath.Dir(ic.Kubeconfig), "logs", "manager-"+ns+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	cfg := rest.CopyConfig(ic.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	as, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &managerRun{proc: p, metricsURL: fmt.Sprintf("https://127.0.0.1:%d/metrics", port), as: as}
}

func (m *managerRun) stop(t *testing.T) {
	t.Helper()
	if !m.proc.Running() {
		t.Errorf("the manager exited: %s", m.proc.Tail(3000))
	}
	m.proc.Stop(5 * time.Second)
	if lines := forbiddenLines(t, m.proc.Log); len(lines) > 0 {
		t.Errorf("the manager was refused %d requests, e.g. %s", len(lines), lines[0])
	}
}

// waitForReplicaSet creates rs-a (one shard of 1 in us-east-1, schema confirmed by the
// migration Job's success) in ns and waits for the ReplicaSet it owns: the manager created the
// Job and then the ReplicaSet, both with blockOwnerDeletion owner references.
func waitForReplicaSet(t *testing.T, c client.Client, ns string, m *managerRun) {
	t.Helper()
	r := story.Fixture(ns)
	r.Spec.Shards = r.Spec.Shards[:1]
	r.Spec.Shards[0].Replicas = 1
	r.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
	r.Spec.Schema.Migration.BackoffLimit = ptr.To(int32(0))
	r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(30))
	// A CRD applied an instant ago may not be served yet ("no matches for kind"): ask again.
	story.Eventually(t, 30*time.Second, "RoutingService "+ns+"/rs-a created", func() error {
		if err := c.Create(context.Background(), r.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	// The API server's owner-reference admission maps a kind through discovery it refreshes every
	// 30 s: until then a create with blockOwnerDeletion on a RoutingService fails ("cannot find
	// RESTMapping"), and the manager's per-object backoff grows meanwhile (past a minute). Wait
	// until such a create passes, then touch rs-a: the event reconciles it at once. The probe is
	// a ReplicaSet of 0 replicas created as the manager's ServiceAccount: the plugin checks
	// nothing for the admin, so an admin's probe passes before the manager's create would.
	var created routingv1alpha1.RoutingService
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, &created); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 3*time.Minute, "the API server maps RoutingService for owner references", func() error {
		labels := map[string]string{"test.schemagate.io/owner-probe": "true"}
		probe := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{GenerateName: "owner-probe-", Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: routingv1alpha1.GroupVersion.String(), Kind: "RoutingService", Name: created.Name, UID: created.UID, BlockOwnerDeletion: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe:none"}}}}}}
		if err := m.as.Create(context.Background(), probe); err != nil {
			return err
		}
		return m.as.Delete(context.Background(), probe)
	})
	story.Eventually(t, 30*time.Second, "rs-a touched", func() error {
		var r routingv1alpha1.RoutingService
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, &r); err != nil {
			return err
		}
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations["test.schemagate.io/touched"] = time.Now().Format(time.RFC3339Nano)
		return c.Update(context.Background(), &r)
	})
	story.Eventually(t, time.Minute, "a ReplicaSet of "+ns+"/rs-a", func() error {
		if !m.proc.Running() {
			t.Fatalf("the manager exited: %s", m.proc.Tail(3000))
		}
		var list appsv1.ReplicaSetList
		if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Name == "rs-a" && ptr.Deref(ref.BlockOwnerDeletion, false) {
				return nil
			}
		}
		var now routingv1alpha1.RoutingService
		_ = c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, &now)
		return fmt.Errorf("%d ReplicaSets; rs-a's conditions %+v, schema %+v; manager log: %s", len(list.Items), now.Status.Conditions, now.Status.Schema, m.proc.Tail(600))
	})
}

// checkMetricsReader scrapes the manager's metrics with the tokens of two fresh ServiceAccounts:
// one bound to the ClusterRole reader gets 200, the other 403.
func checkMetricsReader(t *testing.T, c client.Client, ic *localcluster.Cluster, url, reader string) {
	t.Helper()
	ns := "scrapers-" + strings.TrimSuffix(reader, "-metrics-reader")
	createServiceAccount(t, c, ns, "prometheus")
	createServiceAccount(t, c, ns, "nobody")
	if err := c.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "prometheus"}},
	}); err != nil {
		t.Fatal(err)
	}
	_, allowed := serviceAccountKubeconfig(t, ic.Config, ic.Kubeconfig, ns, "prometheus")
	_, denied := serviceAccountKubeconfig(t, ic.Config, ic.Kubeconfig, ns, "nobody")
	story.Eventually(t, 20*time.Second, "metrics for "+reader, func() error {
		code, err := scrape(url, allowed)
		if err != nil || code != 200 {
			return fmt.Errorf("bound to %s: %d %v", reader, code, err)
		}
		if code, err = scrape(url, denied); err != nil || code != 403 {
			return fmt.Errorf("unbound: %d %v, want 403", code, err)
		}
		return nil
	})
}

// applyRendered writes manifest under state and applies it with server-side apply, a dry run
// first.
func applyRendered(t *testing.T, kubectl func(...string) (string, error), state, name string, manifest []byte) {
	t.Helper()
	path := filepath.Join(state, name)
	if err := os.WriteFile(path, manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dry := range []string{"--dry-run=server", "--dry-run=none"} {
		if _, err := kubectl("apply", "--server-side", dry, "-f", path); err != nil {
			t.Fatal(err)
		}
	}
}

// removed lists, as kubectl delete arguments, the objects of before that after lacks: what
// `helm upgrade` deletes.
func removed(t *testing.T, before, after string) [][]string {
	t.Helper()
	args := func(o installer.Object) []string {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		res := strings.ToLower(o.Kind)
		if gv.Group != "" {
			res += "." + gv.Version + "." + gv.Group
		}
		if o.Namespace == "" {
			return []string{res + "/" + o.Name}
		}
		return []string{res + "/" + o.Name, "-n", o.Namespace}
	}
	b, err := installer.SplitDocuments([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	a, err := installer.SplitDocuments([]byte(after))
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, o := range a {
		keep = append(keep, strings.Join(args(o), " "))
	}
	var out [][]string
	for _, o := range b {
		if !slices.Contains(keep, strings.Join(args(o), " ")) {
			out = append(out, args(o))
		}
	}
	return out
}
