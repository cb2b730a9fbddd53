//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/realstack"
	"github.com/schemagate/schemagate/test/story"
)

// probedV1 is typeChangeV1 of set in a namespace and database (dbName) of its own, nothing
// declared, with the migration probe on (the node agent's ScratchImage), once Ready.
func probedV1(t *testing.T, dbName, set string) (ns, db string) {
	t.Helper()
	realStack(t)
	ns = realNamespace(t)
	db = database(t, pg, dbName, 0)
	v1 := typeChangeV1(ns, db, set, nil)
	v1.Spec.Schema.Probe = &routingv1alpha1.ProbeSpec{DatabaseImage: realstack.ScratchImage}
	if err := k8s.Create(context.Background(), v1); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 3*time.Minute)
	return ns, db
}

// TestIncidentR4ProbeNothingDeclared is R-4's naive change with no range declared anywhere and
// the migration probe on: before any migration Job, a probe Job runs the edge router's own
// golang-migrate command on a scratch PostgreSQL brought to the database's schema (a real probe
// pod: the scratch database as a sidecar, pg_dump of the real database, the migration, the
// catalog compared). It finds the upstream column's type change, narrows v1's assumed range to
// schema 1, and the migration is refused before its Job exists (BreakingChange): the database
// stays at 1 and not one request is affected.
func TestIncidentR4ProbeNothingDeclared(t *testing.T) {
	ns, db := probedV1(t, "r4probe", realstack.SetNaive)
	if p := kit().Get(t, ns).Status.Schema.Probe; p == nil || p.Verdict != "expand" {
		t.Fatalf("schema 1's probe: %+v (want expand: the routes table is new)", p)
	}
	v1 := revisionOf(t, ns, routerImage+":v1")
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	t.Cleanup(func() { gen.Stop() }) // when the test ends early; Stop again is harmless
	time.Sleep(3 * time.Second)      // measured: traffic before the change, for the table

	began := time.Now()
	kit().Update(t, ns, realstack.ToNaiveV2(db, 0, nil))
	migrationJob := func() error {
		for _, j := range kit().Jobs(t, ns) {
			if j.Labels[rollout.LabelComponent] == rollout.ComponentMigration && j.Labels[rollout.LabelSchemaVersion] == "2" {
				return fmt.Errorf("the naive migration's Job %s exists: the probe did not refuse it; status.schema.probe %+v", j.Name, kit().Get(t, ns).Status.Schema.Probe)
			}
		}
		return nil
	}
	story.Eventually(t, 2*time.Minute, "the migration is refused by its probe: Stalled BreakingChange", func() error {
		if err := migrationJob(); err != nil {
			t.Fatal(err)
		}
		r := kit().Get(t, ns)
		stalled := story.Condition(r, routingv1alpha1.ConditionStalled)
		if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != routingv1alpha1.ReasonBreakingChange || stalled.ObservedGeneration != r.Generation {
			return fmt.Errorf("Stalled %+v; probe %+v", stalled, r.Status.Schema.Probe)
		}
		return nil
	})
	r := kit().Get(t, ns)
	stalled := story.Condition(r, routingv1alpha1.ConditionStalled)
	t.Logf("refused %s after the update: Stalled=True %s: %s", time.Since(began).Round(100*time.Millisecond), stalled.Reason, stalled.Message)
	t.Logf("status.schema.probe: %+v", *r.Status.Schema.Probe)
	for _, want := range []string{"routes.upstream: text → jsonb", v1, "us-east", "eu-west", "ap-south", "allowBreakingMigration"} {
		if !strings.Contains(stalled.Message, want) {
			t.Errorf("the refusal does not say %q: %q", want, stalled.Message)
		}
	}
	story.Consistently(t, 5*time.Second, "no migration Job, v1 serves", func() error {
		if err := migrationJob(); err != nil {
			return err
		}
		return kit().ServingIs(t, ns, allOn("v1"))()
	})
	rep := gen.Stop()
	table(t, "R-4 probe, nothing declared", rep)
	if v := schemaVersion(t, db); v != 1 {
		t.Errorf("the database is at schema %d, want 1 (the probe migrated only its scratch copy)", v)
	}
	for _, reg := range realRegions {
		if tot := rep.Totals[reg.Shard]; tot.NotFound > 0 || tot.Errors() > 0 || tot.Revisions["v1"] != tot.Requests {
			t.Errorf("%s: %+v (want every request answered 200 by v1)", reg.Shard, tot)
		}
	}
}

// TestIncidentR5ProbeNothingDeclared is the same change split into an expand and a contract, with
// the probe on and nothing declared for v1: the expand's probe finds what only adds (a new
// column, filled in step by a trigger: conditional at worst, never breaking), so the migration
// runs, v2 rolls out shard by shard, and the contract follows the window. v2 declares [2, 3], the
// least a contract needs: its range must contain the contract's version. No request is lost.
func TestIncidentR5ProbeNothingDeclared(t *testing.T) {
	const window = 10 * time.Second
	ns, db := probedV1(t, "r5probe", realstack.SetExpandContract)
	services := regionPods(rsvcSelector)
	waitServed(t, ns, services)
	gen := startTraffic(ns, services)
	t.Cleanup(func() { gen.Stop() }) // when the test ends early; Stop again is harmless
	time.Sleep(3 * time.Second)      // measured: traffic before the change, for the table

	began := time.Now()
	kit().Update(t, ns, realstack.ToExpandContractV2(db, window))
	story.Eventually(t, 3*time.Minute, "v2 promoted everywhere", kit().ServingIs(t, ns, allOn("v2")))
	probe := kit().Get(t, ns).Status.Schema.Probe
	if probe == nil || probe.To != "2" || (probe.Verdict != "expand" && probe.Verdict != "conditional") {
		t.Fatalf("the expand's probe: %+v (want expand or conditional)", probe)
	}
	t.Logf("the expand's probe: %s: %s", probe.Verdict, probe.Changes)
	story.Eventually(t, 2*time.Minute, "the contract is complete", func() error {
		r := kit().Get(t, ns)
		if r.Status.Schema.Phase != routingv1alpha1.SchemaPhaseComplete || r.Status.Schema.ConfirmedVersion != "3" {
			return fmt.Errorf("phase %q, confirmed %q, ContractReady %+v", r.Status.Schema.Phase, r.Status.Schema.ConfirmedVersion,
				story.Condition(r, routingv1alpha1.ConditionContractReady))
		}
		return nil
	})
	t.Logf("expand, three shards, window and contract done %s after the update", time.Since(began).Round(100*time.Millisecond))
	time.Sleep(2 * time.Second) // measured: traffic after the change, for the table
	rep := gen.Stop()
	table(t, "R-5 probe, nothing declared for v1", rep)
	if v := schemaVersion(t, db); v != 3 {
		t.Errorf("the database is at schema %d, want the contract's 3", v)
	}
	for _, reg := range realRegions {
		if tot := rep.Totals[reg.Shard]; tot.NotFound > 0 || tot.Errors() > 0 {
			t.Errorf("%s: %+v (want every request answered 200)", reg.Shard, tot)
		}
	}
}
