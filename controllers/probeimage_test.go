package controllers

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestResolveProbeImage: "auto" is the image of the manager's own container, read from its Pod;
// outside a pod it runs no probe and says so; a Pod that cannot be read, or has no manager
// container among several, stops the manager; any other value is taken as it is.
func TestResolveProbeImage(t *testing.T) {
	pod := func(name string, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "schemagate-system", Name: name}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "registry.example/" + c + "@sha256:abc"})
		}
		return p
	}
	r := fake.NewClientBuilder().WithObjects(pod("two", "proxy", "manager"), pod("one", "sg"), pod("none", "proxy", "sidecar")).Build()
	env := func(name string) func(string) string {
		return func(k string) string {
			switch k {
			case EnvPodNamespace:
				return "schemagate-system"
			case EnvPodName:
				return name
			}
			return ""
		}
	}
	for _, tc := range []struct {
		flag, pod, want, note, err string
	}{
		{flag: "registry.example/sg:v1", pod: "missing", want: "registry.example/sg:v1"},
		{flag: "", pod: "two", want: ""},
		{flag: "auto", pod: "two", want: "registry.example/manager@sha256:abc"},
		{flag: "auto", pod: "one", want: "registry.example/sg@sha256:abc"},
		{flag: "auto", pod: "", note: "outside a pod"},
		{flag: "auto", pod: "none", err: `no container named "manager"`},
		{flag: "auto", pod: "missing", err: "not found"},
	} {
		got, note, err := ResolveProbeImage(context.Background(), r, tc.flag, env(tc.pod))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q in pod %q: error %v, want one saying %q", tc.flag, tc.pod, err, tc.err)
			}
		case err != nil || got != tc.want || !strings.Contains(note, tc.note) || (tc.note == "" && note != ""):
			t.Errorf("%q in pod %q: %q, note %q, error %v; want %q, note %q", tc.flag, tc.pod, got, note, err, tc.want, tc.note)
		}
	}
}
