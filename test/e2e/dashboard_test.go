//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/browser"
	"github.com/schemagate/schemagate/test/story"
)

// Issue 26: `kubectl schemagate dashboard`, the built plugin run against the local cluster as a
// person runs it, driven in a headless Chromium while three RoutingServices of one namespace roll
// out on kwok's pods: rs-a completes, rs-bake holds its first shard in a 10-minute bake, rs-fail's
// migration fails.

// dashboard runs `kubectl schemagate dashboard args…` until the test ends and returns the URL it
// printed (with its key), its address (http://127.0.0.1:port) and its process ID.
func dashboard(t *testing.T, args ...string) (pageURL, base string, pid int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kubectl-schemagate"), append(append([]string{"dashboard"}, args...), "--kubeconfig", cluster.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(stateDir, "logs", "dashboard-"+strings.ReplaceAll(t.Name(), "/", "-")+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the dashboard did not stop cleanly on SIGINT: %v (log %s)", err, logf.Name())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("the dashboard ran on 10 s after SIGINT")
		}
		logf.Close()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u := strings.TrimSpace(sc.Text()); strings.HasPrefix(u, "http://") {
				found <- u
			}
		}
	}()
	select {
	case pageURL = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("the dashboard printed no URL within 30 s (log %s)", logf.Name())
	}
	u, err := url.Parse(pageURL)
	if err != nil || u.Hostname() != "127.0.0.1" || u.RawQuery != "" || !strings.HasPrefix(u.Fragment, "key=") || len(u.Fragment) != len("key=")+43 {
		t.Fatalf("the dashboard printed %q: want http://127.0.0.1:PORT/#key=…", pageURL)
	}
	return pageURL, "http://" + u.Host, cmd.Process.Pid
}

// processCost reads a process's resident memory (bytes) and the CPU time it has used (clock
// ticks of 10 ms, user and system) from /proc.
func processCost(t *testing.T, pid int) (rss int64, ticks int64) {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return rss, utime + stime
}

