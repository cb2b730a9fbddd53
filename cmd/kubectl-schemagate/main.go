// Command kubectl-schemagate is the kubectl plugin for RoutingServices (issue 12): `kubectl
// schemagate get|list|status|pause|resume|abort|retry|promote|approve-contract|plan|dashboard`. See docs/kubectl-schemagate.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(run(os.Args[1:], streams, newApp(genericclioptions.NewConfigFlags(true), streams)))
}

// app is what every command shares: the kubeconfig flags, the streams, the clock and how to
// reach the cluster (tests replace the last two).
type app struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	now     func() time.Time
	connect func() (*clients, error)
	getenv  func(string) string
	// tty says whether w is a terminal (screen clearing and colours only there).
	tty func(w io.Writer) bool
}

func newApp(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *app {
	return &app{
		flags: flags, streams: streams, now: time.Now, getenv: os.Getenv, tty: isTerminal,
		connect: func() (*clients, error) { return newClients(flags) },
	}
}

// isTerminal reports whether w is a character device (a terminal), without a terminal library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// namespace is -n, else the kubeconfig context's namespace, else "default".
func (a *app) namespace() (string, error) {
	ns, _, err := a.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// target resolves the namespace (-n, else the context's) and connects: the start of every
// command that acts in one namespace.
func (a *app) target() (string, *clients, error) {
	ns, err := a.namespace()
	if err != nil {
		return "", nil, err
	}
	cl, err := a.connect()
	return ns, cl, err
}

// read resolves the namespace, connects, and reads the RoutingService name in it: the start of
// every command that acts on one.
func (a *app) read(ctx context.Context, name string) (string, *clients, *unstructured.Unstructured, *routingv1alpha1.RoutingService, error) {
	ns, cl, err := a.target()
	if err != nil {
		return "", nil, nil, nil, err
	}
	u, r, err := cl.get(ctx, ns, name)
	return ns, cl, u, r, err
}

// exitError ends the program with code; err, when set, is printed first.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// run executes the command line and returns the process's exit code: that of an exitError, 1
// for any other error, 0 on success.
func run(args []string, streams genericiooptions.IOStreams, a *app) int {
	root := newRootCommand(a)
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(streams.ErrOut, "error:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(streams.ErrOut, "error:", err)
	return 1
}

func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-schemagate",
		Short: "Watch and control schemagate RoutingServices",
		Long: `kubectl schemagate shows and controls schemagate's RoutingServices (routing.schemagate.io/v1alpha1):
the migration, the schema gate and each shard's step, ReplicaSets and pods; pause, resume, abort,
retry and promote a rollout; wait for it in CI.`,
		Example: `  kubectl schemagate list -A
  kubectl schemagate get edge-router -w
  kubectl schemagate status edge-router --timeout 30m   # in CI: 0 ready, 1 stalled, 3 timed out
  kubectl schemagate promote edge-router`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl schemagate"},
		CompletionOptions: cobra.CompletionOptions{
			DisableDefaultCmd: true,
		},
	}
	a.flags.AddFlags(root.PersistentFlags())
	registerFlagCompletions(root, a)
	root.AddCommand(
		newGetCommand(a),
		newListCommand(a),
		newStatusCommand(a),
		newPauseCommand(a, true),
		newPauseCommand(a, false),
		newAnnotateCommand(a, abortAction),
		newAnnotateCommand(a, retryAction),
		newAnnotateCommand(a, promoteAction),
		newAnnotateCommand(a, approveContractAction),
		newPlanCommand(a.flags, a.streams, func() (*clients, error) { return a.connect() }),
		newDashboardCommand(a),
		newCompletionCommand(root),
	)
	return root
}
