package rollout

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden")

// A whole rollout as a reviewer reads it: v1 → v2, whose binary needs schema 2, with a smoke
// check that fails in eu-west: the migration runs first, us-east is promoted, eu-west's check
// fails during its bake, and failurePolicy Rollback returns both shards v2 touched to v1. Every action with its note, every Event, and every change of a
// condition's status or reason, in order, at simulated time. The log is pinned in
// testdata/rollout-sequence.golden; `go test ./pkg/rollout/ -run TestRolloutSequence -update`
// writes it again, and the diff of that file is what a change does to a rollout.
func TestRolloutSequence(t *testing.T) {
	w := steady(t)
	withShardCheck(w, "smoke", "verify:fail-in-eu-west", false)
	w.update("app:v2", "2", "migrate:ok")
	var log []string
	last := map[string]string{}
	seen := 0
	for i := 0; i < 400; i++ {
		w.reconcile()
		log = append(log, w.log[seen:]...)
		seen = len(w.log)
		for _, c := range w.rsvc.Status.Conditions {
			now := fmt.Sprintf("%s %s", c.Status, c.Reason)
			if last[c.Type] != now {
				log = append(log, fmt.Sprintf("%s condition %s=%s", w.now.Format("15:04:05"), c.Type, now))
				last[c.Type] = now
			}
		}
		if w.stalledWith(routingv1alpha1.ReasonShardCheckFailed) && w.shardImages() == "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" &&
			meta.IsStatusConditionFalse(w.rsvc.Status.Conditions, routingv1alpha1.ConditionReconciling) {
			break
		}
		w.tick()
		w.now = w.now.Add(time.Second)
	}
	if got := w.shardImages(); got != "us-east=app:v1:3 eu-west=app:v1:3 ap-south=app:v1:3" {
		t.Fatalf("the rollout did not end with us-east and eu-west rolled back to v1: %s\n%s", got, strings.Join(log, "\n"))
	}
	got := strings.Join(log, "\n") + "\n"
	path := filepath.Join("testdata", "rollout-sequence.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Fatalf("the rollout's sequence differs from %s (run with -update and review the diff):\n%s", path, got)
	}
}
