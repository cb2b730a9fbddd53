package main

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

type listOptions struct {
	allNamespaces bool
	noColor       bool
}

func newListCommand(a *app) *cobra.Command {
	o := &listOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List RoutingServices: ready, reason, schema, shard progress, age",
		Long: `List RoutingServices, one line each: READY and REASON (from the conditions of the current
generation; "-" and NotObserved while the controller has not reported on it yet), the schema
REQUIRED and CONFIRMED, SHARDS promoted to the update revision, the CURRENT shard and its step,
and AGE.`,
		Example: `  kubectl schemagate list
  kubectl schemagate list -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runList(cmd.Context(), o) },
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the RoutingServices of every namespace")
	cmd.Flags().BoolVar(&o.noColor, "no-color", false, "no colours (also when NO_COLOR is set, or the output is not a terminal)")
	return cmd
}

// listRow is one RoutingService's line.
type listRow struct {
	Namespace, Name, Ready, Reason, Required, Confirmed, Shards, Current, Age string
	State                                                                     string
}

func listRowOf(r *routingv1alpha1.RoutingService, v *View) listRow {
	row := listRow{Namespace: r.Namespace, Name: r.Name, Reason: v.Reason, Required: v.Schema.Required,
		Confirmed: orDash(v.Schema.Confirmed), Shards: fmt.Sprintf("%d/%d", v.Progress.Promoted, v.Progress.Total),
		Current: "-", Age: v.Age, State: v.State}
	row.Ready = "-"
	if c := currentCondition(r, routingv1alpha1.ConditionReady); c != nil {
		row.Ready = string(c.Status)
	}
	if v.Progress.CurrentShard != "" && v.State != StateReady {
		row.Current = v.Progress.CurrentShard + " " + v.Progress.CurrentStep
	}
	if r.Spec.Paused {
		row.Current += " (paused)"
	}
	return row
}

func (a *app) runList(ctx context.Context, o *listOptions) error {
	ns, cl, err := a.target()
	if err != nil {
		return err
	}
	if err := cl.checkAPI(ctx); err != nil {
		return err
	}
	var l *unstructured.UnstructuredList
	if o.allNamespaces {
		if l, err = cl.dyn.Resource(rsvcGVR).List(ctx, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("cannot list RoutingServices: %w", err)
		}
	} else if l, err = cl.dyn.Resource(rsvcGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("cannot list RoutingServices in namespace %s: %w", ns, err)
	}
	now := a.now()
	var rows []listRow
	for i := range l.Items {
		r, err := toTyped(&l.Items[i])
		if err != nil {
			return err
		}
		rows = append(rows, listRowOf(r, BuildView(r, Objects{}, now)))
	}
	if len(rows) == 0 {
		if o.allNamespaces {
			fmt.Fprintln(a.streams.ErrOut, "No RoutingServices found.")
		} else {
			fmt.Fprintf(a.streams.ErrOut, "No RoutingServices found in namespace %s.\n", ns)
		}
		return nil
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	pal := a.colors(a.streams.Out, o.noColor)
	t := &table{header: []string{"NAME", "READY", "REASON", "REQUIRED", "CONFIRMED", "SHARDS", "CURRENT", "AGE"}}
	if o.allNamespaces {
		t.header = append([]string{"NAMESPACE"}, t.header...)
	}
	for _, r := range rows {
		cells := []cell{{text: r.Name}, {text: r.Ready, color: stateColor(r.State)}, {text: r.Reason, color: stateColor(r.State)},
			{text: r.Required}, {text: r.Confirmed}, {text: r.Shards}, {text: r.Current}, {text: r.Age}}
		if o.allNamespaces {
			cells = append([]cell{{text: r.Namespace}}, cells...)
		}
		t.add(cells...)
	}
	t.write(a.streams.Out, pal)
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
