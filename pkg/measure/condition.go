package measure

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
)

// celCostLimit bounds one evaluation of a condition (CEL's cost units), as the API server bounds
// its CEL rules: a condition over one double cannot need more.
const celCostLimit = 10_000

// maxCachedConditions bounds the compiled conditions kept; the cache is emptied when full.
const maxCachedConditions = 256

// condition is a compiled CEL expression over the double `result` that yields a bool.
type condition struct {
	program cel.Program
}

type conditionCache struct {
	mu sync.Mutex
	m  map[string]*condition
}

// compile returns the compiled expr, compiling it once. An expression that does not compile, or
// does not yield a bool, is an error naming CEL's complaint.
func (c *conditionCache) compile(expr string) (*condition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.m[expr]; ok {
		return got, nil
	}
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
	prg, err := env.Program(ast, cel.CostLimit(celCostLimit))
	if err != nil {
		return nil, err
	}
	if c.m == nil || len(c.m) >= maxCachedConditions {
		c.m = map[string]*condition{}
	}
	cond := &condition{program: prg}
	c.m[expr] = cond
	return cond, nil
}

func (c *condition) eval(x float64) (bool, error) {
	out, _, err := c.program.Eval(map[string]any{"result": x})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("yields %T, not bool", out.Value())
	}
	return b, nil
}
