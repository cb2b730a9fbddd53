//go:build bench

package bench

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// The hung-check phase: a rollout of every RoutingService in which hungCount(N) of them carry an
// http check, during a 60 s bake, against a loopback server that accepts connections and never
// answers. Each such measurement times out after hungTimeout; two in a row fail the check
// (consecutiveErrorLimit 2), so those RoutingServices roll back and stall with ShardCheckFailed,
// as docs/api.md says. The others must not notice: their wall time is compared with the
// same-schema phase, which has no checks at all.
const (
	hungTimeout = 20 * time.Second
	hungBake    = 60
)

// hungCount is how many RoutingServices of N get the hung check: 10 (issue 24's N=50 case), or
// N/5 below N=50.
func hungCount(n int) int { return min(10, max(1, n/5)) }

// blackhole is a loopback TCP server that accepts every connection and never writes a byte.
type blackhole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startBlackhole() (*blackhole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &blackhole{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	return b, nil
}

// accepted is how many connections it has taken so far.
func (b *blackhole) accepted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *blackhole) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
}

// hungCheck is the check the hung RoutingServices get.
func hungCheck(url string) routingv1alpha1.ShardCheck {
	return routingv1alpha1.ShardCheck{Name: "never-answers", HTTP: &routingv1alpha1.HTTPCheck{URL: url},
		Measurement: routingv1alpha1.Measurement{IntervalSeconds: ptr.To(int32(5)), Count: ptr.To(int32(5)),
			TimeoutSeconds: ptr.To(int32(hungTimeout.Seconds())), ConsecutiveErrorLimit: ptr.To(int32(2))}}
}

// stalledOnCheck reports whether each RoutingService of ns named in names has Stalled=True with
// reason ShardCheckFailed.
func stalledOnCheck(ctx context.Context, r client.Reader, ns string, names []string) (bool, string) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var list routingv1alpha1.RoutingServiceList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	done, example := 0, ""
	for i := range list.Items {
		rsvc := &list.Items[i]
		if !want[rsvc.Name] {
			continue
		}
		c := story.Condition(rsvc, routingv1alpha1.ConditionStalled)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason == routingv1alpha1.ReasonShardCheckFailed {
			done++
			continue
		}
		if example == "" && c != nil {
			example = fmt.Sprintf("%s: Stalled %s/%s", rsvc.Name, c.Status, c.Reason)
		}
	}
	if done < len(names) {
		return false, fmt.Sprintf("%d of %d stalled with %s (e.g. %s)", done, len(names), routingv1alpha1.ReasonShardCheckFailed, example)
	}
	return true, ""
}
