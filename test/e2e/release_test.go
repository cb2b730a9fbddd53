//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/story"
)

// TestRelease installs, upgrades and removes schemagate from release folders, as a cluster owner
// would from a forge's release page, on a control plane of its own (docs/install.md):
//
//  1. `make release` of the previous version (v0.1.0, from its commit) and of this checkout
//     (v0.2.0-rc.1); checksums.txt holds for both; each image archive is pushed to a registry on
//     loopback and the registry serves the digest images.txt and install.yaml pin.
//  2. v0.1.0 by its two files (crds.yaml, then install.yaml): the Deployment runs the image by
//     digest. The manager binary pulled from the registry by that reference (the file the image's
//     entrypoint names) runs as the installer's ServiceAccount with the Deployment's arguments,
//     and a RoutingService becomes Ready.
//  3. Upgrade to v0.2.0-rc.1 the same way, then the new image's manager: the RoutingService keeps
//     its ReplicaSet, pods and migration Job (same UIDs) and stays Ready once the new manager has
//     reconciled it. Nothing re-rolls.
//  4. The chart from the v0.1.0 chart repository (`helm repo add`): `helm install` over the
//     newer CRD fails for the conflict, `helm install --skip-crds` succeeds; then `helm upgrade`
//     from the v0.2.0-rc.1 repository and `helm uninstall`. The Deployment runs each release's
//     image by digest; the CRD (same UID) and the RoutingService stay.
//  5. `kubectl delete -f install.yaml`: the manager's objects go; the CRD, the RoutingService,
//     its ReplicaSet and pods stay. Last, `kubectl delete -f crds.yaml`, the explicit way to remove
//     everything: the RoutingService goes and the garbage collector removes its ReplicaSet.
//
// kwok stands in for the kubelet: the Deployments' pods are scheduled and Ready, but no container
// runs. The binary in the image runs as a process instead, with the pod's arguments and its
// ServiceAccount's token; the image's user, file system and security settings are checked by
// test/image, not here.
func TestRelease(t *testing.T) {
	t.Parallel() // its own control plane and registry; nothing on the real stack
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	step := func(name string) func() {
		s := time.Now()
		return func() { t.Logf("%-52s %6.1fs", name, time.Since(s).Seconds()) }
	}

	// 1. Both releases, their images pushed.
	done := step("releases built: " + previousVersion + " and " + currentVersion)
	srv := startReleaseServers(t)
	prev := srv.buildPreviousRelease(t, ctx)
	cur := srv.buildCurrentRelease(t, ctx)
	done()
	done = step("signed, checksums checked, images pushed")
	refs := map[string]string{}
	signAndVerify(t, cur)
	for version, dir := range map[string]string{previousVersion: prev, currentVersion: cur} {
		checkChecksums(t, dir)
		refs[version] = pushImage(t, dir, version)
		t.Logf("%s: %s%s", version, refs[version], describeRelease(t, dir))
	}
	done()

	done = step("cluster")
	ic, c := startOwnCluster(t, ctx, "schemagate-release-")
	kubectl := kubectlOn(ic.Kubeconfig)
	done()

	// 2. The previous release by its two files, its manager acting.
	done = step(previousVersion + ": crds.yaml, install.yaml, manager")
	for _, f := range []string{"crds.yaml", "install.yaml"} {
		if out, err := kubectl("apply", "--server-side", "-f", filepath.Join(prev, f)); err != nil {
			t.Fatalf("%s/%s: %v\n%s", previousVersion, f, err, out)
		}
	}
	deploymentRuns(t, c, "schemagate-system", "schemagate-manager", refs[previousVersion], 2)
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "routingservices.routing.schemagate.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	mgr := runReleasedManager(t, c, ic, refs[previousVersion], "schemagate-system", "schemagate-manager")
	ensureNamespace(t, c, "shop")
	serving := createServing(t, c, "shop")
	mgr.stop(t)
	done()

	// 3. Upgrade by the two files; the new manager changes nothing that serves.
	done = step(currentVersion + ": upgrade by the files, nothing re-rolls")
	for _, f := range []string{"crds.yaml", "install.yaml"} {
		if out, err := kubectl("apply", "--server-side", "-f", filepath.Join(cur, f)); err != nil {
			t.Fatalf("%s/%s: %v\n%s", currentVersion, f, err, out)
		}
	}
	deploymentRuns(t, c, "schemagate-system", "schemagate-manager", refs[currentVersion], 2)
	mgr = runReleasedManager(t, c, ic, refs[currentVersion], "schemagate-system", "schemagate-manager")
	story.Eventually(t, time.Minute, "the new manager reconciled shop/rs-a", func() error {
		n, err := mgr.reconciles()
		if err != nil || n == 0 {
			return fmt.Errorf("%d successful reconciles, %v; log: %s", n, err, mgr.proc.Tail(600))
		}
		return nil
	})
	// A re-roll would start at once: a new ReplicaSet or Job at the reconcile that saw the change.
	// Watched for 3 s: the first change fails the test.
	serving.unchangedFor(t, c, 3*time.Second)
	mgr.stop(t)
	done()

	// 4. The chart, from the chart repositories.
	done = step("chart: helm repo add, install, upgrade, uninstall")
	helm := helmOn(t, ic.Kubeconfig)
	must := func(args ...string) {
		t.Helper()
		out, err := helm(args...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("helm %s: %s", args[0], firstLine(out))
	}
	ensureNamespace(t, c, "team-a")
	must("repo", "add", "schemagate-prev", srv.downloadBase(previousVersion))
	install := []string{"install", "sg", "schemagate-prev/schemagate", "--version", strings.TrimPrefix(previousVersion, "v"),
		"-n", "sg-ops", "--create-namespace", "--set", "watchNamespaces={team-a}", "--set", "replicaCount=1"}
	// The cluster has a CRD already, and a newer one than the chart's crds/: Helm v4 applies
	// crds/ server-side, and the chart's copy conflicts with the fields kubectl applied.
	if out, err := helm(install...); err == nil || !strings.Contains(out, "conflict") {
		t.Fatalf("helm install over a newer CRD: %v, want a conflict\n%s", err, out)
	}
	must(append(install, "--skip-crds")...)
	deploymentRuns(t, c, "sg-ops", "sg-schemagate-manager", refs[previousVersion], 1)
	must("repo", "add", "schemagate-cur", srv.downloadBase(currentVersion))
	must("upgrade", "sg", "schemagate-cur/schemagate", "--version", strings.TrimPrefix(currentVersion, "v"),
		"-n", "sg-ops", "--reset-then-reuse-values")
	d := deploymentRuns(t, c, "sg-ops", "sg-schemagate-manager", refs[currentVersion], 1)
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--watch-namespaces=team-a") {
		t.Errorf("after helm upgrade --reset-then-reuse-values the manager's args are %q: watchNamespaces was lost", args)
	}
	must("uninstall", "sg", "-n", "sg-ops")
	story.Eventually(t, 30*time.Second, "the chart's Deployment deleted", func() error {
		err := c.Get(ctx, client.ObjectKey{Namespace: "sg-ops", Name: "sg-schemagate-manager"}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("sg-ops/sg-schemagate-manager: %v", err)
		}
		return nil
	})
	sameCRD(t, c, crd.UID)
	serving.unchanged(t, c)
	done()

	// 5. The one-file install removed; then the CRD, on purpose.
	done = step("kubectl delete -f install.yaml, then crds.yaml")
	if out, err := kubectl("delete", "-f", filepath.Join(cur, "install.yaml"), "--wait=true"); err != nil {
		t.Fatalf("delete install.yaml: %v\n%s", err, out)
	}
	for _, o := range []client.Object{&appsv1.Deployment{}, &corev1.ServiceAccount{}, &corev1.Namespace{}} {
		key := client.ObjectKey{Namespace: "schemagate-system", Name: "schemagate-manager"}
		if _, ok := o.(*corev1.Namespace); ok {
			key = client.ObjectKey{Name: "schemagate-system"}
		}
		if err := c.Get(ctx, key, o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after delete -f install.yaml: %v", o, key, err)
		}
	}
	sameCRD(t, c, crd.UID)
	serving.unchanged(t, c)
	if out, err := kubectl("delete", "-f", filepath.Join(cur, "crds.yaml"), "--wait=true"); err != nil {
		t.Fatalf("delete crds.yaml: %v\n%s", err, out)
	}
	story.Eventually(t, time.Minute, "the garbage collector removed rs-a's ReplicaSets", func() error {
		var list appsv1.ReplicaSetList
		if err := c.List(ctx, &list, client.InNamespace("shop")); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d ReplicaSets left in shop", len(list.Items))
		}
		return nil
	})
	done()
	t.Logf("%-52s %6.1fs", "total", time.Since(start).Seconds())
}

