package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// fieldManager names this plugin in metadata.managedFields. It must not begin with "kubectl":
// Flux's kustomize-controller takes over, and then removes, every field whose manager's name
// begins with "kubectl" (its clean-up of `kubectl apply` and `kubectl edit` changes matches by
// prefix), so a pause or an abort written as "kubectl-schemagate" was undone at Flux's next
// apply (TestFluxAndAPersonsControls).
const fieldManager = "schemagate-plugin"

func newPauseCommand(a *app, pause bool) *cobra.Command {
	use, short, long := "pause NAME", "Pause a RoutingService's rollout (spec.paused: true)", `Set spec.paused to true with a merge patch: nothing is scaled (replica changes included) and no
migration starts until resume. A shard that was progressing or baking starts its step again on
resume, with a fresh progress deadline and a full bake. A retry or promote set while paused waits
and acts once after resume.

For a RoutingService that Argo CD or Flux manage, pause in Git: self-heal reverts a patched field
it manages (see docs/gitops.md). The command warns on stderr when it sees such a tool.`
	if !pause {
		use, short, long = "resume NAME", "Resume a paused RoutingService (spec.paused: false)", `Set spec.paused to false with a merge patch: the rollout goes on where it was, each shard that
was progressing or baking starting its step again (fresh deadline, full bake), and a retry or
promote that waited acts once.

For a RoutingService that Argo CD or Flux manage, resume in Git (see docs/gitops.md).`
	}
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Long:              long,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runPause(cmd.Context(), args[0], pause)
		},
	}
}

func (a *app) runPause(ctx context.Context, name string, pause bool) error {
	ns, cl, err := a.target()
	if err != nil {
		return err
	}
	return a.pauseIn(ctx, cl, ns, name, pause, a.streams.Out, a.streams.ErrOut)
}

// pauseIn sets spec.paused of ns/name to pause: what `pause` and `resume` do, and the dashboard's
// buttons (one function, so both write the same patch with the same field manager). It reads
// the object first, warns on errOut when a GitOps tool manages it, and says on out what the
// controller will do.
func (a *app) pauseIn(ctx context.Context, cl *clients, ns, name string, pause bool, out, errOut io.Writer) error {
	u, r, err := cl.get(ctx, ns, name)
	if err != nil {
		return err
	}
	if r.Spec.Paused == pause {
		fmt.Fprintf(out, "routingservice %s/%s is already %s: nothing changed\n", ns, name, pausedWord(pause))
		return nil
	}
	owned, managed := pauseAdvice(pause)
	warnGitOps(errOut, u, pauseField, owned, managed)
	patch := map[string]any{"spec": map[string]any{"paused": pause}}
	if err := cl.mergePatch(ctx, ns, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(out, "routingservice %s/%s %s\n", ns, name, pausedWord(pause))
	if pause {
		fmt.Fprintln(out, "The controller scales nothing and starts no migration until `kubectl schemagate resume "+name+"`; "+
			"a shard that was progressing or baking starts its step again then, with a fresh deadline and a full bake.")
	} else {
		fmt.Fprintln(out, "The controller goes on with the rollout: a shard that was progressing or baking starts its step again "+
			"(fresh deadline, full bake), and a retry or promote that waited acts once.")
	}
	return nil
}

// pauseField is the field pause and resume change.
var pauseField = gitopsField{path: []string{"spec", "paused"}, name: "spec.paused"}

func pausedWord(pause bool) string {
	if pause {
		return "paused"
	}
	return "resumed"
}

// pauseAdvice is what to tell a person about to patch spec.paused of a RoutingService a GitOps
// tool manages: when the tool owns the field, and when it only manages the object.
func pauseAdvice(pause bool) (owned, managed string) {
	if pause {
		return "self-heal will revert this patch at the next sync and the rollout will go on: the pause belongs in Git " +
				"(spec.paused: true in the manifest; see docs/gitops.md)",
			"self-heal will revert this patch if the manifest in Git sets spec.paused: the pause belongs in Git " +
				"(spec.paused: true in the manifest; see docs/gitops.md)"
	}
	return "self-heal will set spec.paused back to the value in Git: resume in Git (see docs/gitops.md)",
		"if the manifest in Git sets spec.paused: true, self-heal will pause it again: resume in Git (see docs/gitops.md)"
}

// annotateAction is one of the control annotations: abort, retry, promote.
type annotateAction struct {
	verb, annotation, short, long string
	handled                       func(*routingv1alpha1.RoutingService) string
	explain                       func(*routingv1alpha1.RoutingService) string
}

var abortAction = annotateAction{
	verb: "abort", annotation: routingv1alpha1.AnnotationAbort,
	short: "Abort the rollout in progress: roll back each shard it touched (annotation " + routingv1alpha1.AnnotationAbort + ")",
	long: `Set the annotation ` + routingv1alpha1.AnnotationAbort + ` to a new value with a merge patch. The controller acts once
per value (it records the value in status.lastHandledAbort and on the RoutingService's
ReplicaSets, schemagate.io/handled-abort, so a lost or restored status never makes it act
again, and never clears the annotation): a
rollout in progress is rolled back as by failurePolicy Rollback, whatever the policy says (each
shard it touched goes back to the revision that served it last; a first rollout halts where it
is), and reported as Stalled=True, reason Aborted. With nothing in progress nothing changes
(an AbortIgnored Event).`,
	handled: func(r *routingv1alpha1.RoutingService) string { return r.Status.LastHandledAbort },
	explain: explainAbort,
}

var retryAction = annotateAction{
	verb: "retry", annotation: routingv1alpha1.AnnotationRetry,
	short: "Retry what failed: the migration as attempt n+1, the failed shard, or an aborted rollout (annotation " + routingv1alpha1.AnnotationRetry + ")",
	long: `Set the annotation ` + routingv1alpha1.AnnotationRetry + ` to a new value with a merge patch. The controller acts once
per value (status.lastHandledRetry): a failed or timed-out migration runs again as a new Job,
attempt n+1 (the failed Job is kept for its logs), once the previous attempt's pods are gone; a
revision whose shard failed (progress deadline, failed check) is tried again from that shard;
an aborted rollout resumes from the first shard it has not promoted. With nothing failed nothing changes (a RetryIgnored Event). While spec.paused is true the retry
waits and acts once after resume.`,
	handled: func(r *routingv1alpha1.RoutingService) string { return r.Status.LastHandledRetry },
	explain: explainRetry,
}

var promoteAction = annotateAction{
	verb: "promote", annotation: routingv1alpha1.AnnotationPromote,
	short: "End the current shard's bake now (annotation " + routingv1alpha1.AnnotationPromote + ")",
	long: `Set the annotation ` + routingv1alpha1.AnnotationPromote + ` to a new value with a merge patch. The controller acts
once per value (status.lastHandledPromote): the bake of the shard that is baking ends now, with
any check still running (or held inconclusive) set aside, and the next shard starts (a
BakeSkipped Event). With no shard baking, or when the bake ends on its own as the promote is
read, nothing more changes (a PromoteIgnored Event): a promote never reaches the next shard. While
spec.paused is true the promote waits and acts once after resume.`,
	handled: func(r *routingv1alpha1.RoutingService) string { return r.Status.LastHandledPromote },
	explain: explainPromote,
}

func newAnnotateCommand(a *app, act annotateAction) *cobra.Command {
	return &cobra.Command{
		Use:               act.verb + " NAME",
		Short:             act.short,
		Long:              act.long,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runAnnotate(cmd.Context(), args[0], act)
		},
	}
}

