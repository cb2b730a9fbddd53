// Package checkspec finds, without any network, what in spec.strategy.checks can never be
// measured as written: a CEL condition that does not compile or does not yield a bool, an
// address or URL that is not an http or https URL, a JSONPath that does not parse. The API
// server's own CEL rules cannot compile a CEL expression held in a string, so the manager (the
// planner refuses such a spec before any shard moves) and `kubectl schemagate plan` ask here.
//
// It depends on the API types only, so both pkg/rollout and pkg/measure import it; pkg/measure
// compiles the conditions it evaluates with CompileCondition, so the two never disagree.
package checkspec

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/util/jsonpath"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// CostLimit bounds one evaluation of a condition, in CEL's cost units, as the API server bounds
// its own CEL rules: a condition over one double never needs more.
const CostLimit = 10_000

// CompileCondition compiles a successCondition or failureCondition: a CEL expression over the
// double `result` that yields a bool. The error quotes CEL's complaint (with its line and
// column) or says what type the expression yields instead.
func CompileCondition(expr string) (cel.Program, error) {
	env, err := cel.NewEnv(cel.Variable("result", cel.DoubleType))
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("yields %s, not bool", ast.OutputType())
	}
	return env.Program(ast, cel.CostLimit(CostLimit))
}

// Problem is one field of a check that cannot work as written.
type Problem struct {
	// Field is the field's path, e.g. spec.strategy.checks[1].prometheus.successCondition.
	Field string
	// Message says what is wrong with it.
	Message string
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// Problems lists what in spec.strategy.checks can never be measured as written, in spec order;
// none for a spec whose checks can all run. It is deterministic and reads only spec. The
// placeholders ({{shard}}, {{revision}}, {{stableRevision}}, {{namespace}}, {{name}},
// {{schemaVersion}}, {{podName}}) are replaced by a letter, and {{podIP}} by an IPv4 address,
// before a URL is parsed: the values they stand for (DNS labels, hashes, dotted versions, pod IPs)
// never make a URL valid or invalid.
func Problems(spec *routingv1alpha1.RoutingServiceSpec) []Problem {
	var out []Problem
	for i := range spec.Strategy.Checks {
		c := &spec.Strategy.Checks[i]
		at := fmt.Sprintf("spec.strategy.checks[%d]", i)
		if p := c.Prometheus; p != nil {
			if msg := conditionProblem(p.SuccessCondition); msg != "" {
				out = append(out, Problem{at + ".prometheus.successCondition", msg})
			}
			if p.FailureCondition != "" {
				if msg := conditionProblem(p.FailureCondition); msg != "" {
					out = append(out, Problem{at + ".prometheus.failureCondition", msg})
				}
			}
			if msg := urlProblem(p.Address); msg != "" {
				out = append(out, Problem{at + ".prometheus.address", msg})
			}
		}
		if h := c.HTTP; h != nil {
			if msg := urlProblem(h.URL); msg != "" {
				out = append(out, Problem{at + ".http.url", msg})
			}
			if h.JSON != nil {
				if err := jsonpath.New("json").Parse(h.JSON.Path); err != nil {
					out = append(out, Problem{at + ".http.json.path", fmt.Sprintf("%q does not parse: %v", clip(h.JSON.Path), err)})
				}
			}
		}
	}
	return out
}

// rangeSelector finds the ranges of a PromQL query: [5m], [1h30m], and a subquery's [30m:1m]
// (its range, before the colon). A bracket inside a quoted label value would be read too; a
// warning is all that depends on it.
var rangeSelector = regexp.MustCompile(`\[([0-9]+(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)(?::[^\]]*)?\]`)

// Warnings lists what in spec.strategy.checks will likely measure nothing useful though it runs:
// a prometheus query with a range shorter than twice the scrapeIntervalSeconds its check
// declares (fewer than two samples: rate() finds no data, which is never a pass). Deterministic;
// reads only spec.
func Warnings(spec *routingv1alpha1.RoutingServiceSpec) []Problem {
	var out []Problem
	for i := range spec.Strategy.Checks {
		p := spec.Strategy.Checks[i].Prometheus
		if p == nil || p.ScrapeIntervalSeconds == nil || *p.ScrapeIntervalSeconds <= 0 {
			continue
		}
		scrape := time.Duration(*p.ScrapeIntervalSeconds) * time.Second
		for _, m := range rangeSelector.FindAllStringSubmatch(p.Query, 20) {
			d, err := model.ParseDuration(m[1])
			if err != nil || time.Duration(d) >= 2*scrape {
				continue
			}
			out = append(out, Problem{fmt.Sprintf("spec.strategy.checks[%d].prometheus.query", i),
				fmt.Sprintf("the range [%s] is shorter than twice scrapeIntervalSeconds (%ds): it holds fewer than two samples, so rate() over it finds no data; use [%s] or more",
					m[1], *p.ScrapeIntervalSeconds, model.Duration(2*scrape))})
			break
		}
	}
	return out
}

// maxCached bounds the conditions whose verdict is kept; the cache is emptied when full.
const maxCached = 256

var verdicts struct {
	mu sync.Mutex
	m  map[string]string
}

// conditionProblem says why expr cannot be a condition ("" when it can), compiling each
// expression once: the planner asks on every reconcile.
func conditionProblem(expr string) string {
	verdicts.mu.Lock()
	defer verdicts.mu.Unlock()
	if msg, ok := verdicts.m[expr]; ok {
		return msg
	}
	msg := ""
	if _, err := CompileCondition(expr); err != nil {
		msg = fmt.Sprintf("%q does not compile as a CEL condition over the double result: %v", clip(expr), oneLine(err.Error()))
	}
	if verdicts.m == nil || len(verdicts.m) >= maxCached {
		verdicts.m = map[string]string{}
	}
	verdicts.m[expr] = msg
	return msg
}

// placeholders replaces the placeholders the providers replace (pkg/measure) by a letter.
var placeholders = strings.NewReplacer("{{shard}}", "x", "{{revision}}", "x", "{{stableRevision}}", "x", "{{namespace}}", "x", "{{name}}", "x", "{{schemaVersion}}", "x", "{{podIP}}", "127.0.0.1", "{{podName}}", "x")

func urlProblem(raw string) string {
	expanded := placeholders.Replace(raw)
	u, err := url.Parse(expanded)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http or https URL with a host", clip(raw))
	}
	return ""
}

// clip bounds a quoted field value in a message to 200 bytes, on a UTF-8 boundary.
func clip(s string) string {
	if len(s) <= 200 {
		return s
	}
	return strings.ToValidUTF8(s[:197], "") + "..."
}

// oneLine joins CEL's multi-line report (the message, the source line, a caret) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
