//go:build browser || e2e

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/schemagate/schemagate/test/browser"
)

// requireBrowser: under `make test-e2e` (SCHEMAGATE_BIN set), which installs Chromium, a missing
// browser fails the test; elsewhere it skips it.
func requireBrowser() bool { return os.Getenv("SCHEMAGATE_BIN") != "" }

// pageServer is a dashboard on host over a fake cluster of w whose one snapshot holds m, with
// the cluster its controls act on.
func pageServer(t *testing.T, w *world, m ServiceModel, host string) (*dashServer, *clients) {
	t.Helper()
	brk := newBroker()
	cl := w.clients()
	d, err := newDashServer(host, "", false, brk, testApp(cl, w.now).dashboardControl(cl))
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeSnapshot(&Snapshot{Now: w.now, Services: []ServiceModel{m}, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	brk.publish(data)
	return d, cl
}

// servePage serves pageServer's dashboard, and returns it with its address
// (http://127.0.0.1:port) and the cluster its controls act on.
func servePage(t *testing.T, w *world, m ServiceModel) (*dashServer, string, *clients) {
	t.Helper()
	d, cl := pageServer(t, w, m, "")
	_, base := serveTest(t, d)
	return d, base, cl
}

// TestBrowserGoldenStates serves each golden state of get to headless Chromium and checks that
// the overview and the detail page render, with no JavaScript exception.
func TestBrowserGoldenStates(t *testing.T) {
	br := browser.Start(t, requireBrowser(), 4*time.Minute)
	ctx, problems := br.Ctx, br.Problems
	for _, gs := range goldenStates {
		t.Run(gs.state, func(t *testing.T) {
			w := goldenWorld(t, gs.state)
			// Cluster data is text: a message that looks like HTML must stay text.
			conds := w.u.Object["status"].(map[string]any)["conditions"].([]any)
			conds[0].(map[string]any)["message"] = `<img src=x id=injected> & <b>bold</b>`
			r, err := toTyped(w.u)
			if err != nil {
				t.Fatal(err)
			}
			m := buildService(w.u, r, w.objs, nil, nil, w.now)
			d, base, _ := servePage(t, w, m)
			// Leave the page before its server stops (cleanups run last first): a page whose
			// server is gone retries its stream, and the next state's check would count the
			// refused connection as its own problem.
			t.Cleanup(func() { _ = chromedp.Do(ctx, chromedp.Navigate("about:blank")) })
			v := m.View
			err = chromedp.Do(ctx,
				chromedp.Navigate(base+"/#key="+d.key),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr.svc[data-state=%q][data-name=%q]`, v.State, v.Name))),
			)
			if err != nil {
				t.Fatalf("overview: %v; page problems: %v", err, problems())
			}
			regions := browser.Eval[int](t, br, `document.querySelectorAll('#services tr.svc .region').length`)
			err = chromedp.Do(ctx,
				chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, "#/"+v.Namespace+"/"+v.Name)),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-state=%q]`, v.State))),
			)
			if err != nil {
				t.Fatalf("detail: %v; page problems: %v", err, problems())
			}
			shards := browser.Eval[int](t, br, `document.querySelectorAll('#shards tr[data-shard]').length`)
			rows := browser.Eval[int](t, br, `document.querySelectorAll('#conditions tr[data-condition]').length`)
			timeline := browser.Eval[int](t, br, `document.querySelectorAll('#timeline tr[data-kind]').length`)
			planText := browser.Eval[string](t, br, `document.getElementById('plan-text').textContent`)
			injected := browser.Eval[string](t, br, `document.getElementById('injected') === null && document.querySelector('#conditions b') === null ? document.querySelector('#conditions tbody').textContent : 'INJECTED'`)
			status := browser.Eval[string](t, br, `document.getElementById('conn').dataset.state`)
			plots := browser.Eval[int](t, br, `document.querySelectorAll('#checks svg.plot').length`)
			if plots != len(m.Checks) {
				t.Errorf("%d plots, want %d", plots, len(m.Checks))
			}
			if regions != len(v.Shards) || shards != len(v.Shards) {
				t.Errorf("overview regions %d, detail shards %d, want %d", regions, shards, len(v.Shards))
			}
			if rows != len(v.Conditions) || timeline != len(m.Timeline) {
				t.Errorf("conditions %d (want %d), timeline %d (want %d)", rows, len(v.Conditions), timeline, len(m.Timeline))
			}
			if planText == "" {
				t.Error("no plan")
			}
			if !strings.Contains(injected, `<img src=x id=injected> & <b>bold</b>`) {
				t.Errorf("a message was not inserted as text: %q", injected)
			}
			if status != "live" {
				t.Errorf("connection %q", status)
			}
			for _, c := range v.Shards {
				step := browser.Eval[string](t, br, fmt.Sprintf(`document.querySelector('#shards tr[data-shard=%q]').dataset.step`, c.Name))
				if want := c.Step; step != want && !(want == "" && step == "Unknown") {
					t.Errorf("shard %s step %q, want %q", c.Name, step, want)
				}
			}
			if p := problems(); len(p) > 0 {
				t.Errorf("page problems: %v", p)
			}
		})
	}
}