// newToken is a fresh annotation value: the time, for people, and a random suffix, so that two
// commands in the same second still set two values.
func (a *app) newToken() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return a.now().UTC().Format("20060102T150405Z") + "-" + string(b)
}

func (a *app) runAnnotate(ctx context.Context, name string, act annotateAction) error {
	ns, cl, err := a.target()
	if err != nil {
		return err
	}
	return a.annotateIn(ctx, cl, ns, name, act, a.streams.Out, a.streams.ErrOut)
}

// annotateIn sets act's annotation of ns/name to a fresh value: what `abort`, `retry`, `promote`
// and `approve-contract` do, and the dashboard's buttons. It warns on errOut when a GitOps tool
// owns the annotation, and says on out the value set and what the controller will do.
func (a *app) annotateIn(ctx context.Context, cl *clients, ns, name string, act annotateAction, out, errOut io.Writer) error {
	u, r, err := cl.get(ctx, ns, name)
	if err != nil {
		return err
	}
	warnGitOps(errOut, u, act.field(), annotateAdvice, "")
	token := a.newToken()
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{act.annotation: token}}}
	if err := cl.mergePatch(ctx, ns, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(out, "routingservice %s/%s annotated %s=%s\n", ns, name, act.annotation, token)
	fmt.Fprintln(out, act.explain(r))
	return nil
}

// field is the annotation act sets, as warnGitOps names it: warned about only when a GitOps
// tool owns the annotation itself.
func (act annotateAction) field() gitopsField {
	return gitopsField{path: []string{"metadata", "annotations", act.annotation}, name: "annotation " + act.annotation, onlyIfOwned: true}
}

// annotateAdvice is the warning's advice for a control annotation a GitOps tool owns.
const annotateAdvice = "self-heal will set it back to the value in Git, and the controller acts on that value too"

func (c *clients) mergePatch(ctx context.Context, ns, name string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := c.dyn.Resource(rsvcGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("cannot patch RoutingService %s/%s: %w", ns, name, err)
	}
	return nil
}

