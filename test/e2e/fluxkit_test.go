//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/flux"
	"github.com/schemagate/schemagate/test/gitserver"
	"github.com/schemagate/schemagate/test/story"
)

// What the GitOps stories (flux_test.go) share: Flux and the Git server, started once per suite;
// the Flux objects from config/samples/flux; manifests as a person commits them; and a timeline
// of the Kustomization and the RoutingService.

var (
	fluxOnce sync.Once
	fluxErr  error
	gitSrv   *gitserver.Server

	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

// fluxNamespace holds the GitRepositories and Kustomizations, as in a Flux installation.
const fluxNamespace = "flux-system"

// startFlux starts, once per suite, the Git server and the Flux controllers.
func startFlux(t *testing.T) {
	t.Helper()
	fluxOnce.Do(func() {
		ctx := context.Background()
		if gitSrv, fluxErr = gitserver.Start(ctx); fluxErr != nil {
			return
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}}
		if fluxErr = k8s.Create(ctx, ns); apierrors.IsAlreadyExists(fluxErr) {
			fluxErr = nil
		}
		if fluxErr != nil {
			return
		}
		fluxProcs, fluxErr = flux.Start(ctx, flux.Options{
			BinDir: filepath.Join(binDir, "k8s"), Kubeconfig: cluster.Kubeconfig,
			Kubectl: filepath.Join(binDir, "k8s", "kubectl"), StateDir: filepath.Join(stateDir, "logs"),
		})
	})
	if fluxErr != nil {
		t.Fatalf("Flux: %v", fluxErr)
	}
}

var fluxProcs *flux.Flux

// fluxSync creates, in flux-system, the GitRepository and the Kustomization of
// config/samples/flux named name, pointed at repo's root. The test changes only what a loopback
// repository needs: the names, the URL, the path, the GitRepository's interval (2 s instead of
// 1 m: no webhook here) and the Kustomization's timeout (the sample's 30 m is for production
// rollouts).
func fluxSync(t *testing.T, name string, repo *gitserver.Repo, timeout string) {
	t.Helper()
	ctx := context.Background()
	src := sampleObject(t, "gitrepository.yaml")
	src.SetName(name)
	must(t, unstructured.SetNestedField(src.Object, repo.URL, "spec", "url"))
	must(t, unstructured.SetNestedField(src.Object, "2s", "spec", "interval"))
	ks := sampleObject(t, "kustomization.yaml")
	ks.SetName(name)
	must(t, unstructured.SetNestedField(ks.Object, name, "spec", "sourceRef", "name"))
	must(t, unstructured.SetNestedField(ks.Object, "./", "spec", "path"))
	must(t, unstructured.SetNestedField(ks.Object, timeout, "spec", "timeout"))
	for _, o := range []*unstructured.Unstructured{src, ks} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		// Delete the Kustomization first, with its prune off, so the namespace's own cleanup
		// stops the routers as for every other real-stack story.
		_ = k8s.Delete(context.Background(), ks)
		_ = k8s.Delete(context.Background(), src)
	})
}

// sampleObject reads config/samples/flux/<file>.
func sampleObject(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rootDir, "config", "samples", "flux", file))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return u
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// manifest is rsvc as a person would commit it: apiVersion and kind, no status, no server fields.
func manifest(t *testing.T, rsvc *routingv1alpha1.RoutingService) []byte {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rsvc)
	if err != nil {
		t.Fatal(err)
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	obj["apiVersion"], obj["kind"] = routingv1alpha1.GroupVersion.String(), "RoutingService"
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// repoFiles is the repository's tree: a kustomization.yaml listing the RoutingServices given.
func repoFiles(t *testing.T, rsvcs ...*routingv1alpha1.RoutingService) map[string][]byte {
	files := map[string][]byte{}
	var names []string
	for _, r := range rsvcs {
		n := r.Name + ".yaml"
		files[n] = manifest(t, r)
		names = append(names, n)
	}
	files["kustomization.yaml"] = []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + strings.Join(names, ", ") + "]\n")
	return files
}

// databaseFromSecret makes every container of rsvc read DATABASE_URL from the Secret secret (key
// url) instead of a literal: a repository holds the reference, never the credentials.
func databaseFromSecret(rsvc *routingv1alpha1.RoutingService, secret string) {
	ref := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "url"}}
	templates := []*corev1.PodSpec{&rsvc.Spec.Template.Spec, &rsvc.Spec.Schema.Migration.Template.Spec}
	if rsvc.Spec.Schema.Check != nil {
		templates = append(templates, &rsvc.Spec.Schema.Check.Template.Spec)
	}
	for _, spec := range templates {
		for i := range spec.Containers {
			for j, e := range spec.Containers[i].Env {
				if e.Name == "DATABASE_URL" {
					spec.Containers[i].Env[j] = corev1.EnvVar{Name: e.Name, ValueFrom: ref}
				}
			}
		}
	}
}

// ksState is what a person reads off a Kustomization: its Ready condition and the revision it
// last applied.
type ksState struct {
	ready, reason, message, applied string
}

func (s ksState) String() string {
	return fmt.Sprintf("Ready=%s %s (applied %s): %s", s.ready, s.reason, shortRevision(s.applied), s.message)
}

// kustomization reads the Kustomization name.
func kustomization(t *testing.T, name string) ksState {
	t.Helper()
	s, err := readKustomization(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readKustomization reads the Kustomization name; a Kustomization not yet created reads as
// Ready "absent".
func readKustomization(name string) (ksState, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kustomizationGVK)
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: fluxNamespace, Name: name}, u); apierrors.IsNotFound(err) {
		return ksState{ready: "absent"}, nil
	} else if err != nil {
		return ksState{}, err
	}
	var s ksState
	s.applied, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			s.ready, _ = m["status"].(string)
			s.reason, _ = m["reason"].(string)
			s.message, _ = m["message"].(string)
		}
	}
	return s, nil
}

