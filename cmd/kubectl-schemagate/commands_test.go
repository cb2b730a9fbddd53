package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// in returns a captured RoutingService moved to namespace ns.
func in(t *testing.T, state, ns string) *unstructured.Unstructured {
	u := captured(t, state)
	u.SetNamespace(ns)
	return u
}

var someTime = mustTime("2026-11-30T07:00:00Z")

// Exit codes of status, on the fake dynamic client: 0 Ready, 1 Stalled, 3 timeout, 2 errors.
func TestStatusExitCodes(t *testing.T) {
	for _, tc := range []struct {
		state   string
		args    []string
		code    int
		out     []string
		errText string
	}{
		{"healthy", nil, 0, []string{"Ready=True RolloutComplete: revision cc447w65w7 is promoted in all 3 shards", "is ready: generation 1"}, ""},
		{"migration-failed", nil, 1, []string{"Stalled=True MigrationFailed: migration Job rs-a-schema-xx55754x-1 to schema 2 failed"},
			"error: RoutingService ns/rs-a is stalled: MigrationFailed: migration Job"},
		{"shard-check-failed", nil, 1, []string{"Stalled=True ShardCheckFailed"}, "is stalled: ShardCheckFailed: check smoke failed in shard eu-west"},
		{"migrating", []string{"--timeout", "300ms"}, 3, []string{"Reconciling=True Migrating", "Ready=False Migrating"},
			"error: timed out after 300ms waiting for RoutingService ns/rs-a: it is Progressing (Migrating)"},
		// Ready=True of generation 1 does not end the wait for generation 2.
		{"stale-generation", []string{"--timeout", "300ms"}, 3, []string{"generation 2: waiting for the controller (status describes generation 1)"}, "it is Pending (NotObserved)"},
		{"paused", []string{"--timeout", "300ms"}, 3, []string{"Reconciling=True Paused"}, "it is Paused (Paused)"},
	} {
		t.Run(tc.state, func(t *testing.T) {
			u := in(t, tc.state, "ns")
			res := runWith(fakeClients(Objects{}, u), someTime, append([]string{"status", u.GetName(), "-n", "ns"}, tc.args...)...)
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", res.code, tc.code, res.out, res.err)
			}
			for _, want := range tc.out {
				if !strings.Contains(res.out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, res.out)
				}
			}
			if !strings.Contains(res.err, tc.errText) {
				t.Errorf("stderr lacks %q:\n%s", tc.errText, res.err)
			}
		})
	}
}

// status prints each change once and exits 0 when the generation it waits for becomes Ready.
func TestStatusFollowsChanges(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "progressing", "ns"))
	go func() {
		time.Sleep(200 * time.Millisecond)
		res := cl.dyn.Resource(rsvcGVR).Namespace("ns")
		u, err := res.Get(context.Background(), "rs-a", metav1.GetOptions{})
		if err != nil {
			panic(err)
		}
		// The same object once every shard is promoted: generation 2, Ready=True.
		healthy := captured(t, "healthy")
		conds, _, _ := unstructured.NestedSlice(healthy.Object, "status", "conditions")
		for _, c := range conds {
			c.(map[string]any)["observedGeneration"] = int64(2)
		}
		_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			panic(err)
		}
	}()
	res := runWith(cl, someTime, "status", "rs-a", "-n", "ns", "--timeout", "20s")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.out, res.err)
	}
	lines := strings.Split(strings.TrimSpace(res.out), "\n")
	want := []string{"Reconciling=True ShardProgressing", "Stalled=False ShardProgressing", "Ready=False ShardProgressing",
		"Reconciling=False RolloutComplete", "Stalled=False RolloutComplete", "Ready=True RolloutComplete", "is ready: generation 2"}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), res.out)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d %q lacks %q", i, lines[i], w)
		}
	}
}

