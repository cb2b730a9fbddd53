package preview

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// maxConditionLength bounds what is compiled: the CRD allows 512 bytes, and a manifest that skipped
// validation may hold more.
const maxConditionLength = 512

// celCostLimit is the cost limit the manager's measurements run conditions with (pkg/measure).
const celCostLimit = 10_000

// ConditionErrors compiles every CEL condition of spec's checks (prometheus.successCondition and
// failureCondition) as the manager does when it measures: over the double `result`, yielding a
// bool, with the same cost limit. The API server cannot compile them (to it they are strings), so
// a condition that does not compile would pass `kubectl apply` and fail only once a shard bakes.
// Each error names the field and CEL's complaint; none means every condition compiles.
func ConditionErrors(spec *routingv1alpha1.RoutingServiceSpec) field.ErrorList {
	var errs field.ErrorList
	checks := field.NewPath("spec", "strategy", "checks")
	for i := range spec.Strategy.Checks {
		pc := spec.Strategy.Checks[i].Prometheus
		if pc == nil {
			continue
		}
		at := checks.Index(i).Child("prometheus")
		for _, c := range []struct {
			name, expr string
			required   bool
		}{{"successCondition", pc.SuccessCondition, true}, {"failureCondition", pc.FailureCondition, false}} {
			if c.expr == "" && !c.required {
				continue
			}
			if err := compileCondition(c.expr); err != nil {
				errs = append(errs, field.Invalid(at.Child(c.name), c.expr, err.Error()))
			}
		}
	}
	return errs
}

// compileCondition compiles expr as pkg/measure does, and says why it cannot run.
func compileCondition(expr string) error {
	if len(expr) > maxConditionLength {
		return fmt.Errorf("longer than %d bytes", maxConditionLength)
	}
	env, err := cel.NewEnv(cel.Variable("result", cel.DoubleType))
	if err != nil {
		return err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return fmt.Errorf("does not compile as CEL over the double `result`: %v", iss.Err())
	}
	if ast.OutputType() != cel.BoolType {
		return fmt.Errorf("yields %s, not bool", ast.OutputType())
	}
	if _, err := env.Program(ast, cel.CostLimit(celCostLimit)); err != nil {
		return err
	}
	return nil
}
