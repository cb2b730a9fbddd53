package nodeagent

import (
	"context"
	"fmt"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeObject is the Node registered for spec: Ready from the start (the pod controller is
// running before the node controller registers it), addressed 127.0.0.1, with the kubelet
// endpoint the API server reads container logs from.
func (a *Agent) nodeObject(spec NodeSpec) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname": spec.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"type": "process", NodeLabel: NodeLabelValue,
	}
	if spec.Region != "" {
		labels[RegionLabel] = spec.Region
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	for k, v := range spec.Capacity {
		capacity[k] = v
	}
	t := metav1.Now()
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels, Annotations: map[string]string{"schemagate.io/node-agent": "process"}},
		Spec:       corev1.NodeSpec{Taints: spec.Taints},
		Status: corev1.NodeStatus{
			Phase:    corev1.NodeRunning,
			Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "the schemagate node agent runs pods as local processes"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "127.0.0.0/8 is routed to lo"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: hostIP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(a.kubeletAPI.port)}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux", Architecture: runtime.GOARCH,
				KubeletVersion: "nodeagent-virtual-kubelet-v1.14.1", ContainerRuntimeVersion: "process://",
			},
		},
	}
}

// waitSchedulable waits until every Node is Ready without the node lifecycle controller's
// not-ready or unreachable taints.
func (a *Agent) waitSchedulable(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		last = nil
		for name := range a.providers {
			n, err := a.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err
				break
			}
			if !nodeSchedulable(n) {
				last = fmt.Errorf("node %s is not Ready or is tainted %v", name, n.Spec.Taints)
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("nodeagent: nodes not schedulable within 60s: %w", last)
}

func nodeSchedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == "node.kubernetes.io/not-ready" || t.Key == "node.kubernetes.io/unreachable" {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
