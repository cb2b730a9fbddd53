// Package argocd tests the Argo CD health check shipped in config/argocd, with the Lua interpreter
// Argo CD embeds (github.com/yuin/gopher-lua), over RoutingServices captured from real runs of the
// integration suite (SCHEMAGATE_CAPTURE_TESTDATA=1 make test rewrites them). The folder layout is
// Argo CD's resource_customizations/<group>/<Kind>/, so it can be offered upstream as is.
package argocd

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

var dir = filepath.Join("..", "..", "config", "argocd", "resource_customizations", "routing.schemagate.io", "RoutingService")

type healthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

type testCases struct {
	Tests []struct {
		HealthStatus healthStatus `json:"healthStatus"`
		InputPath    string       `json:"inputPath"`
	} `json:"tests"`
}

func TestHealthLua(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases testCases
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases.Tests) < 8 {
		t.Fatalf("health_test.yaml has %d cases", len(cases.Tests))
	}
	for _, c := range cases.Tests {
		t.Run(c.InputPath, func(t *testing.T) {
			input, err := os.ReadFile(filepath.Join(dir, c.InputPath))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(input, &obj); err != nil {
				t.Fatal(err)
			}
			got, err := runHealth(string(script), obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != c.HealthStatus.Status || (c.HealthStatus.Message != "" && got.Message != c.HealthStatus.Message) {
				t.Fatalf("health = %+v, want %+v", got, c.HealthStatus)
			}
		})
	}
}

// Every state a RoutingService can be in without status.
func TestHealthLuaWithoutStatus(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"apiVersion": "routing.schemagate.io/v1alpha1", "kind": "RoutingService",
		"metadata": map[string]any{"name": "x", "generation": int64(1)}, "spec": map[string]any{}}
	got, err := runHealth(string(script), obj)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "Progressing" {
		t.Fatalf("an object without status must be Progressing (S-13), got %+v", got)
	}
}

// runHealth runs an Argo CD health script with obj as the global `obj`, with only the libraries
// Argo CD opens for health checks (base, table, string, math), and returns its result.
func runHealth(script string, obj map[string]any) (healthStatus, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return healthStatus{}, err
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return healthStatus{}, fmt.Errorf("the script returned %s, not a table", L.Get(-1).Type())
	}
	return healthStatus{Status: ret.RawGetString("status").String(), Message: lua.LVAsString(ret.RawGetString("message"))}, nil
}

// toLua converts decoded JSON/YAML into Lua values: objects and arrays become tables (arrays
// 1-based), as Argo CD does.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	default:
		return lua.LString(fmt.Sprint(x))
	}
}
