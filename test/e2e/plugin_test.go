//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// Issue 12: the kubectl plugin, built (bin/kubectl-schemagate) and run against the local cluster
// with --kubeconfig, as a person or a CI job runs it.

// pluginRun is one run of the plugin: what it printed, its exit code and how long it took.
type pluginRun struct {
	out, err string
	code     int
	took     time.Duration
}

// kubectlSchemagate runs the plugin with args against the local cluster; it fails the test if
// the plugin has not exited within limit.
func kubectlSchemagate(t *testing.T, limit time.Duration, args ...string) pluginRun {
	t.Helper()
	r, err := runPlugin(limit, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runPlugin runs the plugin (from any goroutine) and returns an error only when it could not
// run or did not exit within limit.
func runPlugin(limit time.Duration, args ...string) (pluginRun, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl-schemagate"), append(args, "--kubeconfig", cluster.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := pluginRun{out: out.String(), err: errOut.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, fmt.Errorf("kubectl-schemagate %s did not exit within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), limit, r.out, r.err)
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		return r, fmt.Errorf("kubectl-schemagate %s: %w", strings.Join(args, " "), err)
	}
	return r, nil
}

// expectExit fails the test unless r exited with code.
func expectExit(t *testing.T, what string, r pluginRun, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.out, r.err)
	}
}

func expectContains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// annotated returns the value the plugin's output says it set (`annotated KEY=VALUE`).
func annotated(t *testing.T, r pluginRun, key string) string {
	t.Helper()
	for _, line := range strings.Split(r.out, "\n") {
		if i := strings.Index(line, " annotated "+key+"="); i >= 0 {
			return strings.TrimSpace(line[i+len(" annotated "+key+"="):])
		}
	}
	t.Fatalf("no %q in:\n%s", "annotated "+key+"=", r.out)
	return ""
}

