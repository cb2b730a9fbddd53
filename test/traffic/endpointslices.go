package traffic

import (
	"context"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EndpointSliceBackends finds a region's ready backends in the EndpointSlices of a Service, as a
// client without kube-proxy would: services maps each region to its Service's name in namespace.
// Answers are cached for refresh (default 200 ms) and kept while the API server cannot be reached
// (see cached).
func EndpointSliceBackends(c client.Reader, namespace string, services map[string]string, refresh time.Duration) Backends {
	return cached(refresh, func(ctx context.Context, region string) ([]string, error) {
		var list discoveryv1.EndpointSliceList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: services[region]}); err != nil {
			return nil, err
		}
		return ReadyAddresses(list.Items), nil
	})
}

// PodBackends finds a region's ready backends from the pods themselves, with the rules the
// EndpointSlice controller applies (an IP, the Ready condition True, not terminating). The process-
// backed nodes give pods loopback addresses, and the API server refuses those in Endpoints and
// EndpointSlices ("may not be in the loopback range"), so on that stack this is how a client finds
// the routers. selectors maps each region to its pods' labels; port is the routers' port.
func PodBackends(c client.Reader, namespace string, selectors map[string]map[string]string, port int, refresh time.Duration) Backends {
	return cached(refresh, func(ctx context.Context, region string) ([]string, error) {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(selectors[region])); err != nil {
			return nil, err
		}
		var addrs []string
		for _, p := range list.Items {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil && podReady(&p) {
				addrs = append(addrs, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)))
			}
		}
		sort.Strings(addrs)
		return addrs, nil
	})
}

// cached wraps a lookup: answers are kept for refresh (default 200 ms), so the generator's rate
// does not become the API server's; each lookup is bounded to 1 s; and while the API server cannot
// be reached the last answer is kept and the lookup is retried once per refresh (a client keeps
// the endpoints it knows, as kube-proxy does), so an API outage is not counted as the routers'
// fault.
func cached(refresh time.Duration, lookup Backends) Backends {
	if refresh <= 0 {
		refresh = 200 * time.Millisecond
	}
	type entry struct {
		at    time.Time
		addrs []string
	}
	var mu sync.Mutex
	cache := map[string]entry{}
	return func(ctx context.Context, region string) ([]string, error) {
		mu.Lock()
		e, ok := cache[region]
		mu.Unlock()
		if ok && time.Since(e.at) < refresh {
			return e.addrs, nil
		}
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		addrs, err := lookup(lctx, region)
		if err != nil {
			if !ok {
				return nil, err
			}
			addrs = e.addrs
		}
		mu.Lock()
		cache[region] = entry{at: time.Now(), addrs: addrs}
		mu.Unlock()
		return addrs, nil
	}
}

// ReadyAddresses lists "ip:port" for every ready endpoint of the slices (the first port of each).
func ReadyAddresses(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		if len(s.Ports) == 0 || s.Ports[0].Port == nil {
			continue
		}
		port := strconv.Itoa(int(*s.Ports[0].Port))
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				out = append(out, net.JoinHostPort(a, port))
			}
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