// screenshot saves a PNG of the page in the suite's state folder and compares the page's outline
// (test/browser.Outline: its sections, rows, shards, steps and buttons, without text or times)
// with docs/images/dashboard-<name>.structure, the outline of the screenshot the docs show. With
// SCHEMAGATE_UPDATE_SCREENSHOTS=1 it writes both into docs/images instead.
func screenshot(t *testing.T, b *browser.Session, ns, name string) {
	t.Helper()
	png := b.Screenshot(t)
	outline := strings.ReplaceAll(browser.Outline(t, b), ns, "NS") + "\n"
	dir := filepath.Join(rootDir, "docs", "images")
	if os.Getenv("SCHEMAGATE_UPDATE_SCREENSHOTS") == "1" {
		if err := os.WriteFile(filepath.Join(dir, "dashboard-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dashboard-"+name+".structure"), []byte(outline), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	_ = os.WriteFile(filepath.Join(stateDir, "logs", "dashboard-"+name+".png"), png, 0o644)
	want, err := os.ReadFile(filepath.Join(dir, "dashboard-"+name+".structure"))
	if err != nil {
		t.Fatalf("%v (make the docs' screenshots with SCHEMAGATE_UPDATE_SCREENSHOTS=1)", err)
	}
	if d := browser.DiffOutlines(outline, string(want)); d != "" {
		t.Errorf("the page of %s no longer has the structure of docs/images/dashboard-%s.png: %s\n(outline:\n%s)\nrerun with SCHEMAGATE_UPDATE_SCREENSHOTS=1 if the change is meant", name, name, d, outline)
	}
}

// controlStatus POSTs a pause of ns/name to the dashboard's control endpoint as another program
// on the machine would, and returns the answer's status code. edit sets what it holds: the key
// (or not), an Origin, a Host.
func controlStatus(t *testing.T, base, ns, name string, edit func(*http.Request)) int {
	t.Helper()
	body := fmt.Sprintf(`{"action":"pause","namespace":%q,"name":%q}`, ns, name)
	req, err := http.NewRequest(http.MethodPost, base+"/api/control", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", base)
	edit(req)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// controlsSet lists the control annotations r carries, "" when none.
func controlsSet(r *routingv1alpha1.RoutingService) string {
	var set []string
	for _, k := range []string{routingv1alpha1.AnnotationAbort, routingv1alpha1.AnnotationRetry, routingv1alpha1.AnnotationPromote} {
		if v, ok := r.Annotations[k]; ok {
			set = append(set, k+"="+v)
		}
	}
	return strings.Join(set, ", ")
}

func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit().NewNamespace(t)
	named := func(name string) *routingv1alpha1.RoutingService {
		r := e2eFixture(ns)
		r.Name = name
		r.Spec.Template.Labels = map[string]string{"app": name}
		return r
	}
	done, baking, failing := named("rs-a"), named("rs-bake"), named("rs-fail")
	baking.Spec.Strategy.BakeSeconds = ptr.To(int32(600))
	failing.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "fail"}
	for _, r := range []*routingv1alpha1.RoutingService{done, baking, failing} {
		if err := k8s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *routingv1alpha1.RoutingService {
		t.Helper()
		r := &routingv1alpha1.RoutingService{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	condition := func(name, typ string, status metav1.ConditionStatus, reason string) func() error {
		return func() error {
			r := get(name)
			if c := story.Condition(r, typ); c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != r.Generation {
				return fmt.Errorf("%s: %s is %+v, want %s %s", name, typ, c, status, reason)
			}
			return nil
		}
	}

	pageURL, base, pid := dashboard(t, "-n", ns, "--port", "0")
	b := browser.Start(t, true, 4*time.Minute)

	// The overview: the three RoutingServices, each with its state, and rs-bake's first shard
	// baking while the other two shards wait.
	b.Do(t, "open the printed URL", chromedp.Navigate(pageURL))
	b.WaitFor(t, 2*time.Minute, `#services tr.svc[data-name="rs-a"][data-state="Ready"]`)
	b.WaitFor(t, time.Minute, `#services tr.svc[data-name="rs-fail"][data-state="Stalled"]`)
	b.WaitFor(t, time.Minute, `#services tr.svc[data-name="rs-bake"] .region[data-shard="us-east"][data-step="Baking"]`)
	if n := browser.Eval[int](t, b, `document.querySelectorAll('#services tr.svc').length`); n != 3 {
		t.Errorf("the overview lists %d RoutingServices, want 3", n)
	}
	key := strings.TrimPrefix(mustParseURL(t, pageURL).Fragment, "key=")
	if href := browser.Eval[string](t, b, `location.href`); strings.Contains(href, key) {
		t.Errorf("the key stayed in the address bar: %q", href)
	}
	if cookies := browser.Eval[string](t, b, `document.cookie`); cookies != "" {
		t.Errorf("the page set cookies: %q", cookies)
	}
	screenshot(t, b, ns, "overview")

	// rs-bake's page: the bake's countdown, the timeline, the plan.
	b.Do(t, "open rs-bake", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, "#/"+ns+"/rs-bake")))
	b.WaitFor(t, 30*time.Second, `#detail[data-name="rs-bake"] #shards tr[data-shard="us-east"][data-step="Baking"]`)
	if n := browser.Eval[int](t, b, `document.querySelectorAll('#shards tr[data-shard="us-east"] .countdown').length`); n == 0 {
		t.Error("no countdown beside the baking shard")
	}
	if n := browser.Eval[int](t, b, `document.querySelectorAll('#timeline tr[data-kind]').length`); n < 3 {
		t.Errorf("the timeline has %d entries, want the migration Job, the shard's steps and the conditions", n)
	}
	if text := browser.Eval[string](t, b, `document.getElementById('plan-text').textContent`); text == "" {
		t.Error("no plan of the live spec")
	}
	screenshot(t, b, ns, "baking")

	// Refused controls change nothing: without the key, with a wrong one or with the key in a
	// cookie (401), from another page (Origin, 403), to another Host (421).
	withKey := func(r *http.Request) { r.Header.Set("X-Schemagate-Key", key) }
	for _, c := range []struct {
		what string
		edit func(*http.Request)
		want int
	}{
		{"no key", func(*http.Request) {}, http.StatusUnauthorized},
		{"a wrong key", func(r *http.Request) { r.Header.Set("X-Schemagate-Key", strings.ToUpper(key)) }, http.StatusUnauthorized},
		{"the key in a cookie", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "schemagate-dashboard", Value: key}) }, http.StatusUnauthorized},
		{"another Origin", func(r *http.Request) { withKey(r); r.Header.Set("Origin", "http://127.0.0.1:1") }, http.StatusForbidden},
		{"another Host", func(r *http.Request) { withKey(r); r.Host = "rebound.example:80" }, http.StatusMisdirectedRequest},
	} {
		if got := controlStatus(t, base, ns, "rs-bake", c.edit); got != c.want {
			t.Errorf("a pause with %s: %d, want %d", c.what, got, c.want)
		}
	}
	if r := get("rs-bake"); r.Spec.Paused || controlsSet(r) != "" {
		t.Fatalf("a refused control changed rs-bake: paused %v, %s", r.Spec.Paused, controlsSet(r))
	}

	// The buttons act through the cluster, each after a confirmation that names the object.
	click := func(action string) {
		t.Helper()
		sel := fmt.Sprintf(`#controls button[data-action=%q]:not([disabled])`, action)
		b.WaitFor(t, 30*time.Second, sel)
		// A button found may be replaced before the click reaches it ("Could not find node"),
		// or between the press and the release when its state changes: then nothing was
		// clicked (no confirmation opened), and the click is tried again.
		var err error
		for try := 0; try < 10; try++ {
			opened := len(b.Dialogs())
			if err = chromedp.Do(b.Ctx, chromedp.Click(chromedp.CSS(sel))); err == nil {
				deadline := time.Now().Add(3 * time.Second)
				for time.Now().Before(deadline) && len(b.Dialogs()) == opened {
					time.Sleep(100 * time.Millisecond)
				}
				if len(b.Dialogs()) > opened {
					return
				}
				err = fmt.Errorf("clicked, but no confirmation opened")
				t.Logf("click %s, try %d: %v", action, try+1, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("click %s: %v; the page's problems: %v", action, err, b.Problems())
	}
	click("pause")
	story.Eventually(t, 30*time.Second, "paused from the page", func() error {
		if !get("rs-bake").Spec.Paused {
			return fmt.Errorf("not paused")
		}
		return nil
	})
	story.Eventually(t, 30*time.Second, "Paused", condition("rs-bake", routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonPaused))
	b.WaitFor(t, 30*time.Second, `#detail[data-name="rs-bake"][data-state="Paused"]`)
	click("resume")
	story.Eventually(t, 30*time.Second, "resumed from the page", func() error {
		if get("rs-bake").Spec.Paused {
			return fmt.Errorf("still paused")
		}
		return nil
	})
	b.WaitFor(t, 30*time.Second, `#detail[data-name="rs-bake"] #shards tr[data-shard="us-east"][data-step="Baking"]`)
	click("promote")
	story.Eventually(t, time.Minute, "us-east promoted before its bake ended", func() error {
		for _, s := range get("rs-bake").Status.Shards {
			if s.Name == "us-east" && s.Step == routingv1alpha1.ShardStepPromoted {
				return nil
			}
		}
		return fmt.Errorf("us-east not promoted")
	})
	click("abort")
	story.Eventually(t, time.Minute, "aborted from the page", condition("rs-bake", routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted))
	b.WaitFor(t, 30*time.Second, `#detail[data-name="rs-bake"][data-state="Stalled"]`)
	dialogs := b.Dialogs()
	if len(dialogs) != 4 {
		t.Errorf("%d confirmations, want 4 (pause, resume, promote, abort): %q", len(dialogs), dialogs)
	}
	for _, d := range dialogs {
		if !strings.Contains(d, ns+"/rs-bake") {
			t.Errorf("a confirmation does not name the object: %q", d)
		}
	}

	// rs-fail's page says why it stopped.
	b.Do(t, "open rs-fail", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, "#/"+ns+"/rs-fail")))
	b.WaitFor(t, 30*time.Second, `#detail[data-name="rs-fail"][data-state="Stalled"]`)
	if line := browser.Eval[string](t, b, `document.getElementById('status-line').textContent`); !strings.Contains(line, routingv1alpha1.ReasonMigrationFailed) {
		t.Errorf("rs-fail's status line: %q", line)
	}
	screenshot(t, b, ns, "migration-failed")

	// What the dashboard costs: its memory, and its CPU over 10 s in which nothing it watches
	// changes (rs-a done, rs-bake and rs-fail stalled) with one tab open.
	rss, before := processCost(t, pid)
	time.Sleep(10 * time.Second)
	_, after := processCost(t, pid)
	t.Logf("the dashboard's cost with 3 RoutingServices and one tab:\n| resident memory | CPU over 10 s idle |\n|---|---|\n| %.1f MiB | %d ticks of 10 ms |", float64(rss)/(1<<20), after-before)

	if outside, total := b.RequestsOutside(base); len(outside) != 0 || total == 0 {
		t.Errorf("the page made %d requests, %d of them outside %s: %q", total, len(outside), base, outside)
	}
	if p := b.Problems(); len(p) != 0 {
		t.Errorf("the page's problems: %q", p)
	}
	if r := get("rs-a"); r.Spec.Paused || controlsSet(r) != "" {
		t.Errorf("rs-a changed though no control named it: paused %v, %s", r.Spec.Paused, controlsSet(r))
	}
}

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
