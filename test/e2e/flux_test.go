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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/flux"
	"github.com/schemagate/schemagate/test/gitserver"
	"github.com/schemagate/schemagate/test/story"
)

// The GitOps stories: Flux's source-controller and kustomize-controller (built from source) sync
// RoutingServices from a Git repository served on loopback, and every change is a commit.

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
				if len(r.Status.Conditions) == 0 && r.Status.ObservedGeneration > 0 {
					var mf []string
					for _, m := range r.ManagedFields {
						mf = append(mf, fmt.Sprintf("%s %s %s %s", m.Manager, m.Operation, m.Subresource, m.FieldsV1))
					}
					tl.add("RoutingService read with no conditions (kept for diagnosis): status " + fmt.Sprintf("%+v", r.Status) + " managedFields " + strings.Join(mf, " | "))
				}
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
// Reconciling and Stalled, and the shards promoted.
func rsvcLine(r *routingv1alpha1.RoutingService) string {
	cond := func(typ string) string {
		c := story.Condition(r, typ)
		if c == nil {
			return typ + "=?"
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

// Flux syncs a RoutingService from Git on the real stack, every change a commit, under traffic:
//   - v1: the Kustomization (wait: true) is Ready once the RoutingService is;
//   - v2 (schema 2, the incident's change) with a migration that fails: the Kustomization goes
//     not Ready, and v1 keeps serving;
//   - the fix (the same v2, its migration corrected): the next migration attempt runs from the
//     commit alone, and the Kustomization is Ready again, at that commit, only once the last
//     shard is promoted; no region answers a 404 or an error throughout;
//   - removing the RoutingService from Git: Flux prunes it, and the garbage collector its
//     ReplicaSets.
func TestFluxSyncsSchemaRollout(t *testing.T) {
	realStack(t)
	startFlux(t)
	ctx := context.Background()
	ns := realNamespace(t)
	db := database(t, pg, "fluxsync", 0)
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "edge-database", Namespace: ns},
		StringData: map[string]string{"url": db}}); err != nil {
		t.Fatal(err)
	}
	repo, err := gitSrv.NewRepo(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(tl *timeline, what string, rsvcs ...*routingv1alpha1.RoutingService) string {
		t.Helper()
		sha, err := repo.Commit(ctx, what, repoFiles(t, rsvcs...))
		if err != nil {
			t.Fatal(err)
		}
		tl.note("commit " + sha[:7] + ": " + what)
		return sha
	}

	// The Kustomization must never read Ready=True at a revision whose RoutingService is not
	// promoted everywhere for the generation that revision wrote.
	var mu sync.Mutex
	var early []string
	generationOf := map[string]int64{} // Flux revision → the RoutingService generation it applied
	tl := startTimeline(t, ns, ns, func(s ksState, r *routingv1alpha1.RoutingService) {
		if r == nil || s.ready != "True" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, ok := generationOf[s.applied]; !ok {
			generationOf[s.applied] = r.Generation
		}
		if r.Generation != generationOf[s.applied] {
			return // a later commit is applied already: Ready speaks of an older revision
		}
		ready := story.Condition(r, routingv1alpha1.ConditionReady)
		if r.Status.ObservedGeneration != r.Generation ||
			ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != r.Generation || r.Status.PromotedShards != "3/3" {
			early = append(early, fmt.Sprintf("Kustomization Ready at %s while the RoutingService is %s", shortRevision(s.applied), rsvcLine(r)))
		}
	})
	v1 := realRoutingService(ns, db)
	databaseFromSecret(v1, "edge-database")
	sha1 := commit(tl, "rs-a v1 (schema 1)", v1)
	fluxSync(t, ns, repo, "5m")
	waitKustomization(t, ns, "True", sha1, 4*time.Minute)
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	time.Sleep(3 * time.Second)

	// v2 whose migration cannot run (an unknown migration set: `edge-router migrate` exits 2).
	broken := realRoutingService(ns, db)
	toV2(db, 0)(broken)
	broken.Spec.Schema.Migration.Template.Spec.Containers[0].Args = append(broken.Spec.Schema.Migration.Template.Spec.Containers[0].Args, "--migrations=nonexistent")
	databaseFromSecret(broken, "edge-database")
	sha2 := commit(tl, "rs-a v2 (schema 2), its migration broken", broken)
	failed := waitKustomization(t, ns, "False", sha2, 3*time.Minute)
	var allV1 []string
	for _, r := range realRegions {
		allV1 = append(allV1, r.Shard+"="+routerImage+":v1:2/2")
	}
	if r, serving := kit().Get(t, ns), kit().Serving(t, ns); r.Status.Schema.ConfirmedVersion != "1" || serving != strings.Join(allV1, " ") {
		t.Errorf("after the failed migration the RoutingService is %s, serving %s", rsvcLine(r), serving)
	}
	t.Logf("the failed migration as Flux reports it: %s", failed)
	// Flux names the object and its kstatus, not the object's own reason and message
	// (docs/gitops.md says where to read them).
	if failed.reason != "HealthCheckFailed" || !strings.Contains(failed.message, "RoutingService/"+ns+"/rs-a status: 'Failed'") {
		t.Errorf("the Kustomization after the failed migration: %s", failed)
	}
	stalled := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled)
	if stalled == nil || stalled.Status != metav1.ConditionTrue {
		t.Fatalf("the RoutingService is not Stalled: %+v", stalled)
	}

	// The fix, by commit alone: no retry annotation.
	fixed := realRoutingService(ns, db)
	toV2(db, 6*time.Second)(fixed)
	databaseFromSecret(fixed, "edge-database")
	sha3 := commit(tl, "rs-a v2, its migration fixed (a 6 s migration)", fixed)
	done := waitKustomization(t, ns, "True", sha3, 5*time.Minute)
	time.Sleep(2 * time.Second)
	rep := gen.Stop()
	table(t, "Flux: v1 → broken v2 → fixed v2, by commit", rep)
	for _, r := range realRegions {
		tot := rep.Totals[r.Shard]
		if tot.NotFound > 0 || tot.Errors() > 0 || tot.Revisions["v2"] == 0 {
			t.Errorf("%s: %+v (want no 404, no error, and answers from v2)", r.Shard, tot)
		}
	}
	if r := kit().Get(t, ns); r.Status.Schema.ConfirmedVersion != "2" || r.Status.PromotedShards != "3/3" {
		t.Errorf("Kustomization %s while the RoutingService is %s", done, rsvcLine(r))
	}
	if r := kit().Get(t, ns); r.Annotations[routingv1alpha1.AnnotationRetry] != "" {
		t.Errorf("the retry annotation is set: %q", r.Annotations[routingv1alpha1.AnnotationRetry])
	}
	if !strings.Contains(strings.Join(kit().EventsFor(t, ns), " "), "MigrationFailed") {
		t.Errorf("no MigrationFailed Event: %v", kit().EventsFor(t, ns))
	}

	// A person's control beside Flux: an annotation Flux did not apply survives Flux's next
	// apply (requested as `flux reconcile` does), and the apply changes no replica count.
	before := kit().Serving(t, ns)
	r := kit().Get(t, ns)
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	r.Annotations[routingv1alpha1.AnnotationRetry] = "person-1"
	if err := k8s.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	requested := time.Now().Format(time.RFC3339Nano)
	reconcileNow(t, ns, requested)
	story.Eventually(t, time.Minute, "Flux applies the commit again", func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kustomizationGVK)
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: fluxNamespace, Name: ns}, u))
		if got, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt"); got != requested {
			return fmt.Errorf("lastHandledReconcileAt %q", got)
		}
		return nil
	})
	tl.note("a person set " + routingv1alpha1.AnnotationRetry + "=person-1; Flux applied the commit again")
	if r := kit().Get(t, ns); r.Annotations[routingv1alpha1.AnnotationRetry] != "person-1" {
		t.Errorf("Flux's apply removed the person's annotation: %v", r.Annotations)
	}
	if after := kit().Serving(t, ns); after != before {
		t.Errorf("Flux's apply changed what serves: %s → %s", before, after)
	}

	// Prune: a commit without the RoutingService deletes it.
	sha4 := commit(tl, "rs-a removed")
	waitKustomization(t, ns, "True", sha4, 2*time.Minute)
	story.Eventually(t, time.Minute, "the RoutingService and its ReplicaSets are gone", func() error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a"}, &routingv1alpha1.RoutingService{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("RoutingService: %v", err)
		}
		if rss := kit().ReplicaSets(t, ns); len(rss) > 0 {
			return fmt.Errorf("%d ReplicaSets left", len(rss))
		}
		return nil
	})
	tl.end(t, "Flux sync")
	mu.Lock()
	defer mu.Unlock()
	for _, e := range early {
		t.Error(e)
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

// Pause by commit, on kwok's pods: `paused: true` committed while the first shard bakes holds
// the rollout where it is; the Kustomization (wait: true) stays Progressing and, at its timeout,
// fails on the RoutingService still in progress, while nothing more is promoted. Committing
// `paused: false` finishes the rollout and the Kustomization is Ready at that commit.
func TestFluxPauseByCommit(t *testing.T) {
	t.Parallel()
	startFlux(t)
	ctx := context.Background()
	ns := kit().NewNamespace(t)
	repo, err := gitSrv.NewRepo(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	tl := startTimeline(t, ns, ns, func(ksState, *routingv1alpha1.RoutingService) {})
	commit := func(what string, r *routingv1alpha1.RoutingService) string {
		t.Helper()
		sha, err := repo.Commit(ctx, what, repoFiles(t, r))
		if err != nil {
			t.Fatal(err)
		}
		tl.note("commit " + sha[:7] + ": " + what)
		return sha
	}
	v1 := e2eFixture(ns)
	sha1 := commit("rs-a v1", v1)
	// The timeout must cover what is left of the rollout when it resumes (two shards' progress
	// and bake, ~40 s), and a pause outlasts it.
	fluxSync(t, ns, repo, "90s")
	waitKustomization(t, ns, "True", sha1, 2*time.Minute)

	v2 := e2eFixture(ns)
	story.ToV2("app:v2", "migrate:v2")(v2)
	v2.Spec.Strategy.BakeSeconds = ptr.To(int32(15))
	commit("rs-a v2, a 15 s bake per shard", v2)
	story.Eventually(t, time.Minute, "the first shard bakes", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonShardBaking))
	paused := v2.DeepCopy()
	paused.Spec.Paused = true
	sha3 := commit("rs-a v2 paused", paused)
	story.Eventually(t, time.Minute, "paused by the commit", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonPaused))
	held := kit().Get(t, ns).Status.PromotedShards
	failed := waitKustomization(t, ns, "False", sha3, 3*time.Minute)
	t.Logf("the paused rollout as Flux reports it at its timeout: %s", failed)
	// Flux's message at the timeout varies with where the wait was: "timeout waiting for:
	// [RoutingService/…/rs-a status: 'InProgress']", or its client's rate limiter's deadline.
	if failed.reason != "HealthCheckFailed" || !strings.Contains(failed.message, "health check failed after") {
		t.Errorf("the Kustomization of a paused rollout: %s", failed)
	}
	if got := kit().Get(t, ns).Status.PromotedShards; got != held {
		t.Errorf("shards promoted while paused: %s → %s", held, got)
	}
	sha4 := commit("rs-a v2 resumed", v2)
	waitKustomization(t, ns, "True", sha4, 3*time.Minute)
	if r := kit().Get(t, ns); r.Status.PromotedShards != "3/3" || r.Spec.Paused {
		t.Errorf("resumed, the RoutingService is %s", rsvcLine(r))
	}
	tl.end(t, "Flux pause")
}

