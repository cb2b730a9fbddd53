package browser

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The session sees what the dashboard's tests rely on it to see: an exception thrown by the
// page, a confirm() (accepted, its message kept), and every request, including one the page makes
// to another address.
func TestSessionSeesExceptionsDialogsAndRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><main id="app"><section id="s" data-state="Ready"><p data-step="Baking">x</p><p data-step="Baking">y</p></section></main>
<script>
document.getElementById('s').dataset.answer = String(window.confirm('pause ns/rs-a?'));
fetch('http://127.0.0.2:9/elsewhere').catch(() => {});
setTimeout(() => { throw new Error('boom'); }, 0);
</script>`))
	}))
	defer srv.Close()
	s := Start(t, false, time.Minute)
	s.Do(t, "open", chromedp.Navigate(srv.URL+"/"))
	s.WaitFor(t, 10*time.Second, `#s[data-answer="true"]`)
	if d := s.Dialogs(); len(d) != 1 || d[0] != "pause ns/rs-a?" {
		t.Errorf("dialogs %q", d)
	}
	if p := s.Problems(); len(p) == 0 || !strings.Contains(strings.Join(p, " "), "boom") {
		t.Errorf("problems %q: want the thrown error", p)
	}
	outside, total := s.RequestsOutside(srv.URL)
	if total < 2 || len(outside) != 1 || outside[0] != "http://127.0.0.2:9/elsewhere" {
		t.Errorf("requests outside %s: %q of %d", srv.URL, outside, total)
	}
	want := "section#s[data-state=Ready]\n  p[data-step=Baking] ×2"
	if got := Outline(t, s); DiffOutlines(got, "main#app\n  "+strings.ReplaceAll(want, "\n", "\n  ")) != "" {
		t.Errorf("outline:\n%s", got)
	}
}
