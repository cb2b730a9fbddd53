package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

//go:embed web/index.html web/app.js web/app.css
var webFiles embed.FS

// Limits of the dashboard's server.
const (
	// maxStreams bounds the open event streams (tabs): each holds a connection and a goroutine.
	maxStreams = 32
	// frameTimeout bounds the write of one snapshot to one tab: a tab that stopped reading is
	// dropped (the page reconnects when it can) instead of holding a goroutine.
	frameTimeout = 10 * time.Second
	// maxControlBody bounds a control request's body.
	maxControlBody = 4 << 10
)

// keyHeader carries the key on every request for cluster data or a control. A header, not a
// cookie: browsers send a cookie for 127.0.0.1 to every port on it, so any other local server the
// browser visited would receive the key; a page of another site cannot set this header on a
// request here without a CORS preflight, which this server never answers.
const keyHeader = "X-Schemagate-Key"

// controlFunc runs a control on ns/name: it returns what the CLI command prints on stdout and,
// apart, its GitOps warning.
type controlFunc func(ctx context.Context, ns, name, action string) (out, warning string, err error)

// dashServer serves the page, the snapshot stream and the controls to one person: the one who
// holds the key printed with the URL.
type dashServer struct {
	// host is the served address as a browser sends it in Host ("127.0.0.1:8001", "[::1]:8001").
	host string
	// key opens the dashboard: the printed URL carries it in its fragment, which the browser never
	// sends; the page keeps it in its origin's localStorage and sends it in keyHeader.
	key        string
	ns         string
	readOnly   bool
	broker     *broker
	control    controlFunc
	streams    atomic.Int32
	maxStreams int32
	page       []byte
}

// newSecret is 256 random bits, base64url without padding (43 characters).
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on the platforms Go supports
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func newDashServer(host, ns string, readOnly bool, b *broker, control controlFunc) (*dashServer, error) {
	d := &dashServer{host: host, key: newSecret(), ns: ns, readOnly: readOnly, broker: b, control: control, maxStreams: maxStreams}
	page, err := webFiles.ReadFile("web/index.html")
	if err != nil {
		return nil, err
	}
	// The page holds no secret and no cluster data: only whether controls are shown.
	ro := "false"
	if readOnly {
		ro = "true"
	}
	d.page = []byte(strings.ReplaceAll(string(page), "{{readOnly}}", ro))
	return d, nil
}

// URL is the address to open. The key is in the fragment: browsers send neither it nor a
// Referer with it, and the page moves it to localStorage and drops it from the address bar.
func (d *dashServer) URL() string {
	return "http://" + d.host + "/#key=" + d.key
}

// contentSecurityPolicy lets the page load its own script, style and stream and nothing else:
// no inline script, no framing, nothing from another origin.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

func (d *dashServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	// A page of another site that points a name it controls at 127.0.0.1 (DNS rebinding)
	// sends its own name as Host.
	if r.Host != d.host {
		http.Error(w, "this dashboard is served at "+d.host, http.StatusMisdirectedRequest)
		return
	}
	switch r.URL.Path {
	case "/events", "/api/snapshot", "/api/control":
		// Cluster data and controls: the key. The page and its script and style hold neither.
		if !equal(r.Header.Get(keyHeader), d.key) {
			http.Error(w, "missing or wrong "+keyHeader+": open the URL the dashboard printed (it carries the key)", http.StatusUnauthorized)
			return
		}
	}
	switch r.URL.Path {
	case "/":
		if d.onlyGet(w, r) {
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(d.page)
		}
	case "/app.js", "/app.css":
		if d.onlyGet(w, r) {
			b, err := webFiles.ReadFile("web" + r.URL.Path)
			if err != nil {
				http.NotFound(w, r)
				return
			}
			if strings.HasSuffix(r.URL.Path, ".js") {
				h.Set("Content-Type", "text/javascript; charset=utf-8")
			} else {
				h.Set("Content-Type", "text/css; charset=utf-8")
			}
			_, _ = w.Write(b)
		}
	case "/events":
		// GET only: a HEAD would hold a stream open with nothing to send it to.
		if r.Method != http.MethodGet {
			h.Set("Allow", "GET")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		d.serveEvents(w, r)
	case "/api/snapshot":
		if d.onlyGet(w, r) {
			h.Set("Content-Type", "application/json")
			b := d.broker.last()
			if b == nil {
				b = []byte("null")
			}
			_, _ = w.Write(b)
		}
	case "/api/control":
		d.serveControl(w, r)
	default:
		http.NotFound(w, r)
	}
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (d *dashServer) onlyGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// serveEvents streams snapshots as server-sent events: the newest at once, then each new one.
// It waits on the broker, never on a clock: a tab costs nothing while nothing changes.
func (d *dashServer) serveEvents(w http.ResponseWriter, r *http.Request) {
	if d.streams.Add(1) > d.maxStreams {
		d.streams.Add(-1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many open dashboard tabs", http.StatusServiceUnavailable)
		return
	}
	defer d.streams.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	mailbox, cancel := d.broker.subscribe()
	defer cancel()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-mailbox:
			if err := rc.SetWriteDeadline(time.Now().Add(frameTimeout)); err != nil {
				return
			}
			if _, err := io.WriteString(w, "event: snapshot\ndata: "); err != nil {
				return
			}
			if _, err := w.Write(b); err != nil {
				return
			}
			if _, err := io.WriteString(w, "\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			_ = rc.SetWriteDeadline(time.Time{})
		}
	}
}

// controlRequest is the body of POST /api/control.
type controlRequest struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    string `json:"action"`
}

// controlResponse is what the CLI command would print: Output on stdout, Warning on stderr.
type controlResponse struct {
	Output  string `json:"output,omitempty"`
	Warning string `json:"warning,omitempty"`
	Error   string `json:"error,omitempty"`
}

// serveControl runs a control: POST only, with the key (ServeHTTP) and from the page (Origin).
func (d *dashServer) serveControl(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if d.readOnly {
		replyJSON(w, http.StatusForbidden, controlResponse{Error: "the dashboard runs with --read-only: no controls"})
		return
	}
	if o := r.Header.Get("Origin"); o != "http://"+d.host {
		replyJSON(w, http.StatusForbidden, controlResponse{Error: "a control must come from the dashboard's page (Origin)"})
		return
	}
	var req controlRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		replyJSON(w, http.StatusBadRequest, controlResponse{Error: "bad request: " + err.Error()})
		return
	}
	known := false
	for _, a := range dashboardActions {
		known = known || a == req.Action
	}
	switch {
	case !known:
		replyJSON(w, http.StatusBadRequest, controlResponse{Error: "unknown action " + url.QueryEscape(req.Action)})
		return
	case req.Name == "" || req.Namespace == "":
		replyJSON(w, http.StatusBadRequest, controlResponse{Error: "namespace and name are required"})
		return
	case d.ns != "" && req.Namespace != d.ns:
		replyJSON(w, http.StatusForbidden, controlResponse{Error: "this dashboard shows namespace " + d.ns + " only"})
		return
	}
	out, warning, err := d.control(r.Context(), req.Namespace, req.Name, req.Action)
	if err != nil {
		code := http.StatusBadGateway
		var nf *notFoundError
		if errors.As(err, &nf) {
			code = http.StatusNotFound
		}
		replyJSON(w, code, controlResponse{Output: out, Warning: warning, Error: cutMessage(err.Error())})
		return
	}
	replyJSON(w, http.StatusOK, controlResponse{Output: out, Warning: warning})
}

func replyJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
