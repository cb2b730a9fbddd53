//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// kstatusOf computes kstatus (what Flux and Helm 4 --wait read) on the object as the API server
// returns it, read as unstructured as those tools do (a typed round trip would drop fields such as
// a defaulted observedGeneration of 0).
func kstatusOf(t *testing.T, ns string) (status.Status, *routingv1alpha1.RoutingService) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(routingv1alpha1.GroupVersion.WithKind("RoutingService"))
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, u); err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	rsvc := &routingv1alpha1.RoutingService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rsvc); err != nil {
		t.Fatal(err)
	}
	return res.Status, rsvc
}

// TestGitOpsContract drives a RoutingService through its lifecycle on the real cluster and checks,
// on the object read back at every step, what kstatus, kubectl wait and the metrics say. It stops
// the manager for S-13, so it runs alone, before the parallel stories.
func TestGitOpsContract(t *testing.T) {
	ctx := context.Background()
	ns := kit().NewNamespace(t)

	// S-13: created while the operator is stopped.
	manager.Stop(10 * time.Second)
	if err := k8s.Create(ctx, e2eFixture(ns)); err != nil {
		t.Fatal(err)
	}
	// Before any reconcile, the CRD's status default (observedGeneration 0) makes kstatus say
	// InProgress: a RoutingService nobody has looked at yet is not Current.
	if s, rsvc := kstatusOf(t, ns); s != status.InProgressStatus {
		t.Fatalf("kstatus before the first reconcile = %s (status %+v), want InProgress", s, rsvc.Status)
	}
	if err := manager.Start(); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "the first reconcile writes Reconciling=True", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, ""))
	story.Eventually(t, 5*time.Second, "Ready=False on the first reconcile", kit().HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionFalse, ""))
	if s, _ := kstatusOf(t, ns); s != status.InProgressStatus {
		t.Fatalf("kstatus after the first reconcile = %s, want InProgress", s)
	}

	// While it rolls out, kstatus is never Current unless the generation is promoted everywhere.
	var mu sync.Mutex
	seen := map[status.Status]int{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			s, rsvc := kstatusOf(t, ns)
			mu.Lock()
			seen[s]++
			mu.Unlock()
			if s == status.CurrentStatus {
				ready := story.Condition(rsvc, routingv1alpha1.ConditionReady)
				if ready == nil || ready.Status != metav1.ConditionTrue || rsvc.Status.PromotedShards != "3/3" {
					t.Errorf("kstatus Current for generation %d that is not promoted: %+v", rsvc.Generation, rsvc.Status)
				}
			}
		}
	}()
	kit().WaitReady(t, ns, 2*time.Minute)
	if s, _ := kstatusOf(t, ns); s != status.CurrentStatus {
		t.Fatalf("kstatus of a RoutingService promoted everywhere = %s, want Current", s)
	}

	// S-12: kubectl wait right after an update returns only once v2 is promoted everywhere.
	kit().Update(t, ns, story.ToV2("app:v2", "migrate:v2"))
	began := time.Now()
	out, err := exec.Command(filepath.Join(binDir, "k8s", "kubectl"), "--kubeconfig", cluster.Kubeconfig, "-n", ns,
		"wait", "--for=condition=Ready", "--timeout=180s", "routingservice/rs-a").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl wait: %v: %s", err, out)
	}
	rsvc := kit().Get(t, ns)
	if rsvc.Status.ObservedGeneration != rsvc.Generation || rsvc.Status.PromotedShards != "3/3" || rsvc.Status.StableRevision != rsvc.Status.UpdateRevision {
		t.Fatalf("kubectl wait returned after %s before v2 was promoted: %+v", time.Since(began), rsvc.Status)
	}
	if got := kit().Serving(t, ns); got != "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3" {
		t.Fatalf("kubectl wait returned while serving %s", got)
	}
	t.Logf("kubectl wait returned %s after the update, with v2 promoted everywhere", time.Since(began).Round(time.Second))
	if s, _ := kstatusOf(t, ns); s != status.CurrentStatus {
		t.Fatalf("kstatus once v2 is promoted everywhere = %s, want Current", s)
	}

	// Failed when stalled.
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v3"
		r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
	})
	story.Eventually(t, 90*time.Second, "kstatus Failed", func() error {
		if s, _ := kstatusOf(t, ns); s != status.FailedStatus {
			return fmt.Errorf("kstatus %s", s)
		}
		return nil
	})
	// Let the sampler see the stall too before it stops (it samples every 100 ms).
	story.Eventually(t, 5*time.Second, "the sampler saw Failed", func() error {
		mu.Lock()
		defer mu.Unlock()
		if seen[status.FailedStatus] == 0 {
			return fmt.Errorf("samples %v", seen)
		}
		return nil
	})
	close(stop)
	<-done
	mu.Lock()
	// Current is checked at the two steady points above; the sampler checks that it is never
	// Current in between, and that the rollouts read InProgress and the stall Failed.
	if seen[status.InProgressStatus] == 0 || seen[status.FailedStatus] == 0 {
		t.Errorf("kstatus seen during the lifecycle: %v; want InProgress and Failed", seen)
	}
	t.Logf("kstatus samples: %v", seen)
	mu.Unlock()

	// Metrics, scraped from the manager's endpoint.
	resp, err := http.Get(metricsURL) //nolint:noctx // loopback
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`schemagate_phase_duration_seconds_count{name="rs-a",namespace="%s",phase="migration",shard=""}`, ns),
		fmt.Sprintf(`schemagate_phase_duration_seconds_count{name="rs-a",namespace="%s",phase="gate_wait",shard=""}`, ns),
		fmt.Sprintf(`schemagate_phase_duration_seconds_count{name="rs-a",namespace="%s",phase="shard_progress",shard="us-east"}`, ns),
		fmt.Sprintf(`schemagate_phase_duration_seconds_count{name="rs-a",namespace="%s",phase="shard_bake",shard="ap-south"}`, ns),
		fmt.Sprintf(`schemagate_rollouts_total{name="rs-a",namespace="%s",outcome="complete"}`, ns),
		fmt.Sprintf(`schemagate_rollouts_total{name="rs-a",namespace="%s",outcome="failed"}`, ns),
		// Served at 0 from the first reconcile, so the alerts' increase() sees a first abort.
		fmt.Sprintf(`schemagate_rollouts_total{name="rs-a",namespace="%s",outcome="aborted"} 0`, ns),
		// The series the chart's alert rules and Grafana dashboard read (docs/monitoring.md).
		fmt.Sprintf(`schemagate_stalled{name="rs-a",namespace="%s"} 1`, ns),
		fmt.Sprintf(`schemagate_shard_rollbacks_total{name="rs-a",namespace="%s",shard="ap-south"}`, ns),
		`schemagate_schema_info{confirmed=`,
		`controller_runtime_reconcile_errors_total{controller="routingservice"}`,
		`controller_runtime_reconcile_time_seconds_bucket{controller="routingservice"`,
		fmt.Sprintf(`schemagate_rollout_step{name="rs-a",namespace="%s",reason="ProgressDeadlineExceeded"} 1`, ns),
		fmt.Sprintf(`schemagate_promoted_shards{name="rs-a",namespace="%s"}`, ns),
		`controller_runtime_reconcile_total{controller="routingservice"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
