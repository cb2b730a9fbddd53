//go:build bench

package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/story"
)

// regions are the local cluster's default regions; shards maps them to the fixture's shard names.
var regions = []string{"us-east-1", "eu-west-1", "ap-south-1"}

// Images of the workloads. kwok never pulls them.
const (
	imageV1      = "bench/app:v1"
	imageV2      = "bench/app:v2"
	imageV3      = "bench/app:v3"
	imageV4      = "bench/app:v4"
	migrationV2  = "bench/migrate:v2"
	schemaBumped = "2"
)

// deployment is one of the Deployment phase's Deployments: 3 replicas on one region's kwok nodes,
// maxSurge 25%, maxUnavailable 0, minReadySeconds 0.
func deployment(ns, region string, i int) *appsv1.Deployment {
	name := fmt.Sprintf("d-%s-%03d", region, i)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			}},
			MinReadySeconds: 0,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:   []corev1.Container{{Name: "app", Image: imageV1}},
					NodeSelector: map[string]string{localcluster.RegionLabel: region},
				},
			},
		},
	}
}

// routingService is story.Fixture renamed, at bench/app:v1, with bake 0, maxSurge 25%,
// maxUnavailable 0 and deadlines long enough for a loaded cluster.
func routingService(ns string, i int) *routingv1alpha1.RoutingService {
	r := story.Fixture(ns)
	r.Name = fmt.Sprintf("rs-%03d", i)
	r.Spec.Template.Labels = map[string]string{"app": r.Name}
	r.Spec.Template.Spec.Containers[0].Image = imageV1
	r.Spec.Strategy.BakeSeconds = ptr.To(int32(0))
	r.Spec.Strategy.MaxSurge = ptr.To(intstr.FromString("25%"))
	r.Spec.Strategy.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(1800))
	return r
}

// parallel runs f for 0..n-1 on 8 workers and returns the first error.
func parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// createNamespace creates ns (fresh: a leftover of the same name is an error).
func createNamespace(ctx context.Context, c client.Client, ns string) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

// deleteNamespace deletes ns and waits until it is gone, so that the next phase starts on a quiet
// cluster.
func deleteNamespace(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return until(ctx, timeout, "namespace "+ns+" gone", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("still there (%v)", err)
	})
}

// until polls cond every 100 ms until it is true or timeout passes; the error carries cond's
// last description.
func until(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		last = why
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %s", what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deploymentsComplete reports whether every Deployment of ns (want of them) is complete at
// image: observedGeneration current, updatedReplicas = availableReplicas = replicas = 3, and no
// pod of another image left.
func deploymentsComplete(ctx context.Context, r client.Reader, ns string, want int, image string) (bool, string) {
	var list appsv1.DeploymentList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	if len(list.Items) != want {
		return false, fmt.Sprintf("%d of %d Deployments", len(list.Items), want)
	}
	pending := 0
	for _, d := range list.Items {
		s := d.Status
		if d.Spec.Template.Spec.Containers[0].Image != image || s.ObservedGeneration < d.Generation ||
			s.UpdatedReplicas != 3 || s.AvailableReplicas != 3 || s.Replicas != 3 {
			pending++
		}
	}
	if pending > 0 {
		return false, fmt.Sprintf("%d of %d Deployments not complete", pending, want)
	}
	if old := podsNotOf(ctx, r, ns, image); old > 0 {
		return false, fmt.Sprintf("%d pods of an older image left", old)
	}
	return true, ""
}

// podsNotOf counts the pods of ns that run another image than image (terminating ones included).
func podsNotOf(ctx context.Context, r client.Reader, ns, image string) int {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image != image && len(p.OwnerReferences) > 0 && p.OwnerReferences[0].Kind == "ReplicaSet" {
			n++
		}
	}
	return n
}

// routingServicesReady reports whether each RoutingService of ns named in gens has reached at
// least that generation and is Ready=True for its current generation.
func routingServicesReady(ctx context.Context, r client.Reader, ns string, gens map[string]int64) (bool, string) {
	var list routingv1alpha1.RoutingServiceList
	if err := r.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return false, err.Error()
	}
	ready := 0
	example := ""
	for _, rsvc := range list.Items {
		gen, ok := gens[rsvc.Name]
		if !ok {
			continue
		}
		c := story.Condition(&rsvc, routingv1alpha1.ConditionReady)
		if rsvc.Generation >= gen && c != nil && c.Status == metav1.ConditionTrue {
			ready++
			continue
		}
		if example == "" {
			if c != nil {
				example = fmt.Sprintf("%s: generation %d, Ready %s/%s %s", rsvc.Name, rsvc.Generation, c.Status, c.Reason, c.Message)
			} else {
				example = fmt.Sprintf("%s: generation %d, observed %d", rsvc.Name, rsvc.Generation, rsvc.Status.ObservedGeneration)
			}
		}
	}
	if ready < len(gens) {
		return false, fmt.Sprintf("%d of %d Ready (e.g. %s)", ready, len(gens), example)
	}
	return true, ""
}

// patchRoutingService applies mutate to the named RoutingService with a JSON merge patch (no
// resourceVersion: the manager's status writes cannot make it conflict) and returns the new
// generation.
func patchRoutingService(ctx context.Context, c client.Client, ns, name string, mutate func(*routingv1alpha1.RoutingService)) (int64, error) {
	rsvc := &routingv1alpha1.RoutingService{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rsvc); err != nil {
		return 0, err
	}
	patch := client.MergeFrom(rsvc.DeepCopy())
	mutate(rsvc)
	if err := c.Patch(ctx, rsvc, patch); err != nil {
		return 0, err
	}
	return rsvc.Generation, nil
}
