package rollout

import (
	"strings"
	"testing"
	"time"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// A closed gate freezes every shard where it is. Each case rolls v2 into the second shard and
// stops there (at the end of its step: v2 3 of 3 available and one v1 pod left; or mid-step: two
// of each), then closes the gate without any failure. While the gate stays closed nothing may be
// scaled in either direction (no replica change is asked), and the check of I2 after every single
// action (world.checkActionI2) holds throughout. Once the gate opens again the rollout completes.
func TestClosedGateFreezesEveryShard(t *testing.T) {
	closers := []struct {
		name string
		// prepare sets the world up before v2 is applied; close closes the gate.
		prepare func(w *world)
		close   func(w *world)
	}{
		{name: "confirming migration Job deleted", close: func(w *world) {
			w.deleteJob(MigrationJobName("rs-a", "2", 1))
		}},
		{name: "confirming migration Job deleted, with a check", prepare: func(w *world) { withCheck(w, false) }, close: func(w *world) {
			w.deleteJob(MigrationJobName("rs-a", "2", 1))
		}},
		{name: "check.afterMigration turned on", close: func(w *world) {
			withCheck(w, true)
			w.rsvc.Generation++
		}},
		{name: "evidence JobSuccess to Report after a migration with no report", prepare: func(w *world) {
			w.rsvc.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceJobSuccess
			w.rsvc.Generation++
		}, close: func(w *world) {
			w.rsvc.Spec.Schema.Evidence = routingv1alpha1.SchemaEvidenceReport
			w.rsvc.Generation++
		}},
	}
	points := []struct {
		name   string
		v1, v2 int32
	}{{"end of step", 1, 3}, {"mid-step", 2, 2}}
	for _, c := range closers {
		for _, at := range points {
			t.Run(c.name+"/"+at.name, func(t *testing.T) {
				w := steady(t)
				if c.prepare != nil {
					c.prepare(w)
					w.run(20, func() bool { return true })
				}
				migration := "migrate:ok"
				if strings.Contains(c.name, "no report") {
					migration = "migrate:silent"
				}
				w.update("app:v2", "2", migration)
				w.untilShard("eu-west", at.v1, at.v2, 200)
				c.close(w)
				if w.rsvc.Spec.Schema.Check != nil {
					w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:hang"
				}
				frozen := w.shardImages()
				for i := 0; i < 30; i++ {
					plan := w.reconcile()
					for _, a := range plan.Actions {
						if a.Kind == ScaleReplicaSet || a.Kind == CreateReplicaSet || a.Kind == DeleteReplicaSet {
							t.Fatalf("round %d: the gate is closed (SchemaReady %s: %s) and the planner plans %v\nlog:\n%s", i,
								w.schemaReason(), w.condition(routingv1alpha1.ConditionSchemaReady).Message, a, strings.Join(w.log, "\n"))
						}
					}
					w.tick()
					w.now = w.now.Add(time.Second)
				}
				if got := w.shardImages(); got != frozen {
					t.Fatalf("shards moved while the gate was closed: %s, was %s", got, frozen)
				}
				// The gate opens again (the check answers, or a retry runs the migration again):
				// the rollout goes on.
				w.rsvc.Spec.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:ok"
				if w.rsvc.Spec.Schema.Check != nil {
					w.rsvc.Spec.Schema.Check.Template.Spec.Containers[0].Image = "check:ok"
				}
				for name, j := range w.jobs {
					if live(j) {
						w.deleteJob(name)
					}
				}
				w.rsvc.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "after-freeze"}
				w.run(300, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
				if got := w.shardImages(); got != "us-east=app:v2:3 eu-west=app:v2:3 ap-south=app:v2:3" {
					t.Fatalf("after the gate opened again: %s", got)
				}
			})
		}
	}
}

// untilShard reconciles and ticks until shard runs v1 ReplicaSet pods and v2 ones in the numbers
// given, all available.
func (w *world) untilShard(shard string, v1, v2 int32, limit int) {
	w.t.Helper()
	for i := 0; i < limit; i++ {
		w.reconcile()
		w.tick()
		w.now = w.now.Add(time.Second)
		var got1, got2 int32
		ok := true
		for _, rs := range w.rss {
			if rs.Labels[LabelShard] != shard {
				continue
			}
			if rs.Status.AvailableReplicas != *rs.Spec.Replicas {
				ok = false
			}
			switch rs.Spec.Template.Spec.Containers[0].Image {
			case "app:v1":
				got1 += *rs.Spec.Replicas
			case "app:v2":
				got2 += *rs.Spec.Replicas
			}
		}
		if ok && got1 == v1 && got2 == v2 {
			return
		}
	}
	w.t.Fatalf("shard %s never reached v1 %d, v2 %d; log:\n%s", shard, v1, v2, strings.Join(w.log, "\n"))
}
