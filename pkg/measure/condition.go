package measure

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"

	"github.com/schemagate/schemagate/pkg/checkspec"
)

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

// compile returns the compiled expr, compiling it once with checkspec.CompileCondition (the
// planner refuses a spec whose conditions do not compile with the same function). An expression
// that does not compile, or does not yield a bool, is an error naming CEL's complaint.
func (c *conditionCache) compile(expr string) (*condition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if got, ok := c.m[expr]; ok {
		return got, nil
	}
	prg, err := checkspec.CompileCondition(expr)
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
