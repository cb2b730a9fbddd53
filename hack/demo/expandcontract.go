package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/realstack"
)

// The expand-contract variant (DEMO=expand-contract make demo): the route target's type change
// done as one lifecycle. v1 reads each route's target as a URL from a text column and runs on
// schema [1, 2]; v2 reads it as JSON and runs on [2, 3]. Act two expands (migration 2 adds the
// JSON column beside the text one, backfills it, a trigger keeps both in step), rolls v2 out shard
// by shard, waits out the rollback window and contracts (migration 3 drops the text column) once
// no v1 pod exists. Act three reverts the spec to v1, as Git would: refused, v2 keeps serving.
const variantExpandContract = "expand-contract"

// contractWindow is the demo's rollback window (production default: 600 s).
const contractWindow = 15 * time.Second

// typeChangeV1 is edge-router v1 of the type change, with the demo's strategy.
func typeChangeV1(database string, bake int32) *routingv1alpha1.RoutingService {
	r := demoRoutingService(database, bake)
	v1 := realstack.TypeChangeV1(r.Name, r.Namespace, database, realstack.SetExpandContract, replicas, realstack.Range("1", "2"))
	v1.Spec.Strategy = r.Spec.Strategy
	v1.Spec.Schema.Migration.BackoffLimit = ptr.To(int32(1))
	v1.Spec.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(60))
	return v1
}

func runExpandContract(ctx context.Context, o options, c client.Client, w *watcher, database string, began time.Time, kubeconfig string) error {
	w.lifecycle = true
	heading("4. Act one: edge-router v1, which reads each route's target as a URL from a text column (schema 1; runs on schema 1 to 2)")
	act1 := time.Now()
	if err := c.Create(ctx, typeChangeV1(database, o.bake)); err != nil {
		return err
	}
	if err := w.waitReady(ctx, 1, 3*time.Minute); err != nil {
		return err
	}
	w.summary("v1", act1)
	traffic := newLoad(c, "default", "edge-router", o.rate)
	if err := traffic.waitServed(ctx, time.Minute); err != nil {
		return err
	}
	trafficCtx, stopLines := context.WithCancel(ctx)
	defer stopLines()
	traffic.start(ctx)
	defer traffic.stop()
	go traffic.printEverySecond(trafficCtx)
	printf("\n  Traffic: %d requests/s per region over d00.example … d19.example, to each region's ready router pods.\n\n", o.rate)
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}

	heading(fmt.Sprintf("5. Act two: v2 reads the target as JSON (runs on schema 2 to 3): expand, roll out, a %s rollback window, contract", contractWindow))
	printf("  expand   (migration 2) adds routes.target jsonb, fills it from upstream, and a trigger keeps both columns in step\n")
	printf("  contract (migration 3) drops upstream: it runs once every shard serves v2 and no v1 pod exists\n\n")
	act2 := time.Now()
	if _, err := w.update(ctx, realstack.ToExpandContractV2(database, contractWindow)); err != nil {
		return err
	}
	err := w.waitFor(ctx, 4*time.Minute, "the contract complete (status.schema.phase Complete, schema 3 confirmed)", func(r *routingv1alpha1.RoutingService) bool {
		return r.Status.Schema.Phase == routingv1alpha1.SchemaPhaseComplete && r.Status.Schema.ConfirmedVersion == "3"
	})
	if err != nil {
		return err
	}
	if err := w.expectServing(ctx, routerImage+":v2"); err != nil {
		return err
	}
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	lifecycle, _ := traffic.start(ctx)
	w.summary("v2", act2)
	lastV1, contractJob := w.lifecycleTimes()
	printf("    last v1 pod seen (terminating included)        %s\n", lastV1.Format("15:04:05.0"))
	printf("    contract Job created                           %s\n", contractJob.Format("15:04:05"))
	clean := cleanRollout(lifecycle, "v2")
	if contractJob.IsZero() || contractJob.Before(lastV1.Truncate(time.Second)) {
		clean = errors.Join(clean, fmt.Errorf("the contract Job (created %s) started before the last v1 pod was gone (%s)", contractJob, lastV1))
	}

	heading("6. Act three: the spec reverted to v1, as a Git revert would, after the contract")
	act3 := time.Now()
	if _, err := w.update(ctx, realstack.ToTextV1(database, realstack.Range("1", "2"))); err != nil {
		return err
	}
	err = w.waitFor(ctx, time.Minute, "Stalled=True RollbackRefused", func(r *routingv1alpha1.RoutingService) bool {
		s := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionStalled)
		return s != nil && s.Status == metav1.ConditionTrue && s.Reason == routingv1alpha1.ReasonRollbackRefused && s.ObservedGeneration == r.Generation
	})
	if err != nil {
		return err
	}
	before := traffic.snapshot()
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	stillV2 := errors.Join(servedOnlyBy(before, traffic.snapshot(), "v2"), w.expectServing(ctx, routerImage+":v2"))
	refused := traffic.stop()
	stopLines()
	w.summary("the revert", act3)
	printf("\n  v1 cannot run on schema 3 (it reads the column the contract dropped): the rollback is refused and v2 serves every shard.\n")

	heading("Traffic, per region, over each act")
	printf("%s", tables(
		tableRow{"v1 → v2 (expand, shard by shard, window, contract)", lifecycle},
		tableRow{"revert to v1 after the contract (refused)", refused},
	))
	printf("\n")
	verdict := func(what string, err error) {
		if err != nil {
			printf("  FAIL  %s: %v\n", what, err)
		} else {
			printf("  ok    %s\n", what)
		}
	}
	verdict("v1 → v2 → contract: no 404 and no error in any region; the contract after the last v1 pod", clean)
	verdict("after the refused revert: v2 answers every request in every region", stillV2)
	heading(fmt.Sprintf("Done in %s", time.Since(began).Round(time.Second)))
	if err := errors.Join(clean, stillV2); err != nil {
		return err
	}
	if o.keep {
		printf("  The cluster stays up: export KUBECONFIG=%s   (Ctrl-C to stop it)\n", kubeconfig)
		<-ctx.Done()
	}
	return nil
}

// lifecycleLine describes the lifecycle's phase and the contract for the timeline.
func lifecycleLine(r *routingv1alpha1.RoutingService) string {
	var parts []string
	if p := r.Status.Schema.Phase; p != "" {
		parts = append(parts, "phase "+string(p))
	}
	for _, t := range []string{routingv1alpha1.ConditionContractReady, routingv1alpha1.ConditionRollbackSafe} {
		if c := meta.FindStatusCondition(r.Status.Conditions, t); c != nil {
			parts = append(parts, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason))
		}
	}
	if ct := r.Status.Schema.Contract; ct != nil && ct.EligibleTime != nil {
		parts = append(parts, "contract eligible at "+ct.EligibleTime.Format("15:04:05"))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%-11s %s", "lifecycle", strings.Join(parts, ", "))
}
