package integration

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// throttlingProxy is a loopback reverse proxy in front of an API server that answers the first
// `first(r)` requests of each kind with 429 Too Many Requests and Retry-After: 1, as the API
// server's Priority and Fairness does when a priority level's queues are full, and passes every
// other request through with the admin's credentials. A kind is the method, the path and whether
// it is a watch: "POST /apis/apps/v1/namespaces/x/replicasets".
type throttlingProxy struct {
	URL   string // http://127.0.0.1:port
	first func(r *http.Request) int

	mu        sync.Mutex
	seen      map[string]int // kind → requests received
	throttled map[string]int // kind → of those, answered 429
}

// startThrottlingProxy proxies to the API server of admin until the test ends.
func startThrottlingProxy(t *testing.T, admin *rest.Config, first func(r *http.Request) int) *throttlingProxy {
	t.Helper()
	p := &throttlingProxy{first: first, seen: map[string]int{}, throttled: map[string]int{}}
	p.URL = startAdminProxy(t, admin, func(w http.ResponseWriter, r *http.Request) bool {
		if !p.throttle(r) {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too many requests, please try again later","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`)
		return true
	})
	return p
}

// startAdminProxy starts, until the test ends, a loopback reverse proxy (plain http) to the API
// server of admin: answer may answer a request itself (true); every other request goes on with
// the admin's credentials in place of any the client sent. It returns the proxy's URL.
func startAdminProxy(t *testing.T, admin *rest.Config, answer func(w http.ResponseWriter, r *http.Request) bool) string {
	t.Helper()
	target, err := url.Parse(admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer(w, r) {
			return
		}
		r.Header.Del("Authorization")
		r.Host = target.Host
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

func requestKind(r *http.Request) string {
	k := r.Method + " " + r.URL.Path
	if r.URL.Query().Get("watch") == "true" {
		k += " (watch)"
	}
	return k
}

func (p *throttlingProxy) throttle(r *http.Request) bool {
	k := requestKind(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[k]++
	if p.seen[k] <= p.first(r) {
		p.throttled[k]++
		return true
	}
	return false
}

// counts returns, per kind, the requests received and how many of them were answered 429.
func (p *throttlingProxy) counts() (seen, throttled map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen, throttled = map[string]int{}, map[string]int{}
	for k, n := range p.seen {
		seen[k] = n
	}
	for k, n := range p.throttled {
		throttled[k] = n
	}
	return seen, throttled
}

// kinds lists the keys of m in order.
func kinds(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
