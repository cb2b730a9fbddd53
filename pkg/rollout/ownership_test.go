package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Deleted with --cascade=orphan and applied again: the earlier migration Job is adopted as
// history (an owner reference that is not a controller reference), never as evidence; a Job whose
// name its labels do not give, or that another object controls, is left alone.
func TestOrphanedJobsAreAdoptedAsHistoryOnly(t *testing.T) {
	w := steady(t)
	w.rsvc.UID = "uid-rs-a-2"
	w.rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
	for _, rs := range w.rss {
		rs.OwnerReferences = nil
	}
	var migration string
	for name, j := range w.jobs {
		j.OwnerReferences = nil
		migration = name
	}
	stray := w.jobs[migration].DeepCopy()
	stray.Name, stray.UID = "rs-a-schema-planted-1", "uid-planted"
	w.jobs[stray.Name] = stray
	foreign := w.jobs[migration].DeepCopy()
	foreign.Name, foreign.UID = MigrationJobName("rs-a", "1", 7), "uid-foreign"
	foreign.Labels = map[string]string{}
	for k, v := range w.jobs[migration].Labels {
		foreign.Labels[k] = v
	}
	foreign.Labels[LabelAttempt] = "7"
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "other", UID: "uid-other", Controller: ptr.To(true)}}
	w.jobs[foreign.Name] = foreign

	plan := w.step(time.Second)
	var adopted []string
	for _, a := range plan.Actions {
		if a.Kind == AdoptJob {
			adopted = append(adopted, a.Job.Name)
		}
	}
	if len(adopted) != 1 || adopted[0] != migration {
		t.Fatalf("adopted %v, want only the orphaned migration Job %s", adopted, migration)
	}
	j := w.jobs[migration]
	if !ownedBy(j, w.rsvc) || metav1.IsControlledBy(j, w.rsvc) {
		t.Fatalf("the adopted Job must be owned, not controlled: %+v", j.OwnerReferences)
	}
	if !w.sawEvent(EventJobAdopted) {
		t.Fatal("no JobAdopted Event")
	}
	if c := w.condition(routingv1alpha1.ConditionStalled); c.Reason != routingv1alpha1.ReasonSchemaEvidenceLost {
		t.Fatalf("an adopted Job is never evidence: Stalled = %+v", c)
	}
	if plan := w.step(time.Second); len(plan.Actions) != 0 {
		for _, a := range plan.Actions {
			if a.Kind == AdoptJob {
				t.Fatalf("adopted twice: %v", a)
			}
		}
	}
}
