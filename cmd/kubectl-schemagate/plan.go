package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/preview"
	"github.com/schemagate/schemagate/pkg/validate"
)

// planOptions are plan's flags.
type planOptions struct {
	file     string
	offline  bool
	exitCode bool
	output   string
	probe    probeOptions
	// connect reaches the cluster (newClients, or fakes in tests).
	connect func() (*clients, error)
	// now is the clock the manager's decision is computed at (time.Now, or a fixed time in tests).
	now func() time.Time
}

// Exit codes of plan --exit-code (the terraform plan -detailed-exitcode convention, with 1 for
// errors and an invalid manifest), and planRefused, with or without --exit-code: the manager
// would refuse the manifest or stop on it (its first decision is Stalled=True, or
// IncompatibleRevision), so a CI gate never reads it as fine.
const (
	planNoRollout = 0
	planRollout   = 2
	planRefused   = 3
)

// newPlanCommand is `kubectl schemagate plan -f FILE [NAME]` (issue 12): what applying FILE would
// do, validated offline with the CRD's own schema and CEL rules (pkg/validate) and compared with
// the live object unless --offline (pkg/preview).
func newPlanCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, connect func() (*clients, error)) *cobra.Command {
	return newPlanCommandWith(&planOptions{connect: connect, now: time.Now}, flags, streams)
}

