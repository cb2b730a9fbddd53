package integration

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// migrationJobNames lists the namespace's migration Jobs, sorted.
func migrationJobNames(t *testing.T, ns string) []string {
	t.Helper()
	var out []string
	for _, j := range kit.Jobs(t, ns) {
		if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration {
			out = append(out, j.Name)
		}
	}
	sort.Strings(out)
	return out
}

// With jobHistoryLimit 1, after v1 → v2 → v3 only the Job that confirms schema 3 is left: the
// older migration Jobs go once their report lag (30 s) has passed, with no event other than the
// planner's own requeue to wake it, and nothing else changes. envtest runs no garbage collector,
// so a Job deleted with propagation Foreground or Orphan would stay (with a finalizer): that the
// Jobs are gone shows the Background deletion.
func TestJobHistoryPrunesOldMigrationJobs(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Strategy.JobHistoryLimit = ptr.To(int32(1)) })
	for _, v := range []string{"2", "3"} {
		kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
			r.Spec.Template.Spec.Containers[0].Image = "app:v" + v
			r.Spec.Schema.Version = v
		})
		kit.WaitReady(t, ns, 90*time.Second)
	}
	evidence := rollout.MigrationJobName("rs-a", "3", 1)
	story.Eventually(t, 60*time.Second, "only the evidence is left", func() error {
		if got := migrationJobNames(t, ns); !slices.Equal(got, []string{evidence}) {
			return fmt.Errorf("migration Jobs %v, want [%s]", got, evidence)
		}
		return nil
	})
	story.Consistently(t, 3*time.Second, "the evidence stays and nothing else changes", func() error {
		if got := migrationJobNames(t, ns); !slices.Equal(got, []string{evidence}) {
			return fmt.Errorf("migration Jobs %v", got)
		}
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionReady, "True", routingv1alpha1.ReasonRolloutComplete)(); err != nil {
			return err
		}
		if st := kit.Get(t, ns).Status.Schema; st.ConfirmedVersion != "3" || st.ConfirmedBy != evidence {
			return fmt.Errorf("status.schema %+v", st)
		}
		return nil
	})
}
