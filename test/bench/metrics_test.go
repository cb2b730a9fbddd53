//go:build bench

package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// source is a Prometheus text endpoint: the manager's, kube-controller-manager's or
// kube-apiserver's /metrics.
type source struct {
	name string
	url  string
	hc   *http.Client
	// unreachable says why the source cannot be scraped ("" when it can).
	unreachable string
}

// scrape reads the endpoint into samples (histograms become _bucket/_sum/_count samples).
func (s *source) scrape(ctx context.Context) (model.Vector, error) {
	if s == nil || s.unreachable != "" {
		return nil, fmt.Errorf("not reachable")
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: %s %s", s.url, resp.Status, b)
	}
	dec := expfmt.SampleDecoder{
		Dec:  expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header)),
		Opts: &expfmt.DecodeOptions{Timestamp: model.Now()},
	}
	var all model.Vector
	for {
		var v model.Vector
		if err := dec.Decode(&v); err != nil {
			if err == io.EOF {
				return all, nil
			}
			return nil, fmt.Errorf("%s: %w", s.url, err)
		}
		all = append(all, v...)
	}
}

// managerSource is the manager's metrics endpoint (plain HTTP on loopback).
func managerSource(url string) *source {
	return &source{name: "manager", url: url, hc: &http.Client{Timeout: 20 * time.Second}}
}

// apiserverSource is kube-apiserver's /metrics, read with the admin kubeconfig's client certificate.
func apiserverSource(cfg *rest.Config) (*source, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &source{name: "kube-apiserver", url: cfg.Host + "/metrics", hc: hc}, nil
}

var servingSecurely = regexp.MustCompile(`Serving securely on 127\.0\.0\.1:(\d+)`)

// controllerManagerSource is kube-controller-manager's /metrics on its secure port. localcluster
// does not export the port; kube-controller-manager logs it ("Serving securely on
// 127.0.0.1:<port>"). It authenticates the admin client certificate against the cluster CA (which
// kube-apiserver publishes in kube-system/extension-apiserver-authentication) and authorizes it
// with a SubjectAccessReview (system:masters). Its serving certificate is self-signed, as the
// local cluster's own health probes accept.
func controllerManagerSource(ctx context.Context, stateDir string) *source {
	s := &source{name: "kube-controller-manager"}
	log, err := os.ReadFile(filepath.Join(stateDir, "logs", "kube-controller-manager.log"))
	if err != nil {
		s.unreachable = "no log: " + err.Error()
		return s
	}
	m := servingSecurely.FindSubmatch(log)
	if m == nil {
		s.unreachable = "its log names no secure port"
		return s
	}
	port, _ := strconv.Atoi(string(m[1]))
	cert, err := tls.LoadX509KeyPair(filepath.Join(stateDir, "pki", "admin.crt"), filepath.Join(stateDir, "pki", "admin.key"))
	if err != nil {
		s.unreachable = "admin certificate: " + err.Error()
		return s
	}
	s.url = fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	s.hc = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, //nolint:gosec // loopback, a self-signed serving certificate
	}}}
	if _, err := s.scrape(ctx); err != nil {
		s.unreachable = err.Error()
	}
	return s
}

// labelsMatch reports whether m has every label of want (a value "" matches only a missing or
// empty label).
func labelsMatch(m model.Metric, want map[string]string) bool {
	for k, v := range want {
		if string(m[model.LabelName(k)]) != v {
			return false
		}
	}
	return true
}

// sum adds the samples of metric name whose labels match want and keep (nil: every sample).
func sum(v model.Vector, name string, want map[string]string, keep func(model.Metric) bool) float64 {
	total := 0.0
	for _, s := range v {
		if string(s.Metric[model.MetricNameLabel]) != name || !labelsMatch(s.Metric, want) {
			continue
		}
		if keep != nil && !keep(s.Metric) {
			continue
		}
		total += float64(s.Value)
	}
	return total
}

// isWrite keeps rest_client_requests_total samples of writing methods.
func isWrite(m model.Metric) bool {
	switch m["method"] {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}

// failedWrite keeps writes answered with anything but 2xx (409 Conflict, 404, 422, …).
func failedWrite(m model.Metric) bool {
	return isWrite(m) && (len(m["code"]) != 3 || m["code"][0] != '2')
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// buckets sums, per upper bound, the cumulative buckets of histogram name over the series whose
// labels match want.
func buckets(v model.Vector, name string, want map[string]string) map[float64]float64 {
	out := map[float64]float64{}
	for _, s := range v {
		if string(s.Metric[model.MetricNameLabel]) != name+"_bucket" || !labelsMatch(s.Metric, want) {
			continue
		}
		le, err := strconv.ParseFloat(string(s.Metric[model.BucketLabel]), 64)
		if err != nil {
			continue
		}
		out[le] += float64(s.Value)
	}
	return out
}

// latencySummary is a request latency histogram's p50 and p99 (s, estimated inside buckets) and
// the share of requests slower than 100 ms (exact: 0.1 s is a bucket bound of
// apiserver_request_duration_seconds), with the number of requests.
type latencySummary struct {
	p50, p99, over100ms, count float64
}

// summarize reads a latencySummary from cumulative buckets (NaNs when there are none).
func summarize(bs []bucket) latencySummary {
	s := latencySummary{p50: quantile(0.5, bs), p99: quantile(0.99, bs), over100ms: math.NaN()}
	if len(bs) == 0 {
		return s
	}
	s.count = bs[len(bs)-1].count
	for _, b := range bs {
		if b.le == 0.1 && s.count > 0 {
			s.over100ms = (s.count - b.count) / s.count
		}
	}
	return s
}

// String prints "p50 / p99 (share over 100 ms of count)".
func (s latencySummary) String() string {
	if s.count == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s (%.1f %% of %.0f over 100 ms)", millis(s.p50), millis(s.p99), 100*s.over100ms, s.count)
}

// bucketDelta is after − before, per upper bound, sorted by bound.
func bucketDelta(before, after map[float64]float64) []bucket {
	var out []bucket
	for le, n := range after {
		out = append(out, bucket{le: le, count: n - before[le]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// quantile estimates the q-quantile of cumulative buckets as Prometheus' histogram_quantile does:
// linear interpolation inside the bucket the rank falls into; the highest finite bound when it
// falls into +Inf. NaN without observations.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].count
	rank := q * total
	for i, b := range bs {
		if b.count < rank {
			continue
		}
		if math.IsInf(b.le, 1) {
			if i == 0 {
				return math.NaN()
			}
			return bs[i-1].le
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = bs[i-1].le, bs[i-1].count
		}
		if b.count == below {
			return b.le
		}
		return lower + (b.le-lower)*(rank-below)/(b.count-below)
	}
	return bs[len(bs)-1].le
}

// percentile is the nearest-rank q-quantile of durations (0 when there are none).
func percentile(q float64, ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}
