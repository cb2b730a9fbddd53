//go:build browser

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium is the path of a Chromium on PATH, "" when there is none.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless Chromium for the test. It accepts every confirm() (a control's
// confirmation) and collects the page's JavaScript exceptions, console errors and error logs (a
// Content-Security-Policy violation is one); problems returns them once the events of the last
// step have arrived.
func browser(t *testing.T) (ctx context.Context, problems func() []string) {
	t.Helper()
	path := chromium()
	if path == "" {
		t.Skip("no chromium or chromium-browser on PATH")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var found []string
	add := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		found = append(found, s)
	}
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	console := chromedp.Events(ctx, runtime.ConsoleAPICalled)
	logs := chromedp.Events(ctx, cdplog.EntryAdded)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			add("exception: " + msg)
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				add("console.error")
			}
		}
	}()
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			if ev.Entry != nil && ev.Entry.Level == cdplog.EntryLevelError {
				add("log: " + ev.Entry.Text)
			}
		}
	}()
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				add("dialog: " + err.Error())
			}
		}
	}()
	return ctx, func() []string {
		time.Sleep(300 * time.Millisecond) // the events come on their own goroutines
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), found...)
	}
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// TestBrowserGoldenStates serves each golden state of get to headless Chromium and checks that
// the overview and the detail page render, with no JavaScript exception.
func TestBrowserGoldenStates(t *testing.T) {
	ctx, problems := browser(t)
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
			b := newBroker()
			cl := w.clients()
			d, err := newDashServer("", "", false, b, testApp(cl, w.now).dashboardControl(cl))
			if err != nil {
				t.Fatal(err)
			}
			_, base := serveTest(t, d)
			data, err := encodeSnapshot(&Snapshot{Now: w.now, Services: []ServiceModel{m}, Seq: 1})
			if err != nil {
				t.Fatal(err)
			}
			b.publish(data)
			v := m.View
			err = chromedp.Do(ctx,
				chromedp.Navigate(base+"/?key="+d.key),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr.svc[data-state=%q][data-name=%q]`, v.State, v.Name))),
			)
			if err != nil {
				t.Fatalf("overview: %v; page problems: %v", err, problems())
			}
			regions := eval[int](t, ctx, `document.querySelectorAll('#services tr.svc .region').length`)
			err = chromedp.Do(ctx,
				chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, "#/"+v.Namespace+"/"+v.Name)),
				chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#detail[data-state=%q]`, v.State))),
			)
			if err != nil {
				t.Fatalf("detail: %v; page problems: %v", err, problems())
			}
			shards := eval[int](t, ctx, `document.querySelectorAll('#shards tr[data-shard]').length`)
			rows := eval[int](t, ctx, `document.querySelectorAll('#conditions tr[data-condition]').length`)
			timeline := eval[int](t, ctx, `document.querySelectorAll('#timeline tr[data-kind]').length`)
			planText := eval[string](t, ctx, `document.getElementById('plan-text').textContent`)
			injected := eval[string](t, ctx, `document.getElementById('injected') === null && document.querySelector('#conditions b') === null ? document.querySelector('#conditions tbody').textContent : 'INJECTED'`)
			status := eval[string](t, ctx, `document.getElementById('conn').dataset.state`)
			plots := eval[int](t, ctx, `document.querySelectorAll('#checks svg.plot').length`)
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
				step := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('#shards tr[data-shard=%q]').dataset.step`, c.Name))
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
// carries the page's token and Origin, and the RoutingService is paused.
func TestBrowserControl(t *testing.T) {
	ctx, problems := browser(t)
	w := goldenWorld(t, "progressing")
	b := newBroker()
	cl := w.clients()
	d, err := newDashServer("", "", false, b, testApp(cl, w.now).dashboardControl(cl))
	if err != nil {
		t.Fatal(err)
	}
	_, base := serveTest(t, d)
	data, err := encodeSnapshot(&Snapshot{Now: w.now, Services: []ServiceModel{buildService(w.u, w.r, w.objs, nil, nil, w.now)}, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.publish(data)
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/?key="+d.key+"#/"+w.r.Namespace+"/"+w.r.Name),
		chromedp.WaitVisible(chromedp.CSS(`#controls button[data-action=pause]`)),
		chromedp.Click(chromedp.CSS(`#controls button[data-action=pause]`)),
		chromedp.WaitVisible(chromedp.CSS(`#control-result[data-state=ok]`)),
	)
	if err != nil {
		t.Fatalf("%v; page problems: %v", err, problems())
	}
	result := eval[string](t, ctx, `document.getElementById('control-result').textContent`)
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
