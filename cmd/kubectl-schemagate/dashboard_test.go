package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// goldenWorld is the golden state named state, built.
func goldenWorld(t *testing.T, state string) *world {
	t.Helper()
	gs := goldenState(t, state)
	base := gs.state
	if b, ok := goldenBase[gs.state]; ok {
		base = b
	}
	w := newWorld(t, base, gs.now)
	gs.build(w)
	return w
}

// TestDashboardModelGolden builds the dashboard's model of every golden state of get: it holds
// get's View, a timeline sorted by real timestamps with each migration Job's creation and end,
// the plan, the controls, and it encodes.
func TestDashboardModelGolden(t *testing.T) {
	for _, gs := range goldenStates {
		t.Run(gs.state, func(t *testing.T) {
			w := goldenWorld(t, gs.state)
			m := buildService(w.u, w.r, w.objs, nil, nil, w.now)
			want := BuildView(w.r, w.objs, w.now)
			if m.View.State != want.State || m.View.Reason != want.Reason || len(m.View.Shards) != len(want.Shards) {
				t.Errorf("view %s %s, get's %s %s", m.View.State, m.View.Reason, want.State, want.Reason)
			}
			if len(m.Timeline) == 0 {
				t.Fatal("empty timeline")
			}
			for i, e := range m.Timeline {
				if e.Time.IsZero() {
					t.Errorf("entry %d %q has no time", i, e.Text)
				}
				if i > 0 && e.Time.Before(m.Timeline[i-1].Time) {
					t.Errorf("timeline not sorted at %d: %s after %s", i, e.Time, m.Timeline[i-1].Time)
				}
			}
			for _, j := range w.objs.Jobs {
				if !hasEntry(m.Timeline, "Job/"+j.Name, "created", j.CreationTimestamp.Time) {
					t.Errorf("timeline lacks the creation of %s", j.Name)
				}
				if j.Status.CompletionTime != nil && !hasEntry(m.Timeline, "Job/"+j.Name, "completed", j.Status.CompletionTime.Time) {
					t.Errorf("timeline lacks the completion of %s", j.Name)
				}
			}
			for _, c := range w.r.Status.Conditions {
				if !hasEntry(m.Timeline, "Condition/"+c.Type, c.Type+" became "+string(c.Status), c.LastTransitionTime.Time) {
					t.Errorf("timeline lacks condition %s", c.Type)
				}
			}
			if m.Plan.Text == "" && m.Plan.Error == "" {
				t.Error("no plan")
			}
			if m.Plan.Error != "" {
				t.Errorf("plan: %s", m.Plan.Error)
			}
			actions := map[string]ControlModel{}
			for _, c := range m.Controls {
				actions[c.Action] = c
			}
			if actions["pause"].Enabled == w.r.Spec.Paused || actions["resume"].Enabled != w.r.Spec.Paused {
				t.Errorf("paused %v, controls %+v", w.r.Spec.Paused, m.Controls)
			}
			if _, err := encodeSnapshot(&Snapshot{Services: []ServiceModel{m}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func hasEntry(tl []TimelineEntry, object, text string, at time.Time) bool {
	for _, e := range tl {
		if e.Object == object && strings.Contains(e.Text, text) && e.Time.Equal(at.UTC()) {
			return true
		}
	}
	return false
}

// The checks' measurements become points, a failed one at its value, and the prometheus
// condition `result < 1.0` a threshold; a measurement without a number is null in JSON.
func TestDashboardCheckPlots(t *testing.T) {
	w := goldenWorld(t, "shard-check-failed")
	plots := buildService(w.u, w.r, w.objs, nil, nil, w.now).Checks
	var eu *CheckPlot
	for i := range plots {
		if plots[i].Shard == "eu-west" && plots[i].Check == "smoke" {
			eu = &plots[i]
		}
	}
	if eu == nil || len(eu.Points) == 0 || eu.Points[len(eu.Points)-1].Phase != "Failed" || eu.Phase != "Failed" {
		t.Fatalf("eu-west smoke: %+v", plots)
	}
	if last := eu.Points[len(eu.Points)-1]; float64(last.Value) != 503 {
		t.Errorf("last value %v, want 503", last.Value)
	}

	w = goldenWorld(t, "shard-check-inconclusive")
	m := buildService(w.u, w.r, w.objs, nil, nil, w.now)
	if len(m.Checks) == 0 || len(m.Checks[0].Thresholds) != 1 {
		t.Fatalf("checks %+v", m.Checks)
	}
	th := m.Checks[0].Thresholds[0]
	if th.Kind != "success" || th.Op != "<" || float64(th.Value) != 1 {
		t.Errorf("threshold %+v", th)
	}
	b, err := json.Marshal(m.Checks[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"phase":"Inconclusive","value":null`) {
		t.Errorf("an inconclusive measurement without a value is not null: %s", b)
	}
}

// NaN and the infinities never reach encoding/json (which refuses them): they are null.
func TestDashboardNaN(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		b, err := json.Marshal(struct{ V jsonNumber }{jsonNumber(v)})
		if err != nil || string(b) != `{"V":null}` {
			t.Errorf("%v: %s %v", v, b, err)
		}
	}
	if b, _ := json.Marshal(jsonNumber(0.25)); string(b) != "0.25" {
		t.Errorf("0.25 encodes as %s", b)
	}
	w := goldenWorld(t, "shard-check-inconclusive")
	ms := w.u.Object["status"].(map[string]any)["shards"].([]any)[0].(map[string]any)["checks"].([]any)[0].(map[string]any)
	ms["measurements"] = []any{
		map[string]any{"time": "2026-12-01T00:09:18Z", "phase": "Inconclusive", "value": "NaN"},
		map[string]any{"time": "2026-12-01T00:09:19Z", "phase": "Failed", "value": "+Inf"},
		map[string]any{"time": "2026-12-01T00:09:20Z", "phase": "Successful", "value": "0.5"},
	}
	r, err := toTyped(w.u)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeSnapshot(&Snapshot{Services: []ServiceModel{buildService(w.u, r, w.objs, nil, nil, w.now)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"value":null,"raw":"NaN"`, `"value":null,"raw":"+Inf"`, `"value":0.5,"raw":"0.5"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("snapshot lacks %s", want)
		}
	}
}

// Every string from the cluster is cut to 1 KiB, on a rune boundary.
func TestDashboardCutsMessages(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes
	cut := cutMessage(long)
	if len(cut) > maxMessage || !utf8.ValidString(cut) || !strings.HasSuffix(cut, "…") {
		t.Errorf("cut: %d bytes, valid %v", len(cut), utf8.ValidString(cut))
	}
	if cutMessage("short") != "short" {
		t.Error("a short message was changed")
	}

	w := goldenWorld(t, "migration-failed")
	conds := w.u.Object["status"].(map[string]any)["conditions"].([]any)
	for _, c := range conds {
		c.(map[string]any)["message"] = long
	}
	r, err := toTyped(w.u)
	if err != nil {
		t.Fatal(err)
	}
	ev := corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: w.r.Namespace}, Reason: "MigrationFailed", Message: long, Type: "Warning",
		LastTimestamp: metav1.NewTime(w.now), InvolvedObject: corev1.ObjectReference{Kind: "RoutingService", Name: w.r.Name, Namespace: w.r.Namespace}}
	m := buildService(w.u, r, w.objs, []corev1.Event{ev}, nil, w.now)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var longest int
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case string:
			// The plan is the plugin's own text, bounded apart.
			if len(x) > longest && !strings.Contains(x, "Revision") {
				longest = len(x)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	var doc any
	_ = json.Unmarshal(b, &doc)
	walk(doc)
	if longest > maxMessage {
		t.Errorf("a string of %d bytes reached the snapshot", longest)
	}
	if m.View.Message == long || len(m.Events) != 1 || len(m.Events[0].Message) > maxMessage {
		t.Errorf("the status message or the Event message was not cut")
	}
}

func TestLoopbackAddress(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"127.1.2.3", "127.1.2.3"},
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"0.0.0.0", ""},
		{"::", ""},
		{"10.0.0.1", ""},
		{"192.168.1.10", ""},
		{"localhost", ""},
		{"::ffff:127.0.0.1", ""},
		{"", ""},
	} {
		ip, err := loopbackAddress(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q accepted as %s", tc.in, ip)
		case tc.want != "" && (err != nil || ip.String() != tc.want):
			t.Errorf("%q: %v %v, want %s", tc.in, ip, err, tc.want)
		}
	}
	res := runWith(fakeClients(Objects{}), someTime, "dashboard", "--address", "0.0.0.0")
	if res.code != 1 || !strings.Contains(res.err, "not a loopback address") {
		t.Errorf("dashboard --address 0.0.0.0: %+v", res)
	}
}

// testApp is the plugin's app with the clock at now, writing nowhere.
func testApp(cl *clients, now time.Time) *app {
	streams := genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: io.Discard, ErrOut: io.Discard}
	a := newApp(genericclioptions.NewConfigFlags(false), streams)
	a.now = func() time.Time { return now }
	a.connect = func() (*clients, error) { return cl, nil }
	return a
}

const testHost = "127.0.0.1:8111"

func testServer(t *testing.T, cl *clients, readOnly bool) *dashServer {
	t.Helper()
	d, err := newDashServer(testHost, "", readOnly, newBroker(), testApp(cl, someTime).dashboardControl(cl))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// request sends a request to d; with auth, it carries the key in its header; with page, the
// Origin the page sends.
func request(d *dashServer, method, path, body string, auth, page bool, edit func(*http.Request)) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "http://"+testHost+path, strings.NewReader(body))
	if auth {
		r.Header.Set(keyHeader, d.key)
	}
	if page {
		r.Header.Set("Origin", "http://"+testHost)
		r.Header.Set("Content-Type", "application/json")
	}
	if edit != nil {
		edit(r)
	}
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, r)
	return rec
}

func patches(cl *clients) []k8stesting.PatchActionImpl {
	var out []k8stesting.PatchActionImpl
	for _, a := range cl.dyn.(*fakedynamic.FakeDynamicClient).Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok {
			out = append(out, p)
		}
	}
	return out
}

// The key travels in the URL's fragment (never sent) and then in a header, never in a cookie:
// the page, its script and its style hold no secret and are served without it; the stream, the
// snapshot and the controls are not. The page carries the security headers.
func TestDashboardKeyAndPage(t *testing.T) {
	d := testServer(t, fakeClients(Objects{}, in(t, "progressing", "ns")), false)
	if d.URL() != "http://"+testHost+"/#key="+d.key || len(d.key) != 43 {
		t.Fatalf("URL %s", d.URL())
	}
	for _, path := range []string{"/events", "/api/snapshot", "/api/control"} {
		for name, edit := range map[string]func(*http.Request){
			"no key":                nil,
			"a wrong key":           func(r *http.Request) { r.Header.Set(keyHeader, "x"+d.key[1:]) },
			"the key in the query":  func(r *http.Request) { r.URL.RawQuery = "key=" + d.key },
			"the key in a cookie":   func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "schemagate-dashboard", Value: d.key}) },
			"the key, in lowercase": func(r *http.Request) { r.Header.Set(keyHeader, strings.ToLower(d.key)) },
		} {
			if rec := request(d, "GET", path, "", false, false, edit); rec.Code != http.StatusUnauthorized {
				t.Errorf("GET %s with %s: %d", path, name, rec.Code)
			}
		}
	}
	if rec := request(d, "GET", "/api/snapshot", "", true, false, nil); rec.Code != 200 {
		t.Errorf("GET /api/snapshot with the key: %d", rec.Code)
	}
	rec := request(d, "GET", "/", "", false, false, nil)
	if rec.Code != 200 || strings.Contains(rec.Body.String(), d.key) || !strings.Contains(rec.Body.String(), `content="false"`) ||
		len(rec.Result().Cookies()) != 0 {
		t.Fatalf("page: %d %v\n%s", rec.Code, rec.Result().Cookies(), rec.Body)
	}
	h := rec.Header()
	if !strings.HasPrefix(h.Get("Content-Security-Policy"), "default-src 'self'") || h.Get("X-Frame-Options") != "DENY" ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v", h)
	}
	for path, typ := range map[string]string{"/app.js": "text/javascript", "/app.css": "text/css"} {
		if rec := request(d, "GET", path, "", false, false, nil); rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), typ) {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	// The header is the defence against other sites: a preflight asking to send it is never granted.
	for _, path := range []string{"/api/control", "/events", "/"} {
		rec := request(d, "OPTIONS", path, "", false, false, func(r *http.Request) {
			r.Header.Set("Origin", "http://evil.example")
			r.Header.Set("Access-Control-Request-Method", "POST")
			r.Header.Set("Access-Control-Request-Headers", keyHeader)
		})
		for k := range rec.Header() {
			if strings.HasPrefix(k, "Access-Control-") {
				t.Errorf("OPTIONS %s answers %s", path, k)
			}
		}
		if rec.Code < 400 {
			t.Errorf("OPTIONS %s: %d", path, rec.Code)
		}
	}
	if rec := request(d, "HEAD", "/events", "", true, false, nil); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("HEAD /events: %d", rec.Code)
	}
	if rec := request(d, "GET", "/", "", true, false, func(r *http.Request) { r.Host = "evil.example:8111" }); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("wrong Host: %d", rec.Code)
	}
	if rec := request(d, "GET", "/", "", true, false, func(r *http.Request) { r.Host = "localhost:8111" }); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("Host localhost: %d", rec.Code)
	}
}

// Every refusal of the control endpoint, and that none of them patched anything.
func TestDashboardControlRefusals(t *testing.T) {
	cl := fakeClients(Objects{}, in(t, "progressing", "ns"))
	d := testServer(t, cl, false)
	body := `{"namespace":"ns","name":"rs-a","action":"pause"}`
	for _, tc := range []struct {
		name   string
		method string
		body   string
		auth   bool
		page   bool
		edit   func(*http.Request)
		code   int
	}{
		{"no key", "POST", body, false, true, nil, http.StatusUnauthorized},
		{"wrong key", "POST", body, false, true, func(r *http.Request) { r.Header.Set(keyHeader, newSecret()) }, http.StatusUnauthorized},
		{"GET", "GET", "", true, true, nil, http.StatusMethodNotAllowed},
		{"no Origin", "POST", body, true, true, func(r *http.Request) { r.Header.Del("Origin") }, http.StatusForbidden},
		{"other Origin", "POST", body, true, true, func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"wrong Host", "POST", body, true, true, func(r *http.Request) { r.Host = "evil.example" }, http.StatusMisdirectedRequest},
		{"unknown action", "POST", `{"namespace":"ns","name":"rs-a","action":"delete"}`, true, true, nil, http.StatusBadRequest},
		{"unknown field", "POST", `{"namespace":"ns","name":"rs-a","action":"pause","x":1}`, true, true, nil, http.StatusBadRequest},
		{"no name", "POST", `{"namespace":"ns","action":"pause"}`, true, true, nil, http.StatusBadRequest},
		{"not found", "POST", `{"namespace":"ns","name":"nope","action":"pause"}`, true, true, nil, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := request(d, tc.method, "/api/control", tc.body, tc.auth, tc.page, tc.edit)
			if rec.Code != tc.code {
				t.Errorf("%d, want %d: %s", rec.Code, tc.code, rec.Body)
			}
		})
	}
	ro := testServer(t, cl, true)
	if rec := request(ro, "POST", "/api/control", body, true, true, nil); rec.Code != http.StatusForbidden {
		t.Errorf("read-only: %d", rec.Code)
	}
	if rec := request(ro, "GET", "/", "", true, false, nil); !strings.Contains(rec.Body.String(), `name="schemagate-read-only" content="true"`) {
		t.Errorf("read-only page does not say so")
	}
	nsOnly, err := newDashServer(testHost, "other", false, newBroker(), testApp(cl, someTime).dashboardControl(cl))
	if err != nil {
		t.Fatal(err)
	}
	if rec := request(nsOnly, "POST", "/api/control", body, true, true, nil); rec.Code != http.StatusForbidden {
		t.Errorf("outside the namespace: %d", rec.Code)
	}
	if p := patches(cl); len(p) != 0 {
		t.Errorf("a refused control patched: %+v", p)
	}
	if get(t, cl, "ns").Spec.Paused {
		t.Error("a refused control paused the RoutingService")
	}
}

// A control from the page patches the RoutingService exactly as the command does: the same
// patch type and body, the same field manager, an annotation value of the same form, and the
// same text.
func TestDashboardControlPatchesAsTheCLI(t *testing.T) {
	token := regexp.MustCompile(`20261130T070000Z-[b-z2-9]{5}`)
	for _, action := range []string{"pause", "promote", "abort", "retry"} {
		t.Run(action, func(t *testing.T) {
			state := "shard-check-inconclusive"
			cliCl := fakeClients(Objects{}, in(t, state, "ns"))
			res := runWith(cliCl, someTime, action, "rs-a", "-n", "ns")
			if res.code != 0 {
				t.Fatalf("cli: %+v", res)
			}
			webCl := fakeClients(Objects{}, in(t, state, "ns"))
			d := testServer(t, webCl, false)
			rec := request(d, "POST", "/api/control", `{"namespace":"ns","name":"rs-a","action":"`+action+`"}`, true, true, nil)
			if rec.Code != 200 {
				t.Fatalf("dashboard: %d %s", rec.Code, rec.Body)
			}
			var resp controlResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			cliP, webP := patches(cliCl), patches(webCl)
			if len(cliP) != 1 || len(webP) != 1 {
				t.Fatalf("patches: cli %d, dashboard %d", len(cliP), len(webP))
			}
			c, w := cliP[0], webP[0]
			if c.PatchType != w.PatchType || c.PatchOptions.FieldManager != fieldManager || w.PatchOptions.FieldManager != fieldManager ||
				c.Namespace != w.Namespace || c.Name != w.Name {
				t.Errorf("cli %s %+v, dashboard %s %+v", c.PatchType, c.PatchOptions, w.PatchType, w.PatchOptions)
			}
			norm := func(b []byte) string { return token.ReplaceAllString(string(b), "TOKEN") }
			if norm(c.Patch) != norm(w.Patch) {
				t.Errorf("patch: cli %s, dashboard %s", c.Patch, w.Patch)
			}
			if action != "pause" && !token.Match(w.Patch) {
				t.Errorf("annotation value not of the CLI's form: %s", w.Patch)
			}
			if token.ReplaceAllString(resp.Output, "TOKEN") != token.ReplaceAllString(res.out, "TOKEN") {
				t.Errorf("output: dashboard %q, cli %q", resp.Output, res.out)
			}
		})
	}
}

// The confirmation names the GitOps tool with the same warning the command prints.
func TestDashboardGitOpsWarning(t *testing.T) {
	flux := in(t, "progressing", "ns")
	flux.SetLabels(map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps"})
	res := runWith(fakeClients(Objects{}, flux), someTime, "pause", "rs-a", "-n", "ns")
	r, err := toTyped(flux)
	if err != nil {
		t.Fatal(err)
	}
	m := buildService(flux, r, Objects{}, nil, nil, someTime)
	var pause ControlModel
	for _, c := range m.Controls {
		if c.Action == "pause" {
			pause = c
		}
	}
	if pause.Warning == "" || res.err != "warning: "+pause.Warning+"\n" {
		t.Errorf("dashboard warning %q, cli stderr %q", pause.Warning, res.err)
	}
	if len(m.GitOps) != 1 || !strings.HasPrefix(m.GitOps[0], "Flux (label kustomize.toolkit.fluxcd.io/name=apps)") {
		t.Errorf("gitops %v", m.GitOps)
	}
	cl := fakeClients(Objects{}, flux)
	rec := request(testServer(t, cl, false), "POST", "/api/control", `{"namespace":"ns","name":"rs-a","action":"pause"}`, true, true, nil)
	var resp controlResponse
	_ = json.Unmarshal(rec.Body.Bytes(), &resp)
	if rec.Code != 200 || resp.Warning != pause.Warning {
		t.Errorf("control answer %d %+v", rec.Code, resp)
	}
}

// A reader that does not read while snapshots come gets the newest one when it reads again:
// one mailbox, never a queue.
func TestBrokerSlowReader(t *testing.T) {
	b := newBroker()
	b.publish([]byte("0"))
	ch, cancel := b.subscribe()
	defer cancel()
	if got := string(<-ch); got != "0" {
		t.Fatalf("first %q", got)
	}
	for i := 1; i <= 100; i++ {
		b.publish([]byte(strings.Repeat("x", i)))
	}
	if got := <-ch; len(got) != 100 {
		t.Errorf("after 100 snapshots the slow reader got #%d", len(got))
	}
	select {
	case got := <-ch:
		t.Errorf("a second snapshot was queued: #%d", len(got))
	default:
	}
}

// serveTest serves d on a loopback listener.
func serveTest(t *testing.T, d *dashServer) (*http.Client, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.host = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveUntil(ctx, ln, d) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &http.Client{Timeout: 10 * time.Second}, "http://" + d.host
}

// openStream opens /events with the key and returns a reader of its data fields.
func openStream(t *testing.T, base string, d *dashServer) (*http.Response, func() string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/events", nil)
	req.Header.Set(keyHeader, d.key)
	resp, err := (&http.Client{}).Do(req) // a stream outlives any client timeout
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	return resp, func() string {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return "" // the stream ended; the caller finds no snapshot in it
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				return strings.TrimSuffix(data, "\n")
			}
		}
	}
}

// The feed watches a cluster and pushes a snapshot after a change, over server-sent events;
// the streams are capped.
func TestDashboardFeed(t *testing.T) {
	w := goldenWorld(t, "progressing")
	ev := corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "rs-a.1", Namespace: w.r.Namespace}, Reason: "MigrationStarted", Message: "started",
		Type: "Normal", LastTimestamp: metav1.NewTime(mustTime("2026-11-30T06:51:55Z")),
		InvolvedObject: corev1.ObjectReference{Kind: "RoutingService", Name: "rs-a", Namespace: w.r.Namespace}}
	cl := w.clients()
	if _, err := cl.kube.CoreV1().Events(w.r.Namespace).Create(context.Background(), &ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFeed(cl, w.r.Namespace, func() time.Time { return w.now }, false)
	f.delay = 20 * time.Millisecond
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	go f.run(ctx)
	d, err := newDashServer("", w.r.Namespace, false, f.broker, testApp(cl, w.now).dashboardControl(cl))
	if err != nil {
		t.Fatal(err)
	}
	d.maxStreams = 1
	c, base := serveTest(t, d)
	resp, next := openStream(t, base, d)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	var s Snapshot
	if err := json.Unmarshal([]byte(next()), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Services) != 1 || s.Services[0].View.State != StateProgressing || len(s.Services[0].Events) != 1 ||
		!hasEntry(s.Services[0].Timeline, "Event", "MigrationStarted: started", ev.LastTimestamp.Time) {
		t.Fatalf("first snapshot: %+v", s)
	}
	if got := len(s.Services[0].View.Shards[0].RSs); got != 2 {
		t.Errorf("us-east has %d ReplicaSets in the snapshot", got)
	}

	// A second tab over the cap is refused.
	req, _ := http.NewRequest("GET", base+"/events", nil)
	req.Header.Set(keyHeader, d.key)
	if r2, err := c.Do(req); err != nil || r2.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream over the cap: %v %v", r2, err)
	} else {
		r2.Body.Close()
	}

	// A pause through the page reaches the tab as a new snapshot.
	body := `{"namespace":"` + w.r.Namespace + `","name":"rs-a","action":"pause"}`
	req, _ = http.NewRequest("POST", base+"/api/control", strings.NewReader(body))
	req.Header.Set(keyHeader, d.key)
	req.Header.Set("Origin", base)
	pr, err := c.Do(req)
	if err != nil || pr.StatusCode != 200 {
		t.Fatalf("pause: %v %v", pr, err)
	}
	pr.Body.Close()
	deadline := time.After(5 * time.Second)
	for {
		got := make(chan string, 1)
		go func() { got <- next() }()
		select {
		case data := <-got:
			var s Snapshot
			if err := json.Unmarshal([]byte(data), &s); err != nil {
				t.Fatalf("%v: %q", err, data)
			}
			if len(s.Services) == 1 && s.Services[0].View.Paused {
				return
			}
		case <-deadline:
			t.Fatal("no snapshot with the RoutingService paused")
		}
	}
}

// A GitOps annotation or field manager name with newlines or a bidirectional override cannot add
// lines to a control's confirmation nor reorder it: they reach the page as escapes.
func TestDashboardConfirmTextOneLine(t *testing.T) {
	u := in(t, "progressing", "ns")
	u.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": "apps:x\n\nOK: Git does not manage this field.\r\u202e\u2028"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "argocd-controller\n\nfine", Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:paused":{}}}`)}})
	r, err := toTyped(u)
	if err != nil {
		t.Fatal(err)
	}
	m := buildService(u, r, Objects{}, nil, nil, someTime)
	bad := func(s string) bool {
		return strings.IndexFunc(s, func(r rune) bool {
			return r == '\n' || r == '\r' || r == '\u202e' || r == '\u2028'
		}) >= 0
	}
	texts := append([]string(nil), m.GitOps...)
	for _, c := range m.Controls {
		if c.Action == "pause" && c.Warning == "" {
			t.Errorf("%s: no warning", c.Action)
		}
		texts = append(texts, c.Warning)
	}
	for _, s := range texts {
		if bad(s) {
			t.Errorf("a control character reached the page: %q", s)
		}
	}
	all := strings.Join(texts, " | ")
	for _, want := range []string{`apps:x\n\nOK`, `\r\u202e\u2028`, `argocd-controller\n\nfine`} {
		if !strings.Contains(all, want) {
			t.Errorf("%s is not in %q", want, all)
		}
	}
}

// The plan is bounded apart (64 KiB), not cut like a message from the cluster.
func TestDashboardPlanNotCut(t *testing.T) {
	w := goldenWorld(t, "migrating")
	m := buildService(w.u, w.r, w.objs, nil, nil, w.now)
	full := livePlan(w.r, w.objs.ReplicaSets).Text
	if len(full) <= maxMessage {
		t.Fatalf("the plan of migrating has %d bytes: pick a longer one", len(full))
	}
	if m.Plan.Text != full {
		t.Errorf("the dashboard's plan has %d bytes of %d:\n%s", len(m.Plan.Text), len(full), m.Plan.Text)
	}
}

// A RoutingService whose model does not encode (a status time past year 9999, which encoding/json
// refuses) is left out of the snapshot with a note; the others are shown.
func TestDashboardOddObjectLeftOut(t *testing.T) {
	w := goldenWorld(t, "progressing")
	odd := w.u.DeepCopy()
	odd.SetName("rs-odd")
	for _, s := range odd.Object["status"].(map[string]any)["shards"].([]any) {
		s.(map[string]any)["stepStartTime"] = "9999-12-31T23:59:59Z"
	}
	cl := w.clients(odd)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFeed(cl, w.r.Namespace, func() time.Time { return w.now }, false)
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	f.publish()
	var s Snapshot
	if err := json.Unmarshal(f.broker.last(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Services) != 1 || s.Services[0].View.Name != "rs-a" || len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "rs-odd") {
		t.Errorf("services %d, notes %q", len(s.Services), s.Notes)
	}
}

// Issue 42 item 16: a condition's timeline entry is dated at its lastTransitionTime, which moves
// only when the status changes; its text says the status it became then and its reason now, not
// the reason as if it had been given at that time.
func TestTimelineConditionEntrySaysTheReasonIsCurrent(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	r := &routingv1alpha1.RoutingService{Status: routingv1alpha1.RoutingServiceStatus{Conditions: []metav1.Condition{
		{Type: routingv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: routingv1alpha1.ReasonWaitingForMigration, LastTransitionTime: then},
	}}}
	var got []string
	for _, e := range timeline(r, Objects{}, nil, nil) {
		if e.Kind == "condition" {
			got = append(got, e.Time.Format(time.RFC3339)+" "+e.Text)
		}
	}
	want := []string{"2026-12-01T10:00:00Z Ready became False (reason now " + routingv1alpha1.ReasonWaitingForMigration + ")"}
	if !slices.Equal(got, want) {
		t.Errorf("condition entries %q, want %q", got, want)
	}
}
