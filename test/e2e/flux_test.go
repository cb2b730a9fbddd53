//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

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
		return commitTo(t, repo, tl, what, rsvcs...)
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
	time.Sleep(3 * time.Second) // measured: traffic before the change, for the table

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
	time.Sleep(2 * time.Second) // measured: traffic after the change, for the table
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
	applyAgain(t, ns)
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
		return commitTo(t, repo, tl, what, r)
	}
	v1 := e2eFixture(ns)
	sha1 := commit("rs-a v1", v1)
	// The timeout must cover what is left of the rollout when it resumes (two shards' progress
	// and bake, ~30 s), and a pause outlasts it.
	fluxSync(t, ns, repo, "60s")
	waitKustomization(t, ns, "True", sha1, 2*time.Minute)

	v2 := e2eFixture(ns)
	story.ToV2("app:v2", "migrate:v2")(v2)
	v2.Spec.Strategy.BakeSeconds = ptr.To(int32(10))
	commit("rs-a v2, a 10 s bake per shard", v2)
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
		return commitTo(t, repo, tl, what, r)
	}
	again := func(why string) {
		t.Helper()
		applyAgain(t, ns)
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
	again("after the pause")
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

	again("after the abort")
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
