package main

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// withContract is the healthy capture with a contract to 3 and ContractReady as given ("" for
// none).
func withContract(t *testing.T, requireApproval bool, reason string) *unstructured.Unstructured {
	t.Helper()
	r, err := toTyped(in(t, "healthy", "ns"))
	if err != nil {
		t.Fatal(err)
	}
	r.SetName("rs-a")
	r.Spec.Schema.Contract = &routingv1alpha1.ContractSpec{Version: "3", RequireApproval: requireApproval}
	if reason != "" {
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: routingv1alpha1.ConditionContractReady, Status: metav1.ConditionFalse,
			Reason: reason, Message: "every shard runs revision x", ObservedGeneration: r.Generation})
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// approve-contract sets a fresh value and says what the controller does with it.
func TestApproveContract(t *testing.T) {
	token := regexp.MustCompile(`annotated schemagate\.io/approve-contract=(20261130T070000Z-[a-z0-9]{5})\n`)
	for _, tc := range []struct {
		name string
		obj  func(t *testing.T) *unstructured.Unstructured
		says string
	}{
		{"no contract", func(t *testing.T) *unstructured.Unstructured {
			u := in(t, "healthy", "ns")
			u.SetName("rs-a")
			return u
		},
			"spec.schema.contract is not set"},
		{"no approval required", func(t *testing.T) *unstructured.Unstructured {
			return withContract(t, false, routingv1alpha1.ReasonRollbackWindow)
		},
			"requireApproval is false"},
		{"awaiting approval", func(t *testing.T) *unstructured.Unstructured {
			return withContract(t, true, routingv1alpha1.ReasonAwaitingApproval)
		}, "The controller starts the contract to schema 3 now (ContractStarted)."},
		{"in the window", func(t *testing.T) *unstructured.Unstructured {
			return withContract(t, true, routingv1alpha1.ReasonRollbackWindow)
		},
			"still waits (RollbackWindow: every shard runs revision x); the approval is kept"},
		{"already running", func(t *testing.T) *unstructured.Unstructured {
			return withContract(t, true, routingv1alpha1.ReasonContracting)
		},
			"has already started (Contracting)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := fakeClients(Objects{}, tc.obj(t))
			res := runWith(cl, someTime, "approve-contract", "rs-a", "-n", "ns")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.err)
			}
			m := token.FindStringSubmatch(res.out)
			if m == nil {
				t.Fatalf("stdout %q", res.out)
			}
			if got := get(t, cl, "ns").Annotations[routingv1alpha1.AnnotationApproveContract]; got != m[1] {
				t.Errorf("annotation = %q, want %q", got, m[1])
			}
			if !strings.Contains(res.out, tc.says) {
				t.Errorf("stdout lacks %q:\n%s", tc.says, res.out)
			}
		})
	}
}