func TestStatusBadInput(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "healthy", "ns"))
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"status", "nope", "-n", "ns"}, `RoutingService "nope" not found in namespace "ns"`},
		{[]string{"status", "-n", "ns"}, "accepts 1 arg(s), received 0"},
		{[]string{"status", "rs-a", "-n", "ns", "--timeout", "soon"}, `invalid argument "soon"`},
		{[]string{"status", "rs-a", "-n", "ns", "--timeout", "-1s"}, "--timeout must not be negative"},
	} {
		res := runWith(cl, someTime, tc.args...)
		if res.code != 2 || !strings.Contains(res.err, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, res.code, res.err, tc.err)
		}
	}
}

// Unknown names and wrong namespaces say which namespace was searched, and where the name is.
func TestNotFound(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "healthy", "team-a"), in(t, "migrating", "team-b"))
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"get", "nope", "-n", "team-a"}, `error: RoutingService "nope" not found in namespace "team-a" (` + "`kubectl schemagate list -A`" + ` lists every RoutingService)`},
		{[]string{"get", "rs-a", "-n", "default"}, `RoutingService "rs-a" not found in namespace "default"; there are RoutingServices of that name in namespaces team-a, team-b`},
		{[]string{"pause", "nope", "-n", "team-a"}, `RoutingService "nope" not found in namespace "team-a"`},
		{[]string{"promote", "nope", "-n", "team-b"}, `RoutingService "nope" not found in namespace "team-b"`},
	} {
		res := runWith(cl, someTime, tc.args...)
		if res.code != 1 || !strings.Contains(res.err, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", tc.args, res.code, res.err, tc.err)
		}
	}
	cl = fakeClients(Objects{}, in(t, "healthy", "team-a"))
	res := runWith(cl, someTime, "get", "rs-a", "-n", "team-c")
	if !strings.Contains(res.err, `not found in namespace "team-c"; there is one in namespace "team-a": add -n team-a`) {
		t.Errorf("stderr %q", res.err)
	}
}

// A cluster without the CRD, or serving another version, is said so plainly.
func TestAPIMissingOrOtherVersion(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "healthy", "ns"))
	disco := cl.disco.(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "replicasets", Namespaced: true, Kind: "ReplicaSet"}}}}
	for _, args := range [][]string{{"get", "rs-a", "-n", "ns"}, {"list", "-A"}, {"pause", "rs-a", "-n", "ns"}, {"status", "rs-a", "-n", "ns"}} {
		res := runWith(cl, someTime, args...)
		if res.code == 0 || !strings.Contains(res.err, "the RoutingService CRD is not installed in this cluster") {
			t.Errorf("%v without the CRD: exit %d, stderr %q", args, res.code, res.err)
		}
	}
	disco.Resources = append(disco.Resources, &metav1.APIResourceList{GroupVersion: "routing.schemagate.io/v1beta1",
		APIResources: []metav1.APIResource{{Name: "routingservices", Namespaced: true, Kind: "RoutingService"}}})
	res := runWith(cl, someTime, "get", "rs-a", "-n", "ns")
	want := "this plugin reads routing.schemagate.io/v1alpha1; the cluster serves routing.schemagate.io v1beta1: upgrade the plugin"
	if res.code != 1 || !strings.Contains(res.err, want) {
		t.Errorf("other version: exit %d, stderr %q", res.code, res.err)
	}
}

func TestList(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "healthy", "team-a"), in(t, "paused", "team-a"), in(t, "shard-check-inconclusive", "team-b"),
		in(t, "migration-failed", "team-c"), in(t, "stale-generation", "team-d"))
	now := mustTime("2026-12-01T00:10:00Z")
	res := runWith(cl, now, "list", "-A")
	want := `NAMESPACE  NAME  READY  REASON                  REQUIRED  CONFIRMED  SHARDS  CURRENT         AGE
team-a     rs-a  True   RolloutComplete         1         1          3/3     -               17h
team-a     rs-b  False  Paused                  1         -          0/3     - (paused)      17h
team-b     rs-a  False  ShardCheckInconclusive  1         1          0/3     us-east Baking  52s
team-c     rs-a  False  MigrationFailed         2         1          0/3     -               17h
team-d     rs-a  -      NotObserved             2         1          3/3     -               17h
`
	if res.code != 0 || res.out != want {
		t.Errorf("list -A: exit %d\n%s\nwant:\n%s", res.code, res.out, want)
	}
	res = runWith(cl, now, "list", "-n", "team-a")
	if strings.Contains(res.out, "NAMESPACE") || !containsFields(res.out, []string{"rs-b", "False", "Paused"}) {
		t.Errorf("list -n team-a:\n%s", res.out)
	}
	res = runWith(cl, now, "list", "-n", "empty")
	if res.code != 0 || res.out != "" || !strings.Contains(res.err, "No RoutingServices found in namespace empty.") {
		t.Errorf("list -n empty: %+v", res)
	}
}