// shortRevision shortens Flux's "main@sha1:<40 hex>" to its first 7 hex digits.
func shortRevision(rev string) string {
	if i := strings.Index(rev, ":"); i >= 0 && len(rev) >= i+8 {
		return rev[:i+8]
	}
	return rev
}

// timeline records, every 250 ms, each change of the Kustomization's state and of the
// RoutingService's (Ready, Reconciling and Stalled reasons, the shards promoted), with the time
// since it started, until stop; check is called on every reading and may fail the test.
type timeline struct {
	t0    time.Time
	mu    sync.Mutex
	lines []string
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func startTimeline(t *testing.T, ns, ks string, check func(ksState, *routingv1alpha1.RoutingService)) *timeline {
	tl := &timeline{t0: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	// A test that fails before end still stops the recording, and logs what it saw.
	t.Cleanup(func() { tl.end(t, "timeline until the test ended") })
	go func() {
		defer close(tl.done)
		var lastKs, lastRs string
		for {
			s, err := readKustomization(ks)
			if err != nil {
				s = ksState{ready: "unread", message: err.Error()}
			}
			r := &routingv1alpha1.RoutingService{}
			rs := "absent"
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, r); err == nil {
				rs = rsvcLine(r)
				check(s, r)
			} else if !apierrors.IsNotFound(err) {
				rs = err.Error()
			} else {
				check(s, nil)
			}
			if k := s.String(); k != lastKs {
				tl.add("Kustomization  " + k)
				lastKs = k
			}
			if rs != lastRs {
				tl.add("RoutingService " + rs)
				lastRs = rs
			}
			select {
			case <-tl.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return tl
}

func (tl *timeline) add(line string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.lines = append(tl.lines, fmt.Sprintf("%6.1fs  %s", time.Since(tl.t0).Seconds(), line))
}

// note adds a line of the test's own (a commit) to the timeline.
func (tl *timeline) note(line string) { tl.add(">> " + line) }

// end stops recording and logs the timeline, once.
func (tl *timeline) end(t *testing.T, title string) {
	stopped := false
	tl.once.Do(func() { close(tl.stop); stopped = true })
	if !stopped {
		return // ended already
	}
	<-tl.done
	tl.mu.Lock()
	defer tl.mu.Unlock()
	t.Logf("%s timeline:\n%s", title, strings.Join(tl.lines, "\n"))
}

// rsvcLine is the RoutingService's state in one line: generation observed, the reasons of Ready,
// Reconciling and Stalled (marked with their generation when older than the object's), and the
// shards promoted.
func rsvcLine(r *routingv1alpha1.RoutingService) string {
	cond := func(typ string) string {
		c := meta.FindStatusCondition(r.Status.Conditions, typ)
		switch {
		case c == nil:
			return typ + "=?"
		case c.ObservedGeneration != r.Generation:
			// Flux applied a new generation; the manager has not yet written status for it.
			return fmt.Sprintf("%s=%s/%s(of gen %d)", typ, c.Status, c.Reason, c.ObservedGeneration)
		}
		return fmt.Sprintf("%s=%s/%s", typ, c.Status, c.Reason)
	}
	return fmt.Sprintf("gen %d/%d %s %s %s promoted %s schema %s", r.Status.ObservedGeneration, r.Generation,
		cond(routingv1alpha1.ConditionReady), cond(routingv1alpha1.ConditionReconciling), cond(routingv1alpha1.ConditionStalled),
		r.Status.PromotedShards, r.Status.Schema.ConfirmedVersion)
}

// waitKustomization waits until the Kustomization reports Ready=want having applied revision
// (Flux's "main@sha1:<sha>").
func waitKustomization(t *testing.T, name, want, sha string, timeout time.Duration) ksState {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := kustomization(t, name)
		if s.ready == want && (want != "True" || s.applied == gitserver.Branch+"@sha1:"+sha) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("Kustomization %s: %s after %s (want Ready=%s at %s)", name, s, timeout, want, sha[:7])
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// reconcileNow asks Flux to reconcile the Kustomization name at once, as `flux reconcile` does:
// the annotation reconcile.fluxcd.io/requestedAt set to a new value.
func reconcileNow(t *testing.T, name, value string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kustomizationGVK)
	u.SetNamespace(fluxNamespace)
	u.SetName(name)
	patch := []byte(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"` + value + `"}}}`)
	must(t, k8s.Patch(context.Background(), u, client.RawPatch(types.MergePatchType, patch)))
}

// applyAgain asks Flux to apply the Kustomization name's current commit again (reconcileNow)
// and waits, at most a minute, until Flux says it has (status.lastHandledReconcileAt).
func applyAgain(t *testing.T, name string) {
	t.Helper()
	requested := time.Now().Format(time.RFC3339Nano)
	reconcileNow(t, name, requested)
	story.Eventually(t, time.Minute, "Flux applies the commit again", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kustomizationGVK)
		must(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: fluxNamespace, Name: name}, u))
		if got, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt"); got != requested {
			return fmt.Errorf("lastHandledReconcileAt %q", got)
		}
		return nil
	})
}

// commitTo commits a tree holding rsvcs (repoFiles) to repo with message what, notes the commit
// on tl, and returns its SHA-1; a failed commit fails the test.
func commitTo(t *testing.T, repo *gitserver.Repo, tl *timeline, what string, rsvcs ...*routingv1alpha1.RoutingService) string {
	t.Helper()
	sha, err := repo.Commit(context.Background(), what, repoFiles(t, rsvcs...))
	if err != nil {
		t.Fatal(err)
	}
	tl.note("commit " + sha[:7] + ": " + what)
	return sha
}
