package integration

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// verbRecorder records, as RBAC sees them, the requests the suite's manager sends: verb, API
// group, resource and subresource ("update routing.schemagate.io routingservices/status").
type verbRecorder struct {
	mu   sync.Mutex
	seen map[string]int
	info *request.RequestInfoFactory
}

var managerVerbs = &verbRecorder{seen: map[string]int{},
	info: &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}}

// wrap records every request of cfg's clients.
func (v *verbRecorder) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if ri, err := v.info.NewRequestInfo(r); err == nil && ri.IsResourceRequest {
				v.mu.Lock()
				v.seen[rule(ri.Verb, ri.APIGroup, ri.Resource, ri.Subresource)]++
				if ri.Verb == "watch" && r.URL.Query().Get("sendInitialEvents") == "true" {
					// A streaming list (client-go's WatchList): the informer's list, sent as a watch.
					v.seen[rule("list", ri.APIGroup, ri.Resource, ri.Subresource)]++
				}
				v.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func rule(verb, group, resource, sub string) string {
	if sub != "" {
		resource += "/" + sub
	}
	if group == "" {
		group = "core"
	}
	return verb + " " + group + " " + resource
}

// notSentInEnvtest are granted verbs the suite's manager cannot send here, each with where it is
// exercised: they are the only ones exempt from the check below.
var notSentInEnvtest = map[string]string{
	// envtest runs no ReplicaSet controller, so no routing pod exists to delete after a scale to 0
	// (controllers/drain.go); test/e2e exercises it on the local cluster.
	"delete core pods": "drain, e2e only",
	// Not a request: the OwnerReferencesPermissionEnforcement admission plugin checks it on every
	// owner reference with blockOwnerDeletion (test/e2e's TestInstall fails without it).
	"update routing.schemagate.io routingservices/finalizers": "admission check, e2e TestInstall",
	// The secure metrics endpoint's authentication; the suite's manager serves no metrics, the
	// metrics story's own manager does (manager_flags_test.go).
	"create authentication.k8s.io tokenreviews":        "secure metrics",
	"create authorization.k8s.io subjectaccessreviews": "secure metrics",
}

// checkVerbs compares what the suite's manager sent with config/rbac/role.yaml, which the RBAC
// markers generate, and config/rbac/namespaced_role.yaml: a granted verb it never used is privilege to take away, and a verb it used
// that is not granted fails on a real cluster. It runs only when the whole suite ran (no -run):
// only then has every story had its say.
func checkVerbs() int {
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() != "" {
		return 0
	}
	// role.yaml (the markers' ClusterRole) and namespaced_role.yaml (Secrets get and pods
	// delete, bound per namespace): together, what the manager may be granted.
	var rules []rbacv1.PolicyRule
	for _, file := range []string{"role.yaml", "namespaced_role.yaml"} {
		raw, err := os.ReadFile(filepath.Join(rootDir, "config", "rbac", file))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(raw, &role); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		rules = append(rules, role.Rules...)
	}
	granted := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					resource, sub, _ := strings.Cut(res, "/")
					granted[rule(verb, g, resource, sub)] = true
				}
			}
		}
	}
	managerVerbs.mu.Lock()
	defer managerVerbs.mu.Unlock()
	var unused, missing []string
	for g := range granted {
		if managerVerbs.seen[g] == 0 && notSentInEnvtest[g] == "" {
			unused = append(unused, g)
		}
	}
	for s := range managerVerbs.seen {
		if !granted[s] {
			missing = append(missing, s)
		}
	}
	sort.Strings(unused)
	sort.Strings(missing)
	if len(unused)+len(missing) == 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "RBAC (config/rbac/role.yaml, namespaced_role.yaml) and the requests the manager sent in the whole suite differ:\n  granted, never used: %v\n  used, not granted: %v\n", unused, missing)
	return 1
}