// containsFields reports whether some line of out has these fields in this order.
func containsFields(out string, fields []string) bool {
	for _, line := range strings.Split(out, "\n") {
		got := strings.Fields(line)
		i := 0
		for _, f := range got {
			if i < len(fields) && f == fields[i] {
				i++
			}
		}
		if i == len(fields) {
			return true
		}
	}
	return false
}

func get(t *testing.T, cl *clients, ns string) *routingv1alpha1.RoutingService {
	t.Helper()
	u, err := cl.dyn.Resource(rsvcGVR).Namespace(ns).Get(context.Background(), "rs-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := toTyped(u)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPauseResume(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "progressing", "ns"))
	res := runWith(cl, someTime, "pause", "rs-a", "-n", "ns")
	if res.code != 0 || !strings.Contains(res.out, "routingservice ns/rs-a paused") || res.err != "" {
		t.Fatalf("pause: %+v", res)
	}
	if !get(t, cl, "ns").Spec.Paused {
		t.Fatal("spec.paused is not true")
	}
	res = runWith(cl, someTime, "pause", "rs-a", "-n", "ns")
	if res.code != 0 || !strings.Contains(res.out, "already paused: nothing changed") {
		t.Fatalf("pause again: %+v", res)
	}
	res = runWith(cl, someTime, "resume", "rs-a", "-n", "ns")
	if res.code != 0 || !strings.Contains(res.out, "routingservice ns/rs-a resumed") || get(t, cl, "ns").Spec.Paused {
		t.Fatalf("resume: %+v", res)
	}
}

// Flux removes what a field manager named "kubectl…" wrote (the e2e story
// TestFluxAndAPersonsControls shows it on a real Flux); the plugin's writes must not be named so.
func TestFieldManagerOutlivesFlux(t *testing.T) {
	if strings.HasPrefix(fieldManager, "kubectl") {
		t.Errorf("field manager %q begins with kubectl: Flux's next apply removes the plugin's pause and abort", fieldManager)
	}
}

// Before patching spec.paused of a RoutingService a GitOps tool manages, a warning on stderr.
func TestGitOpsWarnings(t *testing.T) {
	owned := in(t, "progressing", "ns")
	owned.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:schema":{}}}`)},
		{Manager: "argocd-controller", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:paused":{},"f:shards":{}}}`)},
	})
	res := runWith(fakeClients(Objects{}, owned), someTime, "pause", "rs-a", "-n", "ns")
	if res.code != 0 || !strings.Contains(res.err, "warning: Argo CD (field manager argocd-controller) owns spec.paused of routingservice ns/rs-a: "+
		"self-heal will revert this patch at the next sync and the rollout will go on: the pause belongs in Git") {
		t.Errorf("owned: %+v", res)
	}
	// The control annotations are not owned by Argo CD here: no warning for them.
	res = runWith(fakeClients(Objects{}, owned), someTime, "promote", "rs-a", "-n", "ns")
	if res.code != 0 || res.err != "" {
		t.Errorf("promote: %+v", res)
	}

	flux := in(t, "progressing", "ns")
	flux.SetLabels(map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"})
	res = runWith(fakeClients(Objects{}, flux), someTime, "pause", "rs-a", "-n", "ns")
	if !strings.Contains(res.err, "warning: routingservice ns/rs-a is managed by Flux (label kustomize.toolkit.fluxcd.io/name=apps): "+
		"self-heal will revert this patch if the manifest in Git sets spec.paused: the pause belongs in Git") {
		t.Errorf("flux: %+v", res)
	}

	// As Flux leaves it: its field manager and its labels, named once as one tool.
	flux.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:shards":{}}}`)}})
	res = runWith(fakeClients(Objects{}, flux), someTime, "pause", "rs-a", "-n", "ns")
	if !strings.Contains(res.err, "warning: routingservice ns/rs-a is managed by Flux (field manager kustomize-controller; label kustomize.toolkit.fluxcd.io/name=apps): ") {
		t.Errorf("flux, field manager and label: %+v", res)
	}

	argoAnn := in(t, "healthy", "ns")
	argoAnn.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "edge:routing.schemagate.io/RoutingService:ns/rs-a"})
	argoAnn.Object["spec"].(map[string]any)["paused"] = true
	res = runWith(fakeClients(Objects{}, argoAnn), someTime, "resume", "rs-a", "-n", "ns")
	if !strings.Contains(res.err, "is managed by Argo CD (annotation argocd.argoproj.io/tracking-id=") || !strings.Contains(res.err, "resume in Git") {
		t.Errorf("argo annotation: %+v", res)
	}

	gitAnn := in(t, "healthy", "ns")
	gitAnn.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kustomize-controller", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:schemagate.io/abort":{}}}}`)}})
	res = runWith(fakeClients(Objects{}, gitAnn), someTime, "abort", "rs-a", "-n", "ns")
	if !strings.Contains(res.err, "warning: Flux (field manager kustomize-controller) owns annotation schemagate.io/abort of routingservice ns/rs-a: self-heal will set it back") {
		t.Errorf("owned annotation: %+v", res)
	}

	plain := in(t, "progressing", "ns")
	if res := runWith(fakeClients(Objects{}, plain), someTime, "pause", "rs-a", "-n", "ns"); res.err != "" {
		t.Errorf("no GitOps tool, still a warning: %q", res.err)
	}

	// Names and values from the cluster cannot add lines to the terminal's warning, nor turn it
	// around with a right-to-left override: each is printed escaped, on the warning's one line.
	forged := in(t, "progressing", "ns")
	forged.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "apps:x\nrouting service ns/rs-a paused.\r\u202e"})
	res = runWith(fakeClients(Objects{}, forged), someTime, "pause", "rs-a", "-n", "ns")
	if lines := strings.Count(res.err, "\n"); lines != 1 || strings.ContainsAny(res.err, "\r\u202e") || !strings.Contains(res.err, `apps:x\nrouting service`) {
		t.Errorf("a forged annotation in the warning (%d lines): %q", lines, res.err)
	}
}

// Each control annotation gets a fresh value, and the command says what the controller will do.
func TestControlAnnotations(t *testing.T) {
	token := regexp.MustCompile(`annotated (schemagate\.io/[a-z]+)=(20261130T070000Z-[a-z0-9]{5})\n`)
	for _, tc := range []struct {
		verb, state, annotation, says string
	}{
		{"promote", "shard-check-inconclusive", routingv1alpha1.AnnotationPromote, "The controller ends shard us-east's bake now, setting aside any check still running or inconclusive, and promotes it (BakeSkipped); shard eu-west starts next."},
		{"promote", "progressing", routingv1alpha1.AnnotationPromote, "No shard is baking: the controller changes nothing (PromoteIgnored)."},
		{"promote", "paused", routingv1alpha1.AnnotationPromote, "spec.paused is true: the promote waits"},
		{"abort", "progressing", routingv1alpha1.AnnotationAbort, "The controller aborts the rollout of revision 4c59v6bw28: each shard it touched goes back to the revision that served it last"},
		{"abort", "healthy", routingv1alpha1.AnnotationAbort, "No rollout is in progress (revision cc447w65w7 is the stable one): the controller changes nothing (AbortIgnored)."},
		{"abort", "paused", routingv1alpha1.AnnotationAbort, "This is a first rollout, with nothing served before: the controller halts it where it is"},
		{"retry", "migration-failed", routingv1alpha1.AnnotationRetry, "The controller runs the migration to schema 2 again as attempt 2"},
		{"retry", "progress-deadline-exceeded", routingv1alpha1.AnnotationRetry, "The controller tries revision 47x4dwczzw again from shard us-east (RolloutRetried)."},
		{"retry", "healthy", routingv1alpha1.AnnotationRetry, "Nothing has failed: the controller changes nothing (RetryIgnored)."},
	} {
		t.Run(tc.verb+"/"+tc.state, func(t *testing.T) {
			u := in(t, tc.state, "ns")
			u.SetName("rs-a")
			cl := fakeClients(Objects{}, u)
			res := runWith(cl, someTime, tc.verb, "rs-a", "-n", "ns")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.err)
			}
			m := token.FindStringSubmatch(res.out)
			if m == nil || m[1] != tc.annotation {
				t.Fatalf("stdout %q", res.out)
			}
			if got := get(t, cl, "ns").Annotations[tc.annotation]; got != m[2] {
				t.Errorf("annotation %s = %q, want %q", tc.annotation, got, m[2])
			}
			if !strings.Contains(res.out, tc.says) {
				t.Errorf("stdout lacks %q:\n%s", tc.says, res.out)
			}
			// A second command sets another value: the controller acts once per value.
			runWith(cl, someTime, tc.verb, "rs-a", "-n", "ns")
			if again := get(t, cl, "ns").Annotations[tc.annotation]; again == m[2] {
				t.Errorf("the second %s set the same value %q", tc.verb, again)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "healthy", "ns"), in(t, "paused", "ns"), in(t, "migrating", "other"))
	res := runWith(cl, someTime, "__complete", "get", "-n", "ns", "")
	if !strings.HasPrefix(res.out, "rs-a\nrs-b\n:4\n") {
		t.Errorf("names in ns: %q", res.out)
	}
	res = runWith(cl, someTime, "__complete", "promote", "-n", "ns", "rs-b")
	if !strings.HasPrefix(res.out, "rs-b\n:4\n") {
		t.Errorf("prefix: %q", res.out)
	}
	res = runWith(cl, someTime, "__complete", "status", "-n", "ns", "rs-a", "")
	if !strings.HasPrefix(res.out, ":4\n") {
		t.Errorf("second argument: %q", res.out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		res := runWith(cl, someTime, "completion", shell)
		if res.code != 0 || !strings.Contains(res.out, "kubectl-schemagate") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, res.code, len(res.out))
		}
	}
	if res := runWith(cl, someTime, "completion", "powershell"); res.code == 0 {
		t.Errorf("completion powershell succeeded")
	}
}

// get -w draws once and exits by itself when the rollout is already over: 0 Ready, 1 Stalled.
func TestGetWatchEndsWhenDone(t *testing.T) {
	for state, code := range map[string]int{"healthy": 0, "migration-failed": 1} {
		w := newWorld(t, state, "2026-11-30T06:56:53Z")
		res := runWith(w.clients(), w.now, "get", "rs-a", "-n", w.r.Namespace, "-w")
		if res.code != code || !strings.Contains(res.out, "RoutingService/rs-a") || strings.Count(res.out, "Name:") != 1 {
			t.Errorf("%s: exit %d (want %d)\n%s\n%s", state, res.code, code, res.out, res.err)
		}
	}
}

// The docs show get's screens as the golden files have them: a change of the tree shows in both.
func TestDocsShowTheGoldenScreens(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubectl-schemagate.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"progressing", "shard-check-failed"} {
		golden, err := os.ReadFile(filepath.Join("testdata", state+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), string(golden)) {
			t.Errorf("docs/kubectl-schemagate.md does not show testdata/%s.golden as it is", state)
		}
	}
}

// The krew manifest names the plugin's binary for linux and darwin, amd64 and arm64.
func TestKrewManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "plugins", "schemagate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Homepage         string `json:"homepage"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				Sha256 string `json:"sha256"`
				Bin    string `json:"bin"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "schemagate" ||
		!strings.HasPrefix(m.Spec.Version, "v") || m.Spec.ShortDescription == "" || len(m.Spec.ShortDescription) > 50 || m.Spec.Description == "" {
		t.Errorf("manifest %+v", m)
	}
	seen := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		key := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		seen[key] = true
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(p.Sha256) || !strings.HasPrefix(p.URI, "https://") ||
			!strings.Contains(p.URI, strings.ReplaceAll(key, "/", "_")) || p.Bin != "kubectl-schemagate" || len(p.Files) == 0 {
			t.Errorf("platform %s: %+v", key, p)
		}
	}
	for _, want := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"} {
		if !seen[want] {
			t.Errorf("no platform %s", want)
		}
	}
}

// get -w redraws when the RoutingService changes and ends once the rollout is Ready.
func TestGetWatchFollowsChanges(t *testing.T) {
	w := newWorld(t, "progressing", "2026-11-30T06:52:00Z")
	goldenStates[2].build(w)
	cl := w.clients()
	go func() {
		time.Sleep(300 * time.Millisecond)
		res := cl.dyn.Resource(rsvcGVR).Namespace(w.r.Namespace)
		u, err := res.Get(context.Background(), "rs-a", metav1.GetOptions{})
		if err != nil {
			panic(err)
		}
		conds, _, _ := unstructured.NestedSlice(captured(t, "healthy").Object, "status", "conditions")
		for _, c := range conds {
			c.(map[string]any)["observedGeneration"] = int64(2)
		}
		_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
		if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			panic(err)
		}
	}()
	start := time.Now()
	res := runWith(cl, w.now, "get", "rs-a", "-n", w.r.Namespace, "-w")
	if res.code != 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("exit %d after %s: %s", res.code, time.Since(start), res.err)
	}
	frames := strings.Split(res.out, "Name:")[1:]
	if len(frames) != 2 || !strings.Contains(frames[0], "Status:     Progressing") || !strings.Contains(frames[1], "Status:     Ready") {
		t.Errorf("%d frames:\n%s", len(frames), res.out)
	}
}

// get -w on a name that does not exist yet waits for it (exit 1 would say Stalled), then follows
// it as usual; a RoutingService deleted while watched ends the watch with 2, not 1.
func TestGetWatchWaitsForCreationAndReportsDeletion(t *testing.T) {
	w := newWorld(t, "healthy", "2026-11-30T06:56:53Z")
	cl := fakeClients(w.objs)
	created := make(chan error, 1)
	go func(cl *clients, u *unstructured.Unstructured) {
		time.Sleep(300 * time.Millisecond)
		_, err := cl.dyn.Resource(rsvcGVR).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
		created <- err
	}(cl, w.u)
	res := runWith(cl, w.now, "get", "rs-a", "-n", w.r.Namespace, "-w")
	if res.code != 0 || !strings.Contains(res.err, "waiting for it to be created") || strings.Count(res.out, "Name:") != 1 {
		t.Errorf("created later: exit %d\n%s\n%s", res.code, res.out, res.err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}

	w = newWorld(t, "progressing", "2026-11-30T06:52:00Z")
	cl = w.clients()
	go func(cl *clients, ns string) {
		time.Sleep(300 * time.Millisecond)
		_ = cl.dyn.Resource(rsvcGVR).Namespace(ns).Delete(context.Background(), "rs-a", metav1.DeleteOptions{})
	}(cl, w.r.Namespace)
	res = runWith(cl, w.now, "get", "rs-a", "-n", w.r.Namespace, "-w")
	if res.code != codeFailed || !strings.Contains(res.err, "was deleted") {
		t.Errorf("deleted: exit %d\n%s", res.code, res.err)
	}
	// Without -w a missing name is still an error at once.
	if res := runWith(fakeClients(Objects{}), w.now, "get", "rs-a", "-n", w.r.Namespace); res.code == 0 || !strings.Contains(res.err, "not found") {
		t.Errorf("get without -w: exit %d %s", res.code, res.err)
	}
}