// inProgress reports whether a rollout of the update revision is under way (not promoted
// everywhere, not aborted).
func inProgress(r *routingv1alpha1.RoutingService) bool {
	st := r.Status
	if st.UpdateRevision == "" || st.StableRevision == st.UpdateRevision {
		return false
	}
	return st.Failure == nil || st.Failure.Revision != st.UpdateRevision || st.Failure.Reason != routingv1alpha1.ReasonAborted
}

func explainAbort(r *routingv1alpha1.RoutingService) string {
	st := r.Status
	if !inProgress(r) {
		if f := st.Failure; f != nil && f.Revision == st.UpdateRevision && f.Reason == routingv1alpha1.ReasonAborted {
			return "The rollout of revision " + st.UpdateRevision + " is already aborted: the controller changes nothing (AbortIgnored)."
		}
		return "No rollout is in progress (revision " + orNone(st.UpdateRevision) + " is the stable one): the controller changes nothing (AbortIgnored)."
	}
	if st.StableRevision == "" {
		return "This is a first rollout, with nothing served before: the controller halts it where it is and reports Stalled=True, reason Aborted."
	}
	return fmt.Sprintf("The controller aborts the rollout of revision %s: each shard it touched goes back to the revision that served it last "+
		"(whatever failurePolicy says), the others are left as they are, and the RoutingService reports Stalled=True, reason Aborted.", st.UpdateRevision)
}

func explainRetry(r *routingv1alpha1.RoutingService) string {
	st := r.Status
	if r.Spec.Paused {
		return "spec.paused is true: the retry waits and acts once after `kubectl schemagate resume " + r.Name + "`."
	}
	if f := st.Failure; f != nil && f.Revision == st.UpdateRevision {
		if f.Reason == routingv1alpha1.ReasonAborted {
			return "The controller resumes the aborted rollout of revision " + f.Revision + ": the shards it rolled back start again in spec order, " +
				"each with a fresh progress deadline and a full bake (RolloutRetried)."
		}
		return fmt.Sprintf("The controller tries revision %s again from shard %s (RolloutRetried).", f.Revision, orNone(f.Shard))
	}
	stalled := currentCondition(r, routingv1alpha1.ConditionStalled)
	reason := ""
	if stalled != nil && stalled.Status == metav1.ConditionTrue {
		reason = stalled.Reason
	}
	switch reason {
	case routingv1alpha1.ReasonMigrationFailed, routingv1alpha1.ReasonMigrationDeadline, routingv1alpha1.ReasonSchemaMismatch, routingv1alpha1.ReasonSchemaEvidenceLost:
		return fmt.Sprintf("The controller runs the migration to schema %s again as attempt %d (the failed Job is kept for its logs), "+
			"once the previous attempt's pods are gone (MigrationRetried).", r.Spec.Schema.Version, st.Schema.Attempt+1)
	case routingv1alpha1.ReasonSchemaDirty:
		return fmt.Sprintf("The controller runs the migration to schema %s again as attempt %d. The last report said the database is dirty: "+
			"make sure it was fixed, or the migration fails the same way.", r.Spec.Schema.Version, st.Schema.Attempt+1)
	case routingv1alpha1.ReasonSchemaCheckFailed, routingv1alpha1.ReasonInvalidSchemaReport:
		return "The controller runs the Job whose schema report was missing or unusable again (" + reason + ")."
	}
	return "Nothing has failed: the controller changes nothing (RetryIgnored)."
}

func explainPromote(r *routingv1alpha1.RoutingService) string {
	if r.Spec.Paused {
		return "spec.paused is true: the promote waits and acts once after `kubectl schemagate resume " + r.Name + "`."
	}
	st := r.Status
	if inProgress(r) && (st.Failure == nil || st.Failure.Revision != st.UpdateRevision) {
		for i, ss := range st.Shards {
			if ss.StepRevision != st.UpdateRevision {
				continue
			}
			next := "the rollout is complete once it is promoted"
			if i+1 < len(st.Shards) {
				next = "shard " + st.Shards[i+1].Name + " starts next"
			}
			switch ss.Step {
			case routingv1alpha1.ShardStepBaking:
				return fmt.Sprintf("The controller ends shard %s's bake now, setting aside any check still running or inconclusive, and promotes it "+
					"(BakeSkipped); %s.", ss.Name, next)
			case routingv1alpha1.ShardStepPending:
				if hasRunningPreChecks(ss) {
					return fmt.Sprintf("The controller starts shard %s without waiting for its pre-checks (BakeSkipped).", ss.Name)
				}
			}
		}
	}
	return "No shard is baking: the controller changes nothing (PromoteIgnored)."
}

