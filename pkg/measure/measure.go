package measure

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// MaxBody is how many bytes of an HTTP response body (an http check's, or Prometheus') are read.
const MaxBody = 1 << 20

// Taker takes measurements. The zero value is ready to use.
type Taker struct {
	// Transport sends the requests (nil: a clone of http.DefaultTransport). Tests inject one
	// only to count connections; the servers they measure are real.
	Transport http.RoundTripper
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	conditions conditionCache
	clientOnce sync.Once
	shared     *http.Client
	tlsMu      sync.Mutex
	tlsClients map[[32]byte]*http.Client
}

// Take takes one measurement. It returns within the check's timeoutSeconds (plus the time to
// compile a condition the first time it is seen). secrets reads the Secrets the check's headers
// and tls name (nil: a check that names one measures an Error).
func (t *Taker) Take(ctx context.Context, req rollout.MeasurementRequest, secrets Secrets) rollout.TakenMeasurement {
	ctx, cancel := context.WithTimeout(ctx, req.Check.Timeout())
	defer cancel()
	var r result
	switch {
	case req.Check.HTTP != nil:
		r = t.http(ctx, req.Check.HTTP, req.Vars, secrets)
	case req.Check.Prometheus != nil:
		r = t.prometheus(ctx, req.Check.Prometheus, req.Vars, secrets)
	default:
		r = fatal("the check has neither http nor prometheus")
	}
	return rollout.TakenMeasurement{MeasurementKey: req.MeasurementKey, Fatal: r.fatal, Result: routingv1alpha1.MeasurementResult{
		Time: metav1.Time{Time: t.now()}, Phase: r.phase, Value: r.value, Message: r.message,
	}}
}

// MaxConcurrent is how many measurements TakeAll takes at once (a check at PodReady asks for one
// per new pod).
const MaxConcurrent = 8

// TakeAll takes the measurements of reqs, at most MaxConcurrent at once, and returns them in
// order. secrets is shared by the concurrent measurements.
func (t *Taker) TakeAll(ctx context.Context, reqs []rollout.MeasurementRequest, secrets Secrets) []rollout.TakenMeasurement {
	out := make([]rollout.TakenMeasurement, len(reqs))
	done := make(chan struct{}, len(reqs))
	slots := make(chan struct{}, MaxConcurrent)
	for i := range reqs {
		go func() {
			slots <- struct{}{}
			out[i] = t.Take(ctx, reqs[i], secrets)
			<-slots
			done <- struct{}{}
		}()
	}
	for range reqs {
		<-done
	}
	return out
}

type result struct {
	phase          routingv1alpha1.MeasurementPhase
	value, message string
	fatal          bool
}

func fatal(format string, args ...any) result {
	return result{phase: routingv1alpha1.MeasurementError, message: fmt.Sprintf(format, args...), fatal: true}
}

func errorf(format string, args ...any) result {
	return result{phase: routingv1alpha1.MeasurementError, message: fmt.Sprintf(format, args...)}
}

// expand replaces {{shard}}, {{revision}}, {{stableRevision}}, {{namespace}}, {{name}},
// {{schemaVersion}}, and for a check at PodReady {{podIP}} and {{podName}}, in s.
func expand(s string, vars map[string]string) string {
	pairs := make([]string, 0, 2*len(vars))
	for _, k := range []string{"shard", "revision", "stableRevision", "namespace", "name", "schemaVersion", "podIP", "podName"} {
		pairs = append(pairs, "{{"+k+"}}", vars[k])
	}
	return strings.NewReplacer(pairs...).Replace(s)
}
