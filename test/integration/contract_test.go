package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// The contract, against a real API server: v2 (schema 2) with a contract to 3 and a rollback
// window of 8 s. The contract Job does not exist until every shard is promoted and the window has
// passed; the status, wiped inside the window (a lost or restored status), neither starts it
// early nor starts a second one; the database reports 3 and status says Complete; wiped again
// afterwards, nothing runs again.
func TestStoryContractWaitsForTheWindowThenRunsOnce(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Schema.Contract = &routingv1alpha1.ContractSpec{Version: "3", RollbackWindowSeconds: ptr.To(int32(8)),
			Migration: routingv1alpha1.MigrationSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "contract", Image: "contract:ok"}}}}}}
	})
	contractJobs := func() []string {
		var out []string
		for _, j := range kit.Jobs(t, ns) {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentContract {
				out = append(out, j.Name)
			}
		}
		return out
	}
	story.Eventually(t, 90*time.Second, "v2 everywhere, the window running", func() error {
		if jobs := contractJobs(); len(jobs) > 0 {
			t.Fatalf("contract Job %v before the window: serving %s", jobs, kit.Serving(t, ns))
		}
		return kit.HasCondition(t, ns, routingv1alpha1.ConditionContractReady, metav1.ConditionFalse, routingv1alpha1.ReasonRollbackWindow)()
	})
	if got := kit.Serving(t, ns); got != "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3" {
		t.Fatalf("serving %s in the window", got)
	}
	rsvc := kit.Get(t, ns)
	if rsvc.Status.Schema.Contract == nil || rsvc.Status.Schema.Contract.EligibleTime == nil || rsvc.Status.Schema.Phase != routingv1alpha1.SchemaPhaseRollbackWindow {
		t.Fatalf("status.schema in the window: %+v", rsvc.Status.Schema)
	}
	eligible := rsvc.Status.Schema.Contract.EligibleTime.Time

	// A lost status inside the window.
	loseStatus(t, ns)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{"example.com/restored": "yes"}
	})
	for time.Now().Before(eligible.Add(-time.Second)) {
		if jobs := contractJobs(); len(jobs) > 0 {
			t.Fatalf("contract Job %v created at %s, before the window's end %s, after the status was lost", jobs, time.Now(), eligible)
		}
		time.Sleep(200 * time.Millisecond)
	}

	story.Eventually(t, 60*time.Second, "the contract complete", kit.HasCondition(t, ns, routingv1alpha1.ConditionContractReady, metav1.ConditionTrue, routingv1alpha1.ReasonContractComplete))
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentContract && j.CreationTimestamp.Time.Before(eligible.Truncate(time.Second)) {
			t.Fatalf("contract Job %s created at %s, before the window's end %s", j.Name, j.CreationTimestamp, eligible)
		}
	}
	rsvc = kit.Get(t, ns)
	if st := rsvc.Status.Schema; st.Phase != routingv1alpha1.SchemaPhaseComplete || st.ConfirmedVersion != "3" || st.Contract == nil || st.Contract.CompletionTime == nil || fake.schema(ns) != "3" {
		t.Fatalf("after the contract: status.schema %+v, database %s", st, fake.schema(ns))
	}
	for _, reason := range []string{rollout.EventContractWindow, rollout.EventContractStarted, rollout.EventContractComplete} {
		if !slices.Contains(kit.EventsFor(t, ns), reason) {
			t.Errorf("no %s Event; got %v", reason, kit.EventsFor(t, ns))
		}
	}

	// Lost again after the contract: it does not run again, and the status comes back.
	loseStatus(t, ns)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Annotations["example.com/restored"] = "again" })
	story.Eventually(t, 30*time.Second, "complete again", kit.HasCondition(t, ns, routingv1alpha1.ConditionContractReady, metav1.ConditionTrue, routingv1alpha1.ReasonContractComplete))
	story.Consistently(t, 3*time.Second, "one contract Job", func() error {
		if jobs := contractJobs(); len(jobs) != 1 || jobs[0] != rollout.ContractJobName("rs-a", "3", 1) {
			return fmt.Errorf("contract Jobs %v", jobs)
		}
		return nil
	})
}