// A person's controls on a RoutingService Flux manages, with the plugin, on kwok's pods:
//   - `kubectl schemagate pause` warns that Flux manages the object, and since the manifest in
//     Git does not set spec.paused, Flux's next apply leaves the pause (as the warning says);
//   - `kubectl schemagate abort` while the first shard of a committed v2 bakes: no warning (Flux
//     does not own the annotation), the rollout stops and v1 serves; the Kustomization fails
//     early on the Stalled RoutingService; Flux's next apply keeps the annotation, and the abort
//     is neither undone nor acted on again.
func TestFluxAndAPersonsControls(t *testing.T) {
	t.Parallel()
	startFlux(t)
	ctx := context.Background()
	ns := kit().NewNamespace(t)
	repo, err := gitSrv.NewRepo(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	tl := startTimeline(t, ns, ns, func(ksState, *routingv1alpha1.RoutingService) {})
	commit := func(what string, r *routingv1alpha1.RoutingService) string {
		t.Helper()
		sha, err := repo.Commit(ctx, what, repoFiles(t, r))
		if err != nil {
			t.Fatal(err)
		}
		tl.note("commit " + sha[:7] + ": " + what)
		return sha
	}
	// applyAgain asks Flux to apply the current commit again and waits until it has.
	applyAgain := func(why string) {
		t.Helper()
		requested := time.Now().Format(time.RFC3339Nano)
		reconcileNow(t, ns, requested)
		story.Eventually(t, time.Minute, "Flux applies the commit again", func() error {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(kustomizationGVK)
			must(t, k8s.Get(ctx, client.ObjectKey{Namespace: fluxNamespace, Name: ns}, u))
			if got, _, _ := unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt"); got != requested {
				return fmt.Errorf("lastHandledReconcileAt %q", got)
			}
			return nil
		})
		tl.note("Flux applied the commit again: " + why)
	}
	sha1 := commit("rs-a v1", e2eFixture(ns))
	fluxSync(t, ns, repo, "90s")
	waitKustomization(t, ns, "True", sha1, 2*time.Minute)

	p := kubectlSchemagate(t, 30*time.Second, "pause", "rs-a", "-n", ns)
	expectExit(t, "pause", p, 0)
	expectContains(t, "pause stderr", p.err, "is managed by Flux (field manager kustomize-controller; label kustomize.toolkit.fluxcd.io/name="+ns+")",
		"self-heal will revert this patch if the manifest in Git sets spec.paused")
	tl.note("kubectl schemagate pause")
	applyAgain("after the pause")
	if !kit().Get(t, ns).Spec.Paused {
		t.Errorf("Flux's apply undid a pause its manifest does not set")
	}
	expectExit(t, "resume", kubectlSchemagate(t, 30*time.Second, "resume", "rs-a", "-n", ns), 0)
	tl.note("kubectl schemagate resume")

	v2 := e2eFixture(ns)
	story.ToV2("app:v2", "migrate:v2")(v2)
	v2.Spec.Strategy.BakeSeconds = ptr.To(int32(15))
	sha2 := commit("rs-a v2, a 15 s bake per shard", v2)
	story.Eventually(t, time.Minute, "the first shard bakes", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonShardBaking))
	a := kubectlSchemagate(t, 30*time.Second, "abort", "rs-a", "-n", ns)
	expectExit(t, "abort", a, 0)
	if strings.Contains(a.err, "owns annotation") {
		t.Errorf("abort warned that Flux owns the annotation:\n%s", a.err)
	}
	token := annotated(t, a, routingv1alpha1.AnnotationAbort)
	tl.note("kubectl schemagate abort")
	story.Eventually(t, 30*time.Second, "Stalled=True Aborted", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted))
	story.Eventually(t, 60*time.Second, "v1 serves everywhere", kit().ServingIs(t, ns, story.AllV1))
	failed := waitKustomization(t, ns, "False", sha2, 2*time.Minute)
	t.Logf("the aborted rollout as Flux reports it: %s", failed)

	applyAgain("after the abort")
	r := kit().Get(t, ns)
	if r.Annotations[routingv1alpha1.AnnotationAbort] != token || r.Status.LastHandledAbort != token {
		t.Errorf("after Flux's apply: annotation %q, lastHandledAbort %q, want %q", r.Annotations[routingv1alpha1.AnnotationAbort], r.Status.LastHandledAbort, token)
	}
	story.Consistently(t, 3*time.Second, "the abort holds: v1 serves", kit().ServingIs(t, ns, story.AllV1))
	if c := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionStalled); c == nil || c.Reason != routingv1alpha1.ReasonAborted {
		t.Errorf("after Flux's apply, Stalled is %+v", c)
	}
	tl.end(t, "Flux and a person's controls")
}