// deploymentRuns waits until ns/name runs ref in its first container with ready pods (kwok's),
// and returns it.
func deploymentRuns(t *testing.T, c client.Client, ns, name, ref string, ready int32) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	story.Eventually(t, time.Minute, fmt.Sprintf("%s/%s runs %s, %d ready", ns, name, ref, ready), func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != ref {
			return fmt.Errorf("image %s", got)
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != ready || d.Status.ReadyReplicas != ready || d.Status.Replicas != ready {
			return fmt.Errorf("status %+v", d.Status)
		}
		return nil
	})
	return &d
}

// sameCRD fails unless the RoutingService CRD exists with uid.
func sameCRD(t *testing.T, c client.Client, uid types.UID) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: "routingservices.routing.schemagate.io"}, &crd); err != nil || crd.UID != uid {
		t.Fatalf("the CRD: %v, uid %s (was %s)", err, crd.UID, uid)
	}
}

// releasedManager is the manager binary of a released image, running as a process.
type releasedManager struct {
	*managerRun
	metrics string
}

// runReleasedManager pulls ref, and runs the binary its entrypoint names with the arguments of
// the manager Deployment's container (the same Deployment, read from the cluster), as the
// ServiceAccount ns/sa. Only what a process outside a pod must change is added after them:
// the kubeconfig, the leader election namespace (a pod reads it from its ServiceAccount's files),
// and metrics over plain HTTP and probes off, on loopback.
func runReleasedManager(t *testing.T, c client.Client, ic *localcluster.Cluster, ref, ns, sa string) *releasedManager {
	t.Helper()
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sa}, &d); err != nil {
		t.Fatal(err)
	}
	container := d.Spec.Template.Spec.Containers[0]
	bin := pullEntrypoint(t, ref, t.TempDir())
	if len(container.Command) > 0 && container.Command[0] != "/"+filepath.Base(bin) {
		t.Fatalf("the Deployment's command %q is not the image's entrypoint /%s", container.Command, filepath.Base(bin))
	}
	kc, _ := serviceAccountKubeconfig(t, ic.Config, ic.Kubeconfig, ns, sa)
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(container.Args), "--kubeconfig="+kc, "--leader-election-namespace="+ns,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port), "--metrics-secure=false", "--health-probe-bind-address=0")
	logName := "manager-" + sa + "-" + ref[len(ref)-12:] + ".log" // the digest's last hex digits
	p, err := localcluster.StartProcess("released-manager", bin, args, filepath.Join(filepath.Dir(ic.Kubeconfig), "logs", logName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	return &releasedManager{managerRun: &managerRun{proc: p}, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
}

// reconciles reads controller-runtime's count of successful reconciles of RoutingServices from
// the manager's metrics.
func (m *releasedManager) reconciles() (int, error) {
	resp, err := http.Get(m.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "controller_runtime_reconcile_total{") && strings.Contains(line, `controller="routingservice"`) &&
			strings.Contains(line, `result="success"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return int(v), err
		}
	}
	return 0, sc.Err()
}

// servingState is what serves a RoutingService: the UIDs of its ReplicaSets, pods and Jobs, and
// its stable revision.
type servingState struct {
	ns                      string
	replicaSets, pods, jobs []types.UID
	stableRevision          string
}

// createServing creates ns/rs-a (one shard of two replicas in us-east-1, the schema confirmed by
// the migration Job's success), waits until it is Ready, and returns what serves it.
func createServing(t *testing.T, c client.Client, ns string) *servingState {
	t.Helper()
	r := story.Fixture(ns)
	r.Spec.Shards = r.Spec.Shards[:1]
	r.Spec.Shards[0].Replicas = 2
	r.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
	r.Spec.Schema.Migration.BackoffLimit = ptr.To(int32(0))
	r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(60))
	// A CRD applied an instant ago may not be served yet ("no matches for kind"): ask again.
	story.Eventually(t, 30*time.Second, "RoutingService "+ns+"/rs-a created", func() error {
		if err := c.Create(context.Background(), r.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
	s := &servingState{ns: ns}
	story.Eventually(t, 2*time.Minute, ns+"/rs-a Ready", func() error {
		var got routingv1alpha1.RoutingService
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, &got); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady); cond == nil ||
			cond.Status != metav1.ConditionTrue || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("observedGeneration %d of %d, Ready %+v", got.Status.ObservedGeneration, got.Generation, cond)
		}
		s.stableRevision = got.Status.StableRevision
		return nil
	})
	s.replicaSets, s.pods, s.jobs = s.uids(t, c)
	if len(s.replicaSets) != 1 || len(s.pods) != 2 || len(s.jobs) != 1 {
		t.Fatalf("%s/rs-a Ready with %d ReplicaSets, %d pods, %d Jobs; want 1, 2, 1", ns, len(s.replicaSets), len(s.pods), len(s.jobs))
	}
	return s
}

func (s *servingState) uids(t *testing.T, c client.Client) (rss, pods, jobs []types.UID) {
	t.Helper()
	var rsList appsv1.ReplicaSetList
	var podList corev1.PodList
	var jobList batchv1.JobList
	for _, l := range []client.ObjectList{&rsList, &podList, &jobList} {
		if err := c.List(context.Background(), l, client.InNamespace(s.ns)); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range rsList.Items {
		rss = append(rss, o.UID)
	}
	for _, o := range podList.Items {
		if metav1.GetControllerOf(&o) != nil && metav1.GetControllerOf(&o).Kind == "ReplicaSet" && o.DeletionTimestamp == nil {
			pods = append(pods, o.UID)
		}
	}
	for _, o := range jobList.Items {
		jobs = append(jobs, o.UID)
	}
	slices.Sort(rss)
	slices.Sort(pods)
	slices.Sort(jobs)
	return rss, pods, jobs
}

// unchangedFor checks unchanged every 200 ms for d, and stops at the first difference.
func (s *servingState) unchangedFor(t *testing.T, c client.Client, d time.Duration) {
	t.Helper()
	for until := time.Now().Add(d); time.Now().Before(until) && !t.Failed(); time.Sleep(200 * time.Millisecond) {
		s.unchanged(t, c)
	}
}

// unchanged fails unless the same ReplicaSets, pods and Jobs serve rs-a, it is Ready at the same
// stable revision.
func (s *servingState) unchanged(t *testing.T, c client.Client) {
	t.Helper()
	rss, pods, jobs := s.uids(t, c)
	if !slices.Equal(rss, s.replicaSets) || !slices.Equal(pods, s.pods) || !slices.Equal(jobs, s.jobs) {
		t.Errorf("%s re-rolled: ReplicaSets %v (were %v), pods %v (were %v), Jobs %v (were %v)", s.ns, rss, s.replicaSets, pods, s.pods, jobs, s.jobs)
	}
	var got routingv1alpha1.RoutingService
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "rs-a"}, &got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, routingv1alpha1.ConditionReady); cond == nil || cond.Status != metav1.ConditionTrue ||
		got.Status.StableRevision != s.stableRevision {
		t.Errorf("%s/rs-a: Ready %+v, stable revision %s (was %s)", s.ns, cond, got.Status.StableRevision, s.stableRevision)
	}
}

// helmOn returns a function that runs the helm binary (hack/build-binaries.sh helm) against
// kubeconfig with configuration, cache and data folders of its own; it returns helm's combined
// output.
func helmOn(t *testing.T, kubeconfig string) func(args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	bin := filepath.Join(binDir, "k8s", "helm")
	return func(args ...string) (string, error) {
		cmd := exec.Command(bin, append(args, "--kubeconfig", kubeconfig)...)
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
