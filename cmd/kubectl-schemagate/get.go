package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

type getOptions struct {
	watch        bool
	keepWatching bool
	noColor      bool
	output       string
}

// minRedraw bounds `get -w` to 4 redraws a second however fast events come.
const minRedraw = 250 * time.Millisecond

func newGetCommand(a *app) *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a RoutingService's rollout: status, schema, revisions, and a tree of its Jobs, shards, checks, ReplicaSets and pods",
		Long: `Show a RoutingService's rollout.

The header gives its status (with the reason and message of the Ready, Stalled or Reconciling
condition of the current generation), the schema gate (required and confirmed version, migration
Job), the stable and update revisions and the strategy. The tree below lists the migration and
schema check Jobs with their pods, then each shard in spec order with its step, its progress
deadline or bake countdown, its checks (phase, measurements, last measurement), its ReplicaSets
(revision, stable/update/serving, replicas ready and available) and their pods (ready, restarts,
age). Objects are found by the label schemagate.io/name.

With -w the screen is redrawn on every change of the RoutingService, its ReplicaSets, Jobs or Pods
(at most 4 times a second; the screen is cleared only when the output is a terminal, otherwise
each new view is appended). A RoutingService that does not exist yet is waited for. It exits when
the rollout of the current generation is over: 0 once Ready=True, 1 once Stalled=True; 2 when the
watch fails or the RoutingService is deleted. --keep-watching keeps it running.

Colours are used on a terminal unless --no-color is given or NO_COLOR is set.`,
		Example: `  kubectl schemagate get edge-router
  kubectl schemagate get edge-router -n edge -w
  kubectl schemagate get edge-router -o json | jq '.shards[] | {name, step}'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch o.output {
			case "", "json", "yaml":
			default:
				return fmt.Errorf("--output must be json or yaml, not %q", o.output)
			}
			return a.runGet(cmd.Context(), args[0], o)
		},
	}
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "redraw on every change until the rollout is done (Ready or Stalled for the current generation)")
	cmd.Flags().BoolVar(&o.keepWatching, "keep-watching", false, "with -w: keep watching after the rollout is done")
	cmd.Flags().BoolVar(&o.noColor, "no-color", false, "no colours (also when NO_COLOR is set, or the output is not a terminal)")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "print the computed view as json or yaml instead of the tree")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// colors says whether to colour what goes to w.
func (a *app) colors(w io.Writer, noColor bool) palette {
	return palette{on: !noColor && a.getenv("NO_COLOR") == "" && a.tty(w)}
}

// Exit codes of `get -w` besides 0 (Ready) and codeStalled: the watch itself failed, or the
// RoutingService was deleted while watched (status's codeFailed).
const codeWatchFailed = codeFailed

func (a *app) runGet(ctx context.Context, name string, o *getOptions) error {
	ns, cl, _, r, err := a.read(ctx, name)
	var nf *notFoundError
	if o.watch && errors.As(err, &nf) {
		// Like kubectl get -w: a name that does not exist yet is waited for (an apply that
		// has not landed, a watch started first in another terminal).
		fmt.Fprintf(a.streams.ErrOut, "%v; waiting for it to be created\n", err)
		err = nil
	}
	if err != nil {
		return err
	}
	if o.watch {
		if err := a.watchGet(ctx, cl, ns, name, o); err != nil {
			var ee *exitError
			if errors.As(err, &ee) {
				return err
			}
			return &exitError{code: codeWatchFailed, err: err}
		}
		return nil
	}
	objs, err := cl.objects(ctx, ns, name)
	if err != nil {
		return err
	}
	return writeView(a.streams.Out, BuildView(r, objs, a.now()), o.output, a.colors(a.streams.Out, o.noColor))
}

// writeView prints the view as a tree, or as json or yaml.
func writeView(w io.Writer, v *View, output string, p palette) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	renderView(w, v, p)
	return nil
}

// screen writes successive frames: on a terminal over the previous one (cursor home, each line
// cleared to its end, the rest of the screen cleared after: no blank flash between frames);
// elsewhere appended, and only when the frame changed.
type screen struct {
	w     io.Writer
	tty   bool
	drawn bool
	last  string
}

func (s *screen) draw(frame string) {
	if s.tty {
		var b strings.Builder
		if !s.drawn {
			b.WriteString("\x1b[H\x1b[2J")
		} else {
			b.WriteString("\x1b[H")
		}
		for _, line := range strings.SplitAfter(frame, "\n") {
			if line == "" {
				continue
			}
			b.WriteString(strings.TrimSuffix(line, "\n"))
			b.WriteString("\x1b[K")
			if strings.HasSuffix(line, "\n") {
				b.WriteString("\n")
			}
		}
		b.WriteString("\x1b[J")
		_, _ = io.WriteString(s.w, b.String())
		s.drawn = true
		return
	}
	if frame == s.last {
		return
	}
	if s.drawn {
		_, _ = io.WriteString(s.w, "\n")
	}
	_, _ = io.WriteString(s.w, frame)
	s.drawn, s.last = true, frame
}

// watchGet redraws the view on every change until the rollout is done. It watches the
// RoutingService (by name) and its ReplicaSets, Jobs and Pods (by label) through informers, so a
// redraw reads from memory and a dropped watch is resumed by client-go.
func (a *app) watchGet(ctx context.Context, cl *clients, ns, name string, o *getOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(cl.dyn, 0, ns, func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	rsvcInf := dyn.ForResource(rsvcGVR).Informer()
	kf := informers.NewSharedInformerFactoryWithOptions(cl.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = nameSelector(name) }))
	rsInf := kf.Apps().V1().ReplicaSets().Informer()
	jobInf := kf.Batch().V1().Jobs().Informer()
	podInf := kf.Core().V1().Pods().Informer()

	poke := make(chan struct{}, 1)
	notify := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{rsvcInf, rsInf, jobInf, podInf} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	dyn.Start(ctx.Done())
	kf.Start(ctx.Done())
	for gvr, ok := range dyn.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cannot watch %s in namespace %s", gvr.Resource, ns)
		}
	}
	for typ, ok := range kf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cannot watch %s in namespace %s", typ, ns)
		}
	}

	tty := a.tty(a.streams.Out)
	scr := &screen{w: a.streams.Out, tty: tty && o.output == ""}
	pal := a.colors(a.streams.Out, o.noColor)
	seen := false
	draw := func() (done bool, code int, err error) {
		item, exists, err := rsvcInf.GetStore().GetByKey(ns + "/" + name)
		if err != nil {
			return false, 0, err
		}
		switch {
		case !exists && seen:
			return false, 0, fmt.Errorf("RoutingService %s/%s was deleted", ns, name)
		case !exists:
			return false, 0, nil // not created yet: the informer wakes us when it is
		}
		seen = true
		r, err := toTyped(item.(*unstructured.Unstructured))
		if err != nil {
			return false, 0, err
		}
		var objs Objects
		for _, x := range rsInf.GetStore().List() {
			objs.ReplicaSets = append(objs.ReplicaSets, *x.(*appsv1.ReplicaSet))
		}
		for _, x := range jobInf.GetStore().List() {
			objs.Jobs = append(objs.Jobs, *x.(*batchv1.Job))
		}
		for _, x := range podInf.GetStore().List() {
			objs.Pods = append(objs.Pods, *x.(*corev1.Pod))
		}
		v := BuildView(r, objs, a.now())
		var b strings.Builder
		if err := writeView(&b, v, o.output, pal); err != nil {
			return false, 0, err
		}
		if o.output == "yaml" {
			b.WriteString("---\n")
		}
		scr.draw(b.String())
		if v.Done && !o.keepWatching {
			if v.State == StateStalled {
				return true, 1, nil
			}
			return true, 0, nil
		}
		return false, 0, nil
	}

	// On a terminal the countdowns tick once a second; elsewhere only events redraw.
	var tick <-chan time.Time
	if scr.tty {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	var last time.Time
	pending := true
	var wait <-chan time.Time
	for {
		if pending && wait == nil {
			if d := minRedraw - time.Since(last); d > 0 {
				wait = time.After(d)
			} else {
				pending, last = false, time.Now()
				done, code, err := draw()
				if err != nil {
					return err
				}
				if done {
					if code != 0 {
						return &exitError{code: code}
					}
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poke:
			pending = true
		case <-tick:
			pending = true
		case <-wait:
			wait = nil
		}
	}
}
