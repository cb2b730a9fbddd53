package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Exit codes of `status`.
const (
	codeReady   = 0
	codeStalled = 1
	codeFailed  = 2
	codeTimeout = 3
)

func newStatusCommand(a *app) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Wait for a RoutingService's rollout, printing each change of Ready, Stalled and Reconciling (for CI)",
		Long: `Wait for the rollout of a RoutingService's current generation and print each change of its
Ready, Stalled and Reconciling conditions once, one line each. Only conditions that describe the
current generation (their observedGeneration equals metadata.generation) count: right after an
apply, the previous generation's Ready=True does not end the wait.

Exit codes:
  0  Ready=True for the current generation: promoted in every shard and available
  1  Stalled=True for the current generation: a person is needed (the reason and message are
     printed on stderr)
  2  the command failed: bad arguments, RoutingService not found, CRD missing, no access
  3  --timeout passed first`,
		Example: `  kubectl apply --server-side -f routingservice.yaml
  kubectl schemagate status edge-router --timeout 30m`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return &exitError{code: codeFailed, err: err}
			}
			return nil
		},
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return &exitError{code: codeFailed, err: errors.New("--timeout must not be negative")}
			}
			return a.runStatus(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long and exit 3 (0: wait as long as it takes)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: codeFailed, err: err} })
	return cmd
}

// conditionPrinter prints each change of the Ready, Stalled and Reconciling conditions of the
// current generation once.
type conditionPrinter struct {
	w       io.Writer
	now     func() time.Time
	printed map[string]string
	waiting int64
}

func (p *conditionPrinter) observe(r *routingv1alpha1.RoutingService) {
	if r.Status.ObservedGeneration != r.Generation {
		if p.waiting != r.Generation {
			p.waiting = r.Generation
			fmt.Fprintf(p.w, "%s  generation %d: waiting for the controller (status describes generation %d)\n",
				p.now().Format(time.TimeOnly), r.Generation, r.Status.ObservedGeneration)
		}
		return
	}
	for _, t := range []string{routingv1alpha1.ConditionReconciling, routingv1alpha1.ConditionStalled, routingv1alpha1.ConditionReady} {
		c := currentCondition(r, t)
		if c == nil {
			continue
		}
		line := fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Reason)
		if c.Message != "" {
			line += ": " + c.Message
		}
		key := fmt.Sprintf("%d %s", r.Generation, line)
		if p.printed[t] == key {
			continue
		}
		p.printed[t] = key
		fmt.Fprintf(p.w, "%s  %s\n", p.now().Format(time.TimeOnly), line)
	}
}

func (a *app) runStatus(ctx context.Context, name string, timeout time.Duration) error {
	fail := func(err error) error { return &exitError{code: codeFailed, err: err} }
	ns, cl, _, _, err := a.read(ctx, name)
	if err != nil {
		return fail(err)
	}
	wctx, cancel := watchtools.ContextWithOptionalTimeout(ctx, timeout)
	defer cancel()
	res := cl.dyn.Resource(rsvcGVR).Namespace(ns)
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return res.Watch(ctx, o)
		},
	}, cl.dyn)
	p := &conditionPrinter{w: a.streams.Out, now: a.now, printed: map[string]string{}}
	var last *routingv1alpha1.RoutingService
	var deleted bool
	_, err = watchtools.UntilWithSync(wctx, lw, &unstructured.Unstructured{}, nil, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || u.GetName() != name {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			deleted = true
			return true, nil
		}
		r, err := toTyped(u)
		if err != nil {
			return false, err
		}
		last = r
		p.observe(r)
		return Summarize(r).Done, nil
	})
	switch {
	case deleted:
		return fail(fmt.Errorf("RoutingService %s/%s was deleted", ns, name))
	case err != nil && wctx.Err() == context.DeadlineExceeded:
		msg := fmt.Sprintf("timed out after %s waiting for RoutingService %s/%s", timeout, ns, name)
		if last != nil {
			s := Summarize(last)
			msg += fmt.Sprintf(": it is %s (%s)", s.State, s.Reason)
		}
		return &exitError{code: codeTimeout, err: errors.New(msg)}
	case err != nil:
		return fail(err)
	}
	s := Summarize(last)
	if s.State == StateStalled {
		return &exitError{code: codeStalled, err: fmt.Errorf("RoutingService %s/%s is stalled: %s: %s", ns, name, s.Reason, s.Message)}
	}
	fmt.Fprintf(a.streams.Out, "RoutingService %s/%s is ready: generation %d is promoted in every shard\n", ns, name, last.Generation)
	return nil
}