// `get -w` follows a first rollout and ends by itself once it is Ready; then `status` exits 0 at
// once, and `get`, `get -o json` and `list` show the promoted RoutingService.
func TestPluginGetWatchAndStatusReady(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	if err := k8s.Create(context.Background(), e2eFixture(ns)); err != nil {
		t.Fatal(err)
	}
	// status and get -w follow the same rollout from its start, side by side.
	type done struct {
		r   pluginRun
		err error
	}
	statusDone := make(chan done, 1)
	go func() {
		r, err := runPlugin(2*time.Minute, "status", "rs-a", "-n", ns, "--timeout", "100s")
		statusDone <- done{r, err}
	}()
	w := kubectlSchemagate(t, 2*time.Minute, "get", "rs-a", "-n", ns, "-w")
	expectExit(t, "get -w", w, 0)
	followed := <-statusDone
	if followed.err != nil {
		t.Fatal(followed.err)
	}
	expectExit(t, "status from the start", followed.r, 0)
	expectContains(t, "status from the start", followed.r.out, "Reconciling=True Migrating", "Reconciling=True ShardProgressing: shard us-east",
		"Reconciling=True ShardBaking: shard ap-south", "Ready=True RolloutComplete", "is ready: generation 1")
	t.Logf("status from the start:\n%s", followed.r.out)
	if w.err != "" || followed.r.err != "" {
		t.Errorf("stderr of get -w: %q; of status: %q", w.err, followed.r.err)
	}
	if err := kit().HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete)(); err != nil {
		t.Fatalf("get -w ended before the rollout was done: %v", err)
	}
	frames := strings.Split(w.out, "Name:")
	last := frames[len(frames)-1]
	if len(frames) < 3 {
		t.Errorf("get -w drew %d frames over a whole rollout:\n%s", len(frames)-1, w.out)
	}
	t.Logf("get -w drew %d frames in %s; the last:\nName:%s", len(frames)-1, w.took.Round(100*time.Millisecond), last)
	expectContains(t, "the last frame of get -w", last, "Status:     Ready (Ready=True, RolloutComplete)", "Progress:   3/3 promoted")
	expectContains(t, "get -w", w.out, "Job/rs-a-schema-", "Running", "Progressing")

	s := kubectlSchemagate(t, 30*time.Second, "status", "rs-a", "-n", ns, "--timeout", "20s")
	expectExit(t, "status", s, 0)
	expectContains(t, "status", s.out, "Ready=True RolloutComplete", "is ready: generation 1")

	g := kubectlSchemagate(t, 30*time.Second, "get", "rs-a", "-n", ns)
	expectExit(t, "get", g, 0)
	expectContains(t, "get", g.out, "Shard/us-east", "Promoted", "ReplicaSet/rs-a-ap-south-", "stable, update, serving", "Pod/rs-a-eu-west-",
		"1/1 ready, 0 restarts, on kwok-eu-west-1-", "Job/rs-a-schema-", "Completed")

	j := kubectlSchemagate(t, 30*time.Second, "get", "rs-a", "-n", ns, "-o", "json")
	expectExit(t, "get -o json", j, 0)
	var v struct {
		State  string `json:"state"`
		Done   bool   `json:"done"`
		Shards []struct {
			Name string `json:"name"`
			Step string `json:"step"`
			RSs  []struct {
				Pods []struct {
					IsReady bool `json:"isReady"`
				} `json:"pods"`
			} `json:"replicaSets"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(j.out), &v); err != nil {
		t.Fatalf("%v\n%s", err, j.out)
	}
	if v.State != "Ready" || !v.Done || len(v.Shards) != 3 {
		t.Fatalf("view %+v", v)
	}
	for _, sh := range v.Shards {
		ready := 0
		for _, rs := range sh.RSs {
			for _, p := range rs.Pods {
				if p.IsReady {
					ready++
				}
			}
		}
		if sh.Step != "Promoted" || ready != 3 {
			t.Errorf("shard %s: step %s, %d ready pods", sh.Name, sh.Step, ready)
		}
	}

	l := kubectlSchemagate(t, 30*time.Second, "list", "-n", ns)
	expectExit(t, "list", l, 0)
	expectContains(t, "list", l.out, "READY", "RolloutComplete", "3/3")
	if fields := strings.Fields(strings.Split(l.out, "\n")[1]); len(fields) < 3 || fields[0] != "rs-a" || fields[1] != "True" {
		t.Errorf("list:\n%s", l.out)
	}
}

// A migration that fails: `status` exits 1 with the reason, `get -w` ends at once with 1, and
// `retry` runs the migration again exactly once (attempt 2), however long one waits.
func TestPluginStalledAndRetry(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	r := e2eFixture(ns)
	r.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "fail"}
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	s := kubectlSchemagate(t, 2*time.Minute, "status", "rs-a", "-n", ns, "--timeout", "90s")
	expectExit(t, "status of a failed migration", s, 1)
	expectContains(t, "status", s.out, "Stalled=True MigrationFailed")
	expectContains(t, "status stderr", s.err, "error: RoutingService "+ns+"/rs-a is stalled: MigrationFailed: migration Job rs-a-schema-")
	t.Logf("status of a failing migration:\n%s%s", s.out, s.err)

	w := kubectlSchemagate(t, 30*time.Second, "get", "rs-a", "-n", ns, "-w")
	expectExit(t, "get -w on a stalled RoutingService", w, 1)
	expectContains(t, "get -w", w.out, "Status:     Stalled (Stalled=True, MigrationFailed)", "Failed")

	rt := kubectlSchemagate(t, 30*time.Second, "retry", "rs-a", "-n", ns)
	expectExit(t, "retry", rt, 0)
	expectContains(t, "retry", rt.out, "The controller runs the migration to schema 1 again as attempt 2")
	token := annotated(t, rt, routingv1alpha1.AnnotationRetry)
	if got := kit().Get(t, ns).Annotations[routingv1alpha1.AnnotationRetry]; got != token {
		t.Fatalf("annotation %s = %q, the plugin said %q", routingv1alpha1.AnnotationRetry, got, token)
	}
	story.Eventually(t, 30*time.Second, "status.lastHandledRetry is the plugin's value", func() error {
		if got := kit().Get(t, ns).Status.LastHandledRetry; got != token {
			return fmt.Errorf("lastHandledRetry %q", got)
		}
		return nil
	})
	attempts := func() map[string]int {
		n := map[string]int{}
		for _, j := range kit().Jobs(t, ns) {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration {
				n[j.Labels[rollout.LabelAttempt]]++
			}
		}
		return n
	}
	story.Eventually(t, 30*time.Second, "migration attempt 2", func() error {
		if n := attempts(); n["2"] != 1 {
			return fmt.Errorf("migration Jobs by attempt: %v", n)
		}
		return nil
	})
	story.Eventually(t, 60*time.Second, "attempt 2 fails too", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonMigrationFailed))
	story.Consistently(t, 3*time.Second, "the retry acted once", func() error {
		if n := attempts(); len(n) != 2 || n["1"] != 1 || n["2"] != 1 {
			return fmt.Errorf("migration Jobs by attempt: %v", n)
		}
		return nil
	})
}

// A migration that never ends: `status --timeout 2s` exits 3; `pause` warns that Argo CD manages
// the RoutingService, sets spec.paused once, and `resume` clears it.
func TestPluginTimeoutPauseResume(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	r := e2eFixture(ns)
	r.Labels = map[string]string{"argocd.argoproj.io/instance": "edge"}
	r.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "Reconciling=True Migrating", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonMigrating))
	s := kubectlSchemagate(t, 30*time.Second, "status", "rs-a", "-n", ns, "--timeout", "2s")
	expectExit(t, "status --timeout 2s while migrating", s, 3)
	expectContains(t, "status", s.out, "Reconciling=True Migrating", "Ready=False Migrating")
	expectContains(t, "status stderr", s.err, "timed out after 2s waiting for RoutingService "+ns+"/rs-a: it is Progressing (Migrating)")
	if s.took < 2*time.Second || s.took > 15*time.Second {
		t.Errorf("status --timeout 2s took %s", s.took)
	}

	p := kubectlSchemagate(t, 30*time.Second, "pause", "rs-a", "-n", ns)
	expectExit(t, "pause", p, 0)
	expectContains(t, "pause", p.out, "routingservice "+ns+"/rs-a paused")
	expectContains(t, "pause stderr", p.err, "warning: routingservice "+ns+"/rs-a is managed by Argo CD (label argocd.argoproj.io/instance=edge)", "the pause belongs in Git")
	if !kit().Get(t, ns).Spec.Paused {
		t.Fatal("spec.paused is not true after pause")
	}
	gen := kit().Get(t, ns).Generation
	story.Eventually(t, 30*time.Second, "Reconciling=True Paused", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonPaused))
	again := kubectlSchemagate(t, 30*time.Second, "pause", "rs-a", "-n", ns)
	expectExit(t, "pause again", again, 0)
	expectContains(t, "pause again", again.out, "already paused: nothing changed")
	if g := kit().Get(t, ns).Generation; g != gen {
		t.Errorf("a second pause changed the generation %d → %d", gen, g)
	}

	res := kubectlSchemagate(t, 30*time.Second, "resume", "rs-a", "-n", ns)
	expectExit(t, "resume", res, 0)
	expectContains(t, "resume", res.out, "routingservice "+ns+"/rs-a resumed")
	if kit().Get(t, ns).Spec.Paused {
		t.Fatal("spec.paused is still true after resume")
	}
	story.Eventually(t, 30*time.Second, "Reconciling=True Migrating again", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonMigrating))
}

// A long bake: `get` counts it down, `promote` ends the bake of that shard only, once; `abort`
// stops the rollout (Stalled=True Aborted), once; a promote with nothing baking changes nothing.
func TestPluginPromoteAndAbort(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	r := e2eFixture(ns)
	r.Spec.Strategy.BakeSeconds = ptr.To(int32(600))
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	step := func(shard int) routingv1alpha1.ShardStep {
		st := kit().Get(t, ns).Status
		if len(st.Shards) <= shard {
			return ""
		}
		return st.Shards[shard].Step
	}
	stepIs := func(shard int, want routingv1alpha1.ShardStep) func() error {
		return func() error {
			if got := step(shard); got != want {
				return fmt.Errorf("shard %d is %q, want %s", shard, got, want)
			}
			return nil
		}
	}
	story.Eventually(t, 60*time.Second, "us-east bakes", stepIs(0, routingv1alpha1.ShardStepBaking))
	g := kubectlSchemagate(t, 30*time.Second, "get", "rs-a", "-n", ns)
	expectExit(t, "get", g, 0)
	expectContains(t, "get while baking", g.out, "Shard/us-east", "Baking", "Progress:   0/3 promoted, current shard us-east (Baking)")
	if !regexp.MustCompile(`Shard/us-east +Baking .*; bake ends in (10m|9m[0-5][0-9]s) `).MatchString(g.out) {
		t.Fatalf("get while baking counts no bake of about 10m down:\n%s", g.out)
	}

	p := kubectlSchemagate(t, 30*time.Second, "promote", "rs-a", "-n", ns)
	expectExit(t, "promote", p, 0)
	expectContains(t, "promote", p.out, "The controller ends shard us-east's bake now", "shard eu-west starts next")
	token := annotated(t, p, routingv1alpha1.AnnotationPromote)
	story.Eventually(t, 30*time.Second, "status.lastHandledPromote is the plugin's value", func() error {
		if got := kit().Get(t, ns).Status.LastHandledPromote; got != token {
			return fmt.Errorf("lastHandledPromote %q", got)
		}
		return nil
	})
	story.Eventually(t, 10*time.Second, "us-east promoted", stepIs(0, routingv1alpha1.ShardStepPromoted))
	story.Eventually(t, 60*time.Second, "eu-west bakes", stepIs(1, routingv1alpha1.ShardStepBaking))
	story.Consistently(t, 3*time.Second, "the promote acted once: eu-west keeps baking, ap-south waits", func() error {
		if s1, s2 := step(1), step(2); s1 != routingv1alpha1.ShardStepBaking || s2 != routingv1alpha1.ShardStepPending {
			return fmt.Errorf("eu-west %s, ap-south %s", s1, s2)
		}
		return nil
	})

	a := kubectlSchemagate(t, 30*time.Second, "abort", "rs-a", "-n", ns)
	expectExit(t, "abort", a, 0)
	expectContains(t, "abort", a.out, "This is a first rollout, with nothing served before: the controller halts it where it is")
	abortToken := annotated(t, a, routingv1alpha1.AnnotationAbort)
	story.Eventually(t, 30*time.Second, "Stalled=True Aborted", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted))
	if got := kit().Get(t, ns).Status.LastHandledAbort; got != abortToken {
		t.Fatalf("lastHandledAbort %q, the plugin set %q", got, abortToken)
	}
	s := kubectlSchemagate(t, 30*time.Second, "status", "rs-a", "-n", ns)
	expectExit(t, "status after abort", s, 1)
	expectContains(t, "status stderr", s.err, "is stalled: Aborted: the rollout of revision")

	p2 := kubectlSchemagate(t, 30*time.Second, "promote", "rs-a", "-n", ns)
	expectExit(t, "promote after abort", p2, 0)
	expectContains(t, "promote after abort", p2.out, "No shard is baking: the controller changes nothing (PromoteIgnored)")
	token2 := annotated(t, p2, routingv1alpha1.AnnotationPromote)
	story.Eventually(t, 30*time.Second, "the second promote is recorded", func() error {
		if got := kit().Get(t, ns).Status.LastHandledPromote; got != token2 {
			return fmt.Errorf("lastHandledPromote %q", got)
		}
		return nil
	})
	story.Consistently(t, 2*time.Second, "nothing moves after the abort", func() error {
		if s2 := step(2); s2 != routingv1alpha1.ShardStepPending {
			return fmt.Errorf("ap-south %s", s2)
		}
		return kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted)()
	})
}

// Bad input: an unknown name, a wrong namespace, a missing argument, a bad flag value.
func TestPluginBadInput(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	other := kit().NewNamespace(t)
	r := e2eFixture(ns)
	r.Name = "plugin-lost"
	if err := k8s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"get", "nope", "-n", ns}, 1, `error: RoutingService "nope" not found in namespace "` + ns + `"`},
		{[]string{"get", "plugin-lost", "-n", other}, 1, `error: RoutingService "plugin-lost" not found in namespace "` + other + `"; there is one in namespace "` + ns + `": add -n ` + ns},
		{[]string{"status", "nope", "-n", ns, "--timeout", "5s"}, 2, `RoutingService "nope" not found in namespace "` + ns + `"`},
		{[]string{"status", "plugin-lost", "-n", other}, 2, `not found in namespace "` + other + `"`},
		{[]string{"promote", "nope", "-n", ns}, 1, `RoutingService "nope" not found in namespace "` + ns + `"`},
		{[]string{"pause", "plugin-lost", "-n", other}, 1, `not found in namespace "` + other + `"`},
		{[]string{"get", "-n", ns}, 1, "accepts 1 arg(s), received 0"},
		{[]string{"status", "plugin-lost", "-n", ns, "--timeout", "soon"}, 2, `invalid argument "soon" for "--timeout"`},
		{[]string{"get", "plugin-lost", "-n", ns, "-o", "wide"}, 1, "--output must be json or yaml"},
	} {
		res := kubectlSchemagate(t, 30*time.Second, tc.args...)
		expectExit(t, strings.Join(tc.args, " "), res, tc.code)
		expectContains(t, strings.Join(tc.args, " ")+" stderr", res.err, tc.err)
	}
	// The failed commands changed nothing.
	lost := &routingv1alpha1.RoutingService{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "plugin-lost"}, lost); err != nil {
		t.Fatal(err)
	}
	if lost.Spec.Paused || len(lost.Annotations) != 0 {
		t.Errorf("plugin-lost changed: paused %v, annotations %v", lost.Spec.Paused, lost.Annotations)
	}
}