// newPlanCommandWith is newPlanCommand with its options made by the caller (tests fix the clock).
func newPlanCommandWith(o *planOptions, flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan -f FILE [NAME]",
		Short: "Show what applying FILE would do: revision, migration, shards, duration, risks",
		Long: `plan reads a RoutingService manifest (FILE, or - for stdin; NAME picks one when FILE holds
several), validates it as the API server would (the CRD's schema, defaults and CEL rules, unknown
fields refused as kubectl apply's strict field validation does, offline) and as schemagate would
(every check's CEL condition compiles), compares it with the live object and its status (unless
--offline or it does not exist yet) and prints what applying it would do: a new revision or not,
the migration (from which schema version to which), which shards re-roll in what order (a shard
already on the manifest's revision, such as after a revert to the stable spec, does not), the
pods each replaces and the availability floor, replica changes, a duration range from the
deadlines, bake and checks, and the risky changes (a lower schema version, a shard reorder or
nodeSelector change that re-rolls every shard, a removed shard, evidence JobSuccess, ...).

When a shard names a cluster (spec.shards[].cluster), it also says which clusters the apply
touches, each with the shards it changes there ("this cluster" is the RoutingService's own), and
flags a shard that moves to another cluster or is removed from one: what it ran there is left
running.

When the manifest or the live object uses the schema lifecycle (spec.schema.compatibility or
spec.schema.contract), it also prints the lifecycle's phases in order — expand (from the version
the database reports to spec.schema.version, or binary first when the new revision also runs on
the database's version), the shards, the contract and its earliest time — and the schema range of
each revision that serves a shard or that a rollback would return to (from its ReplicaSets'
records, else the status), and flags before merge: a migration that a serving or rollback revision
cannot run on (refused, IncompatibleRevision), a contract that closes a revision's way back, a
database already past a revision's range, and revisions whose range is assumed, not declared.
--offline says what the manifest alone tells.

The gate itself is decided by the manager's own planner, run on what plan read (the live object
with the manifest's spec, its ReplicaSets, Jobs, Pods and ControllerRevisions; the manifest alone
for a new RoutingService or --offline): plan prints that first decision (SchemaReady, Stalled,
whether the migration Job starts, the shards touched first). It is not computed when a shard runs
in another cluster, or when a list is refused; plan says why.

--migrations DIR probes the migration before merge: on a scratch PostgreSQL (--scratch-database
or $SCHEMAGATE_SCRATCH_DATABASE_URL; it is emptied), the migrations in DIR are replayed with their
own tool (--tool golang-migrate or goose) up to the version the database is at (the live
status's; offline, --base's spec.schema.version, or --from), the catalog is captured, the
migration to spec.schema.version (or, when the database is there, to spec.schema.contract's
version) runs, and each change is classified: expand, conditional, breaking, or failed. A
breaking change narrows every revision whose range is only assumed to the database's version:
plan names the revisions it would break and the shards they serve, the way back it closes, and
the fixes. --base FILE is the manifest as merged, for a CI job with no cluster.

Exit codes: 0 success; 1 an error or an invalid manifest; with --exit-code, 2 when applying it
starts a rollout (0 when it does not); 3, with or without --exit-code, when the manager would
refuse it (its first decision is Stalled=True, or IncompatibleRevision); 4, with --migrations,
when the migration fails on the scratch database or the probe finds what --fail-on names (by
default a revision it breaks).`,
		Example: `  kubectl schemagate plan -f edge-router.yaml
  kustomize build overlays/prod | kubectl schemagate plan -f - edge-router --exit-code
  kubectl schemagate plan -f edge-router.yaml --offline --base base/edge-router.yaml \
      --migrations migrations --tool golang-migrate --scratch-database postgres://ci@127.0.0.1/scratch`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return o.run(cmd.Context(), flags, streams, name)
		},
	}
	cmd.Flags().StringVarP(&o.file, "filename", "f", "", "the manifest (YAML or JSON; - reads stdin)")
	cmd.Flags().BoolVar(&o.offline, "offline", false, "do not read the live object: compare with nothing")
	cmd.Flags().BoolVar(&o.exitCode, "exit-code", false, "exit 2 when applying FILE starts a rollout, 0 when it does not")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json or yaml: print the preview as data")
	o.probe.addFlags(cmd)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func (o *planOptions) run(ctx context.Context, flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams, name string) error {
	if o.output != "" && o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("--output must be json or yaml, not %q", o.output)
	}
	in := streams.In
	if o.file != "-" {
		f, err := os.Open(o.file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	if err := o.probe.flagsNeedMigrations(); err != nil {
		return err
	}
	obj, err := pickRoutingService(in, o.file, name)
	if err != nil {
		return err
	}
	u := obj
	errs, err := validate.Object(ctx, u)
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "The RoutingService %q is invalid (the API server would reject it):", nestedName(u))
		for _, e := range errs {
			fmt.Fprintf(&b, "\n  * %s", e.Error())
		}
		return &exitError{code: 1, err: errors.New(b.String())}
	}
	next := &routingv1alpha1.RoutingService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, next); err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	if errs := preview.ConditionErrors(&next.Spec); len(errs) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "The RoutingService %q cannot run (the API server accepts it, but schemagate refuses it before any shard moves):", next.Name)
		for _, e := range errs {
			fmt.Fprintf(&b, "\n  * %s", e.Error())
		}
		return &exitError{code: 1, err: errors.New(b.String())}
	}
	if next.Namespace == "" {
		ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
		if err != nil && !o.offline {
			return err
		}
		if ns == "" {
			ns = "default"
		}
		next.Namespace = ns
	}
	var live *routingv1alpha1.RoutingService
	var c *clients
	if !o.offline {
		connect := o.connect
		if connect == nil {
			connect = func() (*clients, error) { return newClients(flags) }
		}
		var err error
		c, err = connect()
		if err != nil {
			return fmt.Errorf("cannot reach the cluster (%w); --offline previews without it", err)
		}
		_, live, err = c.get(ctx, next.Namespace, next.Name)
		var nf *notFoundError
		switch {
		case errors.As(err, &nf):
			live = nil
		case errors.Is(err, errCRDMissing):
			fmt.Fprintf(streams.ErrOut, "note: %v; previewing as a new RoutingService\n", err)
			live = nil
		case err != nil:
			return fmt.Errorf("%w (--offline previews without the cluster)", err)
		}
	}
	var read preview.Read
	if live != nil {
		read = readOwned(ctx, c, live, streams.ErrOut)
	}
	now := time.Now
	if o.now != nil {
		now = o.now
	}
	p := preview.ComputeDecided(live, next, read, now())
	probeExit, probeWhy := 0, ""
	if o.probe.migrations != "" {
		exit, why, note, err := o.probe.run(ctx, &p, next, live != nil)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintf(streams.ErrOut, "note: %s\n", note)
		}
		probeExit, probeWhy = exit, why
	}
	switch o.output {
	case "json":
		b, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(streams.Out, string(b))
	case "yaml":
		b, err := yaml.Marshal(p)
		if err != nil {
			return err
		}
		fmt.Fprint(streams.Out, string(b))
	default:
		if err := p.Write(streams.Out); err != nil {
			return err
		}
	}
	if p.Refused != "" {
		return &exitError{code: planRefused, err: fmt.Errorf("the manager would refuse %s/%s or stop on it: %s", next.Namespace, next.Name, p.Refused)}
	}
	if probeExit != 0 {
		return &exitError{code: probeExit, err: fmt.Errorf("the migration probe of %s/%s (--fail-on %s): %s", next.Namespace, next.Name, strings.Join(o.probe.failOn, ","), probeWhy)}
	}
	if o.exitCode && p.Rollout {
		return &exitError{code: planRollout}
	}
	return nil
}

