package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProbeImageAuto is --probe-image's default: migration probes run schemagate's own image, the one
// this manager's pod runs (it holds /schemagate-schema; docs/image.md).
const ProbeImageAuto = "auto"

// The environment a manager pod names itself with (the downward API; config/manager and the chart
// set both).
const (
	EnvPodName      = "POD_NAME"
	EnvPodNamespace = "POD_NAMESPACE"
)

// managerContainer is the manager's container in config/manager and the chart.
const managerContainer = "manager"

// ResolveProbeImage returns the image migration probes run their steps with: flag, unless it is
// ProbeImageAuto, which is the image of this manager's own container (named "manager", or the
// pod's only one), read from the Pod that getenv's POD_NAMESPACE and POD_NAME name. Outside a pod
// (either variable empty: `make run`, a manager run as a process) "auto" is "" and note says why:
// no probe runs. An error is a Pod that cannot be read or has no such container: the manager does
// not start rather than run without the probe it was deployed with.
func ResolveProbeImage(ctx context.Context, r client.Reader, flag string, getenv func(string) string) (image, note string, err error) {
	if flag != ProbeImageAuto {
		return flag, "", nil
	}
	ns, name := getenv(EnvPodNamespace), getenv(EnvPodName)
	if ns == "" || name == "" {
		return "", fmt.Sprintf("--probe-image=%s outside a pod (%s or %s is empty): no migration probe runs; set --probe-image to schemagate's image", ProbeImageAuto, EnvPodNamespace, EnvPodName), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var pod corev1.Pod
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return "", "", fmt.Errorf("--probe-image=%s reads this manager's own Pod %s/%s: %w", ProbeImageAuto, ns, name, err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == managerContainer || len(pod.Spec.Containers) == 1 {
			return c.Image, "", nil
		}
	}
	return "", "", fmt.Errorf("--probe-image=%s: Pod %s/%s has no container named %q; set --probe-image to schemagate's image", ProbeImageAuto, ns, name, managerContainer)
}