// TestBrowserControl clicks pause in the browser: the confirmation is accepted, the request
// carries the key and the page's Origin, and the RoutingService is paused.
func TestBrowserControl(t *testing.T) {
	br := browser.Start(t, requireBrowser(), 4*time.Minute)
	ctx, problems := br.Ctx, br.Problems
	w := goldenWorld(t, "progressing")
	d, base, cl := servePage(t, w, buildService(w.u, w.r, w.objs, nil, nil, w.now))
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/#key="+d.key+"/"+w.r.Namespace+"/"+w.r.Name),
		chromedp.WaitVisible(chromedp.CSS(`#controls button[data-action=pause]`)),
		chromedp.Click(chromedp.CSS(`#controls button[data-action=pause]`)),
		chromedp.WaitVisible(chromedp.CSS(`#control-result[data-state=ok]`)),
	)
	if err != nil {
		t.Fatalf("%v; page problems: %v", err, problems())
	}
	result := browser.Eval[string](t, br, `document.getElementById('control-result').textContent`)
	if !strings.Contains(result, "routingservice "+w.r.Namespace+"/rs-a paused") {
		t.Errorf("result %q", result)
	}
	if !get(t, cl, w.r.Namespace).Spec.Paused {
		t.Error("not paused")
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}

// TestBrowserConfirmText: an annotation with newlines and a right-to-left override cannot add
// lines to a control's confirmation; a malformed %-escape in the address shows the overview.
func TestBrowserConfirmText(t *testing.T) {
	br := browser.Start(t, requireBrowser(), 4*time.Minute)
	w := goldenWorld(t, "progressing")
	w.u.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "apps:x\n\n\n\n\n\n\nOK: nothing changes.\u202e"})
	d, base, _ := servePage(t, w, buildService(w.u, w.r, w.objs, nil, nil, w.now))
	br.Do(t, "pause",
		chromedp.Navigate(base+"/#key="+d.key+"/"+w.r.Namespace+"/"+w.r.Name),
		chromedp.WaitVisible(chromedp.CSS(`#controls button[data-action=pause]`)),
		chromedp.Click(chromedp.CSS(`#controls button[data-action=pause]`)),
		chromedp.WaitVisible(chromedp.CSS(`#control-result`)),
	)
	dialogs := br.Dialogs()
	if len(dialogs) != 1 {
		t.Fatalf("dialogs %q", dialogs)
	}
	if got := dialogs[0]; strings.Count(got, "\n") != 2 || strings.ContainsRune(got, '\u202e') ||
		!strings.HasPrefix(got, "pause routingservice "+w.r.Namespace+"/"+w.r.Name+"?\n\nWarning: ") {
		t.Errorf("confirmation %q", got)
	}
	br.Do(t, "malformed address",
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(base+"/#/%E0%A4%A/x"),
		chromedp.WaitVisible(chromedp.CSS(`#services tr.svc`)),
	)
	if p := br.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}

