//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// I5: kill the manager (SIGKILL) at seeded random moments during a three-shard rollout with a
// migration, start it again each time, and check that the invariants hold throughout (the checker
// watches every event) and that the rollout converges to the same end state as without kills:
// every shard on v2, exactly one migration Job per schema version (S-10), v2 stable.
// SCHEMAGATE_CHAOS_KILLS (default 20) and SCHEMAGATE_CHAOS_SEED replay or lengthen it.
func TestChaosManagerKills(t *testing.T) {
	kills := envInt("SCHEMAGATE_CHAOS_KILLS", 20)
	seed := uint64(envInt("SCHEMAGATE_CHAOS_SEED", int(time.Now().UnixNano()%1_000_000)))
	t.Logf("chaos: %d kills, seed %d (replay with SCHEMAGATE_CHAOS_SEED=%d)", kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:v2")(r)
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(5))
	})
	began := time.Now()
	midRollout := 0
	for i := 0; i < kills; i++ {
		time.Sleep(time.Duration(100+rng.IntN(900)) * time.Millisecond)
		if story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionReady) == nil || kit().HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, "")() != nil {
			midRollout++
		}
		manager.Kill()
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		if err := manager.Start(); err != nil {
			t.Fatalf("restarting the manager after kill %d: %v", i+1, err)
		}
	}
	t.Logf("%d kills in %s, %d of them before the rollout was complete; promoted shards then: %s",
		kills, time.Since(began).Round(time.Second), midRollout, kit().Get(t, ns).Status.PromotedShards)
	if midRollout < kills/2 {
		t.Errorf("only %d of %d kills landed mid-rollout; lengthen the rollout", midRollout, kills)
	}

	kit().WaitReady(t, ns, 3*time.Minute)
	story.Eventually(t, 30*time.Second, "v2 everywhere", kit().ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	perVersion := map[string]int{}
	for _, j := range kit().Jobs(t, ns) {
		perVersion[j.Labels[rollout.LabelSchemaVersion]]++
	}
	if perVersion["1"] != 1 || perVersion["2"] != 1 {
		t.Fatalf("S-10: want exactly one migration Job per schema version, got %v", perVersion)
	}
	rsvc := kit().Get(t, ns)
	if rsvc.Status.StableRevision != rsvc.Status.UpdateRevision || rsvc.Status.Schema.ConfirmedVersion != "2" {
		t.Fatalf("end state after chaos: %+v", rsvc.Status)
	}
}

// Restart and outage safety: kube-apiserver stops for 30 s (SCHEMAGATE_OUTAGE_SECONDS) in the
// middle of a rollout. Nothing serving is scaled down because of it (the checker's I2 sees every
// ReplicaSet again when its watch comes back), and the rollout completes afterwards.
func TestAPIServerOutageMidRollout(t *testing.T) {
	outage := time.Duration(envInt("SCHEMAGATE_OUTAGE_SECONDS", 30)) * time.Second
	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:v2")(r)
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(5))
		r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(300))
	})
	story.Eventually(t, 60*time.Second, "us-east promoting", func() error {
		for _, s := range kit().Get(t, ns).Status.Shards {
			if s.Name == "us-east" && (s.Step == routingv1alpha1.ShardStepProgressing || s.Step == routingv1alpha1.ShardStepBaking) {
				return nil
			}
		}
		return fmt.Errorf("us-east not promoting yet")
	})
	before := kit().Serving(t, ns)
	t.Logf("stopping kube-apiserver for %s while serving %s", outage, before)
	cluster.StopComponent("kube-apiserver")
	time.Sleep(outage)
	if err := cluster.RestartComponent(context.Background(), "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("kube-apiserver is back")
	// kwok, standing in for kubelets, backs off its own retries during the outage and takes 1–3
	// minutes to make new pods ready again; schemagate itself resumes at once.
	kit().WaitReady(t, ns, 6*time.Minute)
	t.Logf("the rollout completed %s after kube-apiserver came back", time.Since(back).Round(time.Second))
	story.Eventually(t, 30*time.Second, "v2 everywhere", kit().ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	if !manager.Running() {
		t.Fatal("the manager exited during the outage")
	}
	if c := story.Condition(kit().Get(t, ns), routingv1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Available = %+v", c)
	}
}