// readOwned lists what the manager's reconcile observes of live: its ReplicaSets, Jobs, Pods and
// ControllerRevisions (labelled schemagate.io/name). A list that is refused (no permission) is
// named on stderr and in Read.Unread: the ranges then come from what was read, and the manager's
// decision is not computed on partial input.
func readOwned(ctx context.Context, c *clients, live *routingv1alpha1.RoutingService, errOut io.Writer) preview.Read {
	var read preview.Read
	opts := metav1.ListOptions{LabelSelector: nameSelector(live.Name)}
	var unread []string
	note := func(what string, err error, also string) {
		unread = append(unread, what)
		fmt.Fprintf(errOut, "note: cannot list the %s of %s/%s (%v); %sthe manager's first decision is not computed\n", what, live.Namespace, live.Name, err, also)
	}
	// The ranges each revision's ReplicaSets record decide what a migration or a rollback may
	// do; without them the status's record is used.
	if list, err := c.kube.AppsV1().ReplicaSets(live.Namespace).List(ctx, opts); err != nil {
		note("ReplicaSets", err, "the schema ranges come from its status alone, and ")
	} else {
		read.ReplicaSets = list.Items
	}
	if list, err := c.kube.BatchV1().Jobs(live.Namespace).List(ctx, opts); err != nil {
		note("Jobs", err, "")
	} else {
		read.Jobs = list.Items
	}
	if list, err := c.kube.CoreV1().Pods(live.Namespace).List(ctx, opts); err != nil {
		note("Pods", err, "")
	} else {
		read.Pods = list.Items
	}
	if list, err := c.kube.AppsV1().ControllerRevisions(live.Namespace).List(ctx, opts); err != nil {
		note("ControllerRevisions", err, "")
	} else {
		read.ControllerRevisions = list.Items
	}
	read.Unread = strings.Join(unread, ", ")
	return read
}

// pickRoutingService reads the documents of in and returns the RoutingService named name (or the
// only one), decoded as the API server decodes a request body.
func pickRoutingService(in io.Reader, file, name string) (map[string]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(in))
	var found []map[string]any
	var kinds []string
	for {
		doc, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, err := validate.Decode(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if obj == nil {
			continue
		}
		kind, _ := obj["kind"].(string)
		apiVersion, _ := obj["apiVersion"].(string)
		if kind != "RoutingService" || !strings.HasPrefix(apiVersion, routingv1alpha1.GroupVersion.Group+"/") {
			kinds = append(kinds, fmt.Sprintf("%s %s", apiVersion, kind))
			continue
		}
		if apiVersion != routingv1alpha1.GroupVersion.String() {
			return nil, fmt.Errorf("%s: a RoutingService of %s; this plugin reads %s: upgrade the plugin", file, apiVersion, routingv1alpha1.GroupVersion)
		}
		if name == "" || nestedName(obj) == name {
			found = append(found, obj)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		var names []string
		for _, f := range found {
			names = append(names, nestedName(f))
		}
		return nil, fmt.Errorf("%s holds %d RoutingServices (%s): name one", file, len(found), strings.Join(names, ", "))
	case name != "":
		return nil, fmt.Errorf("%s holds no RoutingService named %q", file, name)
	case len(kinds) > 0:
		return nil, fmt.Errorf("%s holds no RoutingService (%s/RoutingService); it holds: %s", file, routingv1alpha1.GroupVersion, strings.Join(kinds, ", "))
	}
	return nil, fmt.Errorf("%s is empty", file)
}

func nestedName(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	n, _ := md["name"].(string)
	return n
}