// TestBrowserKeys: the page shows nothing without the key, or with a wrong one, and says to open
// the printed URL; it keeps a key only once the server accepted it, so a link with a wrong key
// leaves the good one in place; a new run on the same port (a new key) shuts out a page that
// holds the old one. The page sets no cookie.
func TestBrowserKeys(t *testing.T) {
	br := browser.Start(t, requireBrowser(), 4*time.Minute)
	w := goldenWorld(t, "progressing")
	m := buildService(w.u, w.r, w.objs, nil, nil, w.now)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := ln.Addr().String()
	base := "http://" + host
	var run atomic.Pointer[dashServer] // the plugin's run serving host now
	first, _ := pageServer(t, w, m, host)
	run.Store(first)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { run.Load().ServeHTTP(rw, r) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	open := func(what, url, want string) {
		t.Helper()
		br.Do(t, what,
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(url),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#conn[data-state=%q]`, want))),
		)
		rows := browser.Eval[int](t, br, `document.querySelectorAll('#services tr.svc').length`)
		text := browser.Eval[string](t, br, `document.getElementById('conn').textContent`)
		if want == "closed" && (rows != 0 || !strings.Contains(text, "open the URL the dashboard printed")) {
			t.Errorf("%s: the page lists %d RoutingServices and says %q", what, rows, text)
		}
		if want == "live" && rows != 1 {
			t.Errorf("%s: the page lists %d RoutingServices, want 1", what, rows)
		}
		if href := browser.Eval[string](t, br, `location.href`); strings.Contains(href, "key=") {
			t.Errorf("%s: the key stayed in the address bar: %s", what, href)
		}
		if cookies := browser.Eval[string](t, br, `document.cookie`); cookies != "" {
			t.Errorf("%s: cookies %q", what, cookies)
		}
	}
	open("no key", base+"/", "closed")
	open("a wrong key", base+"/#key="+newSecret(), "closed")
	open("the printed URL", first.URL(), "live")
	open("a link with a wrong key", base+"/#key="+newSecret(), "closed")
	open("again without the key: the good one was kept", base+"/", "live")
	next, _ := pageServer(t, w, m, host)
	run.Store(next)
	open("the old key after a new run on the same port", base+"/", "closed")
	open("the new run's URL", next.URL(), "live")
}

// An autoscaled shard's row says who sets its size and why a promotion holds a scale-down.
func TestBrowserAutoscaledShard(t *testing.T) {
	br := browser.Start(t, requireBrowser(), 2*time.Minute)
	ctx, problems := br.Ctx, br.Problems
	w := goldenWorld(t, "progressing")
	ss := w.u.Object["status"].(map[string]any)["shards"].([]any)
	ss[0].(map[string]any)["scaling"] = map[string]any{"routingShard": "rs-a-us-east", "desiredReplicas": int64(4), "scaledBy": "kube-controller-manager",
		"held": "the scaler asks for 4 pods; the shard keeps the 7 its promotion started with until it has baked"}
	if err := unstructuredSet(w, ss, "status", "shards"); err != nil {
		t.Fatal(err)
	}
	r, err := toTyped(w.u)
	if err != nil {
		t.Fatal(err)
	}
	m := buildService(w.u, r, w.objs, nil, nil, w.now)
	d, base, _ := servePage(t, w, m)
	t.Cleanup(func() { _ = chromedp.Do(ctx, chromedp.Navigate("about:blank")) })
	v := m.View
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/#key="+d.key),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr.svc[data-state=%q][data-name=%q]`, v.State, v.Name))),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, "#/"+v.Namespace+"/"+v.Name)),
		chromedp.WaitVisible(chromedp.CSS(`#shards tr[data-shard="us-east"] .scaling`)),
	)
	if err != nil {
		t.Fatalf("detail: %v; page problems: %v", err, problems())
	}
	text := browser.Eval[string](t, br, `document.querySelector('#shards tr[data-shard="us-east"] .scaling').textContent`)
	for _, want := range []string{"autoscaled by kube-controller-manager (RoutingShard rs-a-us-east)", "4 asked, held: the scaler asks for 4 pods"} {
		if !strings.Contains(text, want) {
			t.Errorf("us-east's scaling %q lacks %q", text, want)
		}
	}
	if n := browser.Eval[int](t, br, `document.querySelectorAll('#shards .scaling').length`); n != 1 {
		t.Errorf("%d shards say they are autoscaled, want 1", n)
	}
	if p := problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}