func hasRunningPreChecks(ss routingv1alpha1.ShardStatus) bool {
	for _, c := range ss.Checks {
		if c.When == routingv1alpha1.CheckWhenBeforeStart && (c.Phase == routingv1alpha1.CheckPhaseRunning || c.Phase == routingv1alpha1.CheckPhaseInconclusive) {
			return true
		}
	}
	return false
}

// gitopsField is the field a command is about to change.
type gitopsField struct {
	path []string
	name string
	// onlyIfOwned: warn only when a GitOps tool's field manager owns the field itself (the
	// control annotations: Argo CD and Flux leave annotations they did not apply alone).
	onlyIfOwned bool
}

// gitopsManagers are the field managers of GitOps tools that revert drift (self-heal), by prefix.
var gitopsManagers = []struct{ prefix, tool string }{
	{"argocd-controller", "Argo CD"},
	{"argocd-application-controller", "Argo CD"},
	{"argocd", "Argo CD"},
	{"kustomize-controller", "Flux"},
	{"helm-controller", "Flux"},
}

// gitopsMarkers are labels or annotations GitOps tools put on what they manage.
var gitopsMarkers = []struct{ key, tool string }{
	{"argocd.argoproj.io/instance", "Argo CD"},
	{"argocd.argoproj.io/tracking-id", "Argo CD"},
	{"kustomize.toolkit.fluxcd.io/name", "Flux"},
	{"helm.toolkit.fluxcd.io/name", "Flux"},
}

// gitops reports who manages the object: the tools whose field manager owns the field, and the
// tools that manage the object at all (by field manager, label or annotation), each tool once
// with every way it was seen: "Flux (field manager kustomize-controller; label
// kustomize.toolkit.fluxcd.io/name=apps)".
func gitops(u *unstructured.Unstructured, path []string) (owners, managers []string) {
	var tools []string
	evidence := map[string][]string{}
	see := func(tool, how string) {
		if _, ok := evidence[tool]; !ok {
			tools = append(tools, tool)
		}
		if !slices.Contains(evidence[tool], how) {
			evidence[tool] = append(evidence[tool], how)
		}
	}
	for _, mf := range u.GetManagedFields() {
		tool := ""
		for _, m := range gitopsManagers {
			if strings.HasPrefix(mf.Manager, m.prefix) {
				tool = m.tool
				break
			}
		}
		if tool == "" {
			continue
		}
		see(tool, "field manager "+mf.Manager)
		if mf.FieldsV1 != nil && ownsField(mf.FieldsV1.GetRawBytes(), path) {
			owners = append(owners, fmt.Sprintf("%s (field manager %s)", tool, mf.Manager))
		}
	}
	for _, mk := range gitopsMarkers {
		if v, ok := u.GetLabels()[mk.key]; ok {
			see(mk.tool, fmt.Sprintf("label %s=%s", mk.key, v))
		}
		if v, ok := u.GetAnnotations()[mk.key]; ok {
			see(mk.tool, fmt.Sprintf("annotation %s=%s", mk.key, v))
		}
	}
	for _, tool := range tools {
		managers = append(managers, fmt.Sprintf("%s (%s)", tool, strings.Join(evidence[tool], "; ")))
	}
	return owners, managers
}

// ownsField reports whether a managedFields entry (FieldsV1: {"f:spec":{"f:paused":{}}}) sets path.
func ownsField(raw []byte, path []string) bool {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return false
	}
	for _, p := range path {
		next, ok := m["f:"+p].(map[string]any)
		if !ok {
			return false
		}
		m = next
	}
	return true
}

// warnGitOps warns on w before a field is changed that a GitOps tool manages.
func warnGitOps(w io.Writer, u *unstructured.Unstructured, f gitopsField, ownedAdvice, managedAdvice string) {
	if msg := gitopsWarning(u, f, ownedAdvice, managedAdvice); msg != "" {
		// The names and values in it come from the cluster: escaped, they cannot print lines
		// of their own (oneLine, as in the dashboard's confirmation).
		fmt.Fprintln(w, "warning: "+oneLine(msg))
	}
}

// gitopsWarning is the warning warnGitOps prints (without "warning: "), "" when no GitOps tool
// manages the field; the dashboard shows it in the confirmation of a control.
func gitopsWarning(u *unstructured.Unstructured, f gitopsField, ownedAdvice, managedAdvice string) string {
	owners, managers := gitops(u, f.path)
	switch {
	case len(owners) > 0:
		return fmt.Sprintf("%s owns %s of routingservice %s/%s: %s.", strings.Join(owners, ", "), f.name, u.GetNamespace(), u.GetName(), ownedAdvice)
	case len(managers) > 0 && !f.onlyIfOwned:
		return fmt.Sprintf("routingservice %s/%s is managed by %s: %s.", u.GetNamespace(), u.GetName(), strings.Join(managers, ", "), managedAdvice)
	}
	return ""
}
