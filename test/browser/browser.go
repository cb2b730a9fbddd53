// Package browser drives a headless Chromium for the dashboard's tests (issue 26) through the
// DevTools protocol (chromedp). The browser is Debian's chromium package, which
// hack/install-chromium.sh installs (`make chromium`); it is started with its background
// networking off, so the only requests it makes are the page's own, which Session records.
package browser

import (
	"context"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Path is the browser to run: $CHROMIUM, else `chromium`, else `chromium-browser` on PATH; ""
// when there is none.
func Path() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Session is one headless browser with one tab. It accepts every confirm() and alert() (a
// control's confirmation) and keeps their messages, and records the page's problems (JavaScript
// exceptions, console errors, error log entries such as a Content-Security-Policy violation) and
// every request the tab made.
type Session struct {
	// Ctx runs chromedp actions in the tab; it ends with the test or after the timeout.
	Ctx context.Context

	mu       sync.Mutex
	problems []string
	dialogs  []string
	requests []string
}

// Start launches the browser for t, closed when t ends. A test with no browser fails when
// require is set (CI: `make test-e2e` installs one) and is skipped otherwise. timeout bounds
// everything the session does.
func Start(t testing.TB, require bool, timeout time.Duration) *Session {
	t.Helper()
	path := Path()
	if path == "" {
		if require {
			t.Fatal("no chromium or chromium-browser on PATH (and no $CHROMIUM): run `make chromium`")
		}
		t.Skip("no chromium or chromium-browser on PATH (and no $CHROMIUM)")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	s := &Session{Ctx: ctx}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("network events of %s: %v", path, err)
	}
	follow(chromedp.Events(ctx, runtime.ExceptionThrown), func(ev runtime.EventExceptionThrown) {
		msg := ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
		s.add(&s.problems, "exception: "+msg)
	})
	follow(chromedp.Events(ctx, runtime.ConsoleAPICalled), func(ev runtime.EventConsoleAPICalled) {
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			s.add(&s.problems, "console.error")
		}
	})
	follow(chromedp.Events(ctx, cdplog.EntryAdded), func(ev cdplog.EventEntryAdded) {
		if ev.Entry != nil && ev.Entry.Level == cdplog.EntryLevelError {
			s.add(&s.problems, "log: "+ev.Entry.Text+" ("+ev.Entry.URL+")")
		}
	})
	follow(chromedp.Events(ctx, network.RequestWillBeSent), func(ev network.EventRequestWillBeSent) {
		if ev.Request != nil {
			s.add(&s.requests, ev.Request.URL)
		}
	})
	follow(chromedp.Events(ctx, page.JavascriptDialogOpening), func(ev page.EventJavascriptDialogOpening) {
		s.add(&s.dialogs, ev.Message)
		if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
			s.add(&s.problems, "dialog: "+err.Error())
		}
	})
	return s
}

// follow calls fn with each event of events, on its own goroutine, until the session ends.
func follow[E any](events iter.Seq2[E, error], fn func(E)) {
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			fn(ev)
		}
	}()
}

func (s *Session) add(list *[]string, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*list = append(*list, v)
}

// settle waits for events of the last action, which arrive on their own goroutine.
func settle() { time.Sleep(300 * time.Millisecond) }

// Problems returns the page's JavaScript exceptions, console errors and error log entries so far.
func (s *Session) Problems() []string {
	settle()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// Dialogs returns the messages of the confirm() and alert() dialogs the page opened so far.
func (s *Session) Dialogs() []string {
	settle()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.dialogs...)
}

// RequestsOutside returns the URLs the tab requested that do not start with base (data: URLs,
// which load nothing, are left out).
func (s *Session) RequestsOutside(base string) (outside []string, total int) {
	settle()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.requests {
		if !strings.HasPrefix(u, base+"/") && u != base && !strings.HasPrefix(u, "data:") {
			outside = append(outside, u)
		}
	}
	return outside, len(s.requests)
}

// Do runs actions in the tab; a failure fails t with the page's problems.
func (s *Session) Do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(s.Ctx, actions...); err != nil {
		t.Fatalf("%s: %v; the page's problems: %v", what, err, s.Problems())
	}
}

// Eval evaluates a JavaScript expression in the page.
func Eval[T any](t testing.TB, s *Session, expr string) T {
	t.Helper()
	v, err := chromedp.Run(s.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// WaitFor waits up to limit for selector to match a visible element.
func (s *Session) WaitFor(t testing.TB, limit time.Duration, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.Ctx, limit)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(selector))); err != nil {
		text, _ := chromedp.Run(s.Ctx, chromedp.Evaluate[string](`document.getElementById('app') ? document.getElementById('app').innerText.slice(0, 4000) : ''`))
		t.Fatalf("%s not visible within %s: %v\nthe page's problems: %v\nthe page:\n%s", selector, limit, err, s.Problems(), text)
	}
}

// Screenshot returns a PNG of the whole page.
func (s *Session) Screenshot(t testing.TB) []byte {
	t.Helper()
	buf, err := chromedp.Run(s.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return buf
}

// Outline returns the page's structure as text, one line per element that carries an id or a
// data-* attribute naming what it is (sections, rows, shards, buttons), indented by depth, with no
// text, times or counts: two renderings of the same state have the same outline even when the
// clock, the names of generated objects or the pixels differ.
func Outline(t testing.TB, s *Session) string {
	t.Helper()
	return Eval[string](t, s, outlineJS)
}

// outlineJS walks #app: an element with an id, or one of the data attributes listed, gives a
// line "tag#id[attr=value]…"; values that carry names of generated objects (pods, ReplicaSets,
// Jobs) or times are left out, and consecutive identical lines are folded into one with ×N.
const outlineJS = `(() => {
  const keep = ['data-route','data-state','data-step','data-shard','data-action','data-condition','data-check','data-cluster'];
  const lines = [];
  const walk = (e, depth) => {
    let line = '';
    if (e.id) line += e.tagName.toLowerCase() + '#' + e.id;
    for (const a of keep) if (e.hasAttribute(a)) line += (line ? '' : e.tagName.toLowerCase()) + '[' + a + '=' + e.getAttribute(a) + ']';
    if (line) { lines.push('  '.repeat(depth) + line); depth++; }
    for (const c of e.children) walk(c, depth);
  };
  walk(document.getElementById('app'), 0);
  const out = [];
  for (const l of lines) {
    const last = out[out.length - 1];
    if (last && (last.line === l)) { last.n++; continue; }
    out.push({line: l, n: 1});
  }
  return out.map(o => o.line + (o.n > 1 ? ' ×' + o.n : '')).join('\n');
})()`

// DiffOutlines returns "" when got and want are the same outline, else a short description of
// the first lines that differ.
func DiffOutlines(got, want string) string {
	g, w := strings.Split(strings.TrimSpace(got), "\n"), strings.Split(strings.TrimSpace(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, gl, wl)
		}
	}
	return ""
}
