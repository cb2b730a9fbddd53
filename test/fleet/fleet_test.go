//go:build e2e

package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/schemagate/schemagate/test/nodeagent"
	"github.com/schemagate/schemagate/test/realstack"
)

// TestFleetSmoke starts a hub and three regions, runs a pod on one region's process Node, checks
// that the hub's kubeconfig Secret for that region grants exactly config/spoke's Role in one
// namespace, partitions the hub from the region and back, rotates and revokes the token, stops
// and starts the hub's kube-apiserver, and prints the start time and memory table.
func TestFleetSmoke(t *testing.T) {
	bin := os.Getenv("SCHEMAGATE_BIN")
	if bin == "" {
		t.Fatal("SCHEMAGATE_BIN is not set (the folder with k8s/, edge-router and schemagate-schema)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := Start(ctx, Options{BinDir: filepath.Join(bin, "k8s"), StateDir: t.TempDir(),
		Regions: []string{"us-east-1", "eu-west-1", "ap-south-1"}, Log: os.Stdout,
		RouterBinary: filepath.Join(bin, "edge-router")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	eu := f.Region("eu-west-1")

	t.Run("pod runs on the region's process node", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sidecar", Namespace: "default"},
			Spec: realstack.OnProcessNodes(corev1.Container{Name: "proxy", Image: realstack.ProxyImage})}
		pod.Spec.NodeSelector[nodeagent.RegionLabel] = eu.Name
		// Until kube-controller-manager has made the namespace's default ServiceAccount, admission
		// refuses the pod.
		eventually(t, 30*time.Second, func() error {
			_, err := eu.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
		eventually(t, 60*time.Second, func() error {
			p, err := eu.Client.CoreV1().Pods("default").Get(ctx, "sidecar", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "process-"+eu.Name {
				return fmt.Errorf("phase %s on %q", p.Status.Phase, p.Spec.NodeName)
			}
			return nil
		})
		if pid := eu.Agent.ContainerPID("default", "sidecar", "proxy"); pid == 0 {
			t.Fatal("no process for the container")
		}
	})

	const ns, hubNS, cluster = "shop", "team-a", "eu-west"
	if _, err := f.Hub.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := eu.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	creds, err := eu.SpokeCredentials(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.WriteSecret(ctx, f.Hub.Client, hubNS, cluster); err != nil {
		t.Fatal(err)
	}
	spokeClient := func(t *testing.T) kubernetes.Interface {
		t.Helper()
		s, err := f.Hub.Client.CoreV1().Secrets(hubNS).Get(ctx, KubeconfigSecretName(cluster), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[KubeconfigKey])
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != "https://"+eu.Proxy.Addr() {
			t.Fatalf("kubeconfig server %s, want the proxy %s", cfg.Host, eu.Proxy.Addr())
		}
		cfg.Timeout = 5 * time.Second
		return kubernetes.NewForConfigOrDie(cfg)
	}

	t.Run("the hub's Secret grants exactly the Role", func(t *testing.T) {
		cs := spokeClient(t)
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}}}
		zero := int32(0)
		rs.Spec.Replicas = &zero
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "routes", Namespace: ns}}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: rs.Spec.Selector}}
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: ns}, Reason: "Test", Message: "m",
			InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Namespace: ns, Name: "web"}}
		patch := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
		allowed := map[string]func() error{
			"create replicaset": func() error {
				_, err := cs.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
				return err
			},
			"get replicaset": func() error { _, err := cs.AppsV1().ReplicaSets(ns).Get(ctx, "web", metav1.GetOptions{}); return err },
			"patch replicaset": func() error {
				_, err := cs.AppsV1().ReplicaSets(ns).Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			},
			"list pods":        func() error { _, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err },
			"create configmap": func() error { _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); return err },
			"update configmap": func() error {
				c, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "routes", metav1.GetOptions{})
				if err == nil {
					c.Data = map[string]string{"a": "b"}
					_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{})
				}
				return err
			},
			"create pdb": func() error {
				_, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{})
				return err
			},
			"create event": func() error { _, err := cs.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); return err },
			"delete configmap": func() error {
				return cs.CoreV1().ConfigMaps(ns).Delete(ctx, "routes", metav1.DeleteOptions{})
			},
			"delete replicaset": func() error { return cs.AppsV1().ReplicaSets(ns).Delete(ctx, "web", metav1.DeleteOptions{}) },
		}
		// In order: later steps use what earlier ones created.
		for _, name := range []string{"create replicaset", "get replicaset", "patch replicaset", "list pods", "create configmap",
			"update configmap", "create pdb", "create event", "delete configmap", "delete replicaset"} {
			if err := allowed[name](); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		denied := map[string]func() error{
			"list secrets": func() error { _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); return err },
			"get the token secret": func() error {
				_, err := cs.CoreV1().Secrets(ns).Get(ctx, creds.TokenSecret, metav1.GetOptions{})
				return err
			},
			"list configmaps (other)": func() error { _, err := cs.CoreV1().ConfigMaps("other").List(ctx, metav1.ListOptions{}); return err },
			"create replicaset (other)": func() error {
				o := rs.DeepCopy()
				o.Namespace = "other"
				_, err := cs.AppsV1().ReplicaSets("other").Create(ctx, o, metav1.CreateOptions{})
				return err
			},
			"list nodes":       func() error { _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err },
			"list namespaces":  func() error { _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); return err },
			"list deployments": func() error { _, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); return err },
			"get pod":          func() error { _, err := cs.CoreV1().Pods(ns).Get(ctx, "x", metav1.GetOptions{}); return err },
			"create pod": func() error {
				_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				return err
			},
			"list roles":    func() error { _, err := cs.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{}); return err },
			"list services": func() error { _, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}); return err },
			"update replicaset": func() error {
				_, err := cs.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
				return err
			},
		}
		for name, call := range denied {
			if err := call(); !apierrors.IsForbidden(err) {
				t.Errorf("%s: %v, want Forbidden", name, err)
			}
		}
	})

	t.Run("cut and restore the proxy", func(t *testing.T) {
		cs := spokeClient(t)
		list := func() error { _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); return err }
		if err := list(); err != nil {
			t.Fatalf("before the cut: %v", err)
		}
		eu.Proxy.Cut()
		start := time.Now()
		if err := list(); err == nil {
			t.Fatal("a request through the cut proxy succeeded")
		} else {
			t.Logf("cut: failed in %s: %v", time.Since(start).Round(time.Millisecond), err)
		}
		if _, err := eu.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("the region itself is down while cut: %v", err)
		}
		eu.Proxy.Blackhole()
		start = time.Now()
		if err := list(); err == nil {
			t.Fatal("a request through the blackholed proxy succeeded")
		} else {
			t.Logf("blackholed: failed in %s: %v", time.Since(start).Round(time.Millisecond), err)
		}
		eu.Proxy.Restore()
		eventually(t, 10*time.Second, list)
	})

	t.Run("rotate then revoke", func(t *testing.T) {
		next, err := creds.Rotate(ctx, f.Hub.Client, hubNS, cluster)
		if err != nil {
			t.Fatal(err)
		}
		if next.Token == creds.Token {
			t.Fatal("rotation kept the token")
		}
		if err := creds.Revoke(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := spokeClient(t).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("the rotated hub Secret: %v", err)
		}
		old, err := creds.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubernetes.NewForConfigOrDie(old).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			t.Errorf("revoked token: %v, want Unauthorized", err)
		}
	})

	// Before the hub's kube-apiserver is replaced by a new process with a peak of its own.
	m := f.Measure()
	t.Run("hub kube-apiserver stops and starts", func(t *testing.T) {
		f.Hub.StopAPIServer()
		short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
		_, err := f.Hub.Client.CoreV1().Namespaces().Get(short, hubNS, metav1.GetOptions{})
		cancelShort()
		if err == nil {
			t.Fatal("the hub answered with its kube-apiserver stopped")
		}
		if err := f.Hub.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Hub.Client.CoreV1().Secrets(hubNS).Get(ctx, KubeconfigSecretName(cluster), metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	fmt.Print(m)
}

func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
