package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// watcher polls the RoutingService, its Jobs and ReplicaSets, prints a timestamped line for each
// change, and remembers when each step was first seen, for the summaries.
type watcher struct {
	c         client.Client
	ns, name  string
	mu        sync.Mutex
	facts     map[string]string
	firstSeen map[string]time.Time
	latest    *routingv1alpha1.RoutingService
	// lifecycle (the expand-contract variant) also prints the schema lifecycle's phase and
	// conditions, and records when a v1 pod was last seen and the contract Job was created.
	lifecycle   bool
	lastV1      time.Time
	contractJob time.Time
}

func newWatcher(c client.Client, ns, name string) *watcher {
	return &watcher{c: c, ns: ns, name: name, facts: map[string]string{}, firstSeen: map[string]time.Time{}}
}

func (w *watcher) run(ctx context.Context) {
	wait.UntilWithContext(ctx, w.poll, 250*time.Millisecond)
}

func (w *watcher) poll(ctx context.Context) {
	rsvc := &routingv1alpha1.RoutingService{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, rsvc); err != nil {
		return
	}
	var jobs batchv1.JobList
	var rss appsv1.ReplicaSetList
	sel := client.MatchingLabels{rollout.LabelName: w.name}
	if w.c.List(ctx, &jobs, client.InNamespace(w.ns), sel) != nil || w.c.List(ctx, &rss, client.InNamespace(w.ns), sel) != nil {
		return
	}
	now := time.Now()
	facts := map[string]string{}
	for i, line := range conditionLines(rsvc.Status.Conditions) {
		facts[fmt.Sprintf("cond/%d", i)] = line
	}
	for _, j := range jobs.Items {
		facts["job/"+j.Name] = fmt.Sprintf("%-11s Job %s (schema %s): %s", j.Labels[rollout.LabelComponent], j.Name, j.Labels[rollout.LabelSchemaVersion], jobState(&j))
	}
	if w.lifecycle {
		if line := lifecycleLine(rsvc); line != "" {
			facts["lifecycle"] = line
		}
		w.recordLifecycle(ctx, &jobs, now)
	}
	images := map[string]string{}
	for _, rs := range rss.Items {
		images[rs.Labels[rollout.LabelRevision]] = shortImage(rs.Spec.Template.Spec.Containers[0].Image)
	}
	for _, s := range rsvc.Status.Shards {
		var sets []string
		for _, rs := range rss.Items {
			if rs.Labels[rollout.LabelShard] == s.Name && (*rs.Spec.Replicas > 0 || rs.Status.Replicas > 0) {
				sets = append(sets, fmt.Sprintf("%s %d/%d", shortImage(rs.Spec.Template.Spec.Containers[0].Image), rs.Status.AvailableReplicas, *rs.Spec.Replicas))
			}
		}
		sort.Strings(sets)
		if len(sets) == 0 {
			sets = []string{"no pods"}
		}
		facts["shard/"+s.Name] = fmt.Sprintf("%-11s %-12s %s (available/asked: %s)", s.Name, s.Step, images[s.StepRevision], strings.Join(sets, ", "))
		w.seen(fmt.Sprintf("%s/%s/%s", s.StepRevision, s.Name, s.Step), now)
	}
	if c := meta.FindStatusCondition(rsvc.Status.Conditions, routingv1alpha1.ConditionSchemaReady); c != nil && c.Status == metav1.ConditionTrue {
		w.seen(fmt.Sprintf("gate/%d", c.ObservedGeneration), now)
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest = rsvc
	keys := make([]string, 0, len(facts))
	for k := range facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	printf("%s", changedLines(w.facts, facts, now))
}

// changedLines returns a timestamped line for each fact that differs from what was printed
// (printed, updated in place). A condition line that was printed before under another key (the
// grouping of the conditions moved it) is not printed again: one line per transition.
func changedLines(printed, facts map[string]string, now time.Time) string {
	keys := make([]string, 0, len(facts))
	for k := range facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	before := map[string]bool{}
	for k, v := range printed {
		if strings.HasPrefix(k, "cond/") {
			before[v] = true
		}
	}
	for k := range printed {
		if _, ok := facts[k]; !ok && strings.HasPrefix(k, "cond/") {
			delete(printed, k)
		}
	}
	var b strings.Builder
	for _, k := range keys {
		if printed[k] == facts[k] {
			continue
		}
		printed[k] = facts[k]
		if strings.HasPrefix(k, "cond/") && before[facts[k]] {
			continue
		}
		fmt.Fprintf(&b, "  %s  %s\n", now.Format("15:04:05.0"), facts[k])
	}
	return b.String()
}

// conditionLines describes SchemaReady, Ready and Stalled, one line per distinct reason and
// message: Ready and Stalled (and often SchemaReady) say the same thing in one transition, and
// the demo prints it once, "condition   Ready=False Stalled=True ProgressDeadlineExceeded: ...".
func conditionLines(conds []metav1.Condition) []string {
	type group struct{ states, reason, message string }
	var groups []*group
	for _, t := range []string{routingv1alpha1.ConditionSchemaReady, routingv1alpha1.ConditionReady, routingv1alpha1.ConditionStalled} {
		c := meta.FindStatusCondition(conds, t)
		if c == nil {
			continue
		}
		state := fmt.Sprintf("%s=%s", c.Type, c.Status)
		found := false
		for _, g := range groups {
			if g.reason == c.Reason && g.message == c.Message {
				g.states += " " + state
				found = true
			}
		}
		if !found {
			groups = append(groups, &group{states: state, reason: c.Reason, message: c.Message})
		}
	}
	lines := make([]string, 0, len(groups))
	for _, g := range groups {
		lines = append(lines, fmt.Sprintf("%-11s %s %s: %s", "condition", g.states, g.reason, g.message))
	}
	return lines
}

// recordLifecycle notes when a v1 router pod (terminating included) was last seen and when the
// contract Job (schema 3) was created.
func (w *watcher) recordLifecycle(ctx context.Context, jobs *batchv1.JobList, now time.Time) {
	var pods corev1.PodList
	if w.c.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{rollout.LabelName: w.name, rollout.LabelComponent: rollout.ComponentRouting}) != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range pods.Items {
		if p.Spec.Containers[0].Image == routerImage+":v1" {
			w.lastV1 = now
		}
	}
	for _, j := range jobs.Items {
		if j.Labels[rollout.LabelSchemaVersion] == "3" && j.Labels[rollout.LabelComponent] != rollout.ComponentCheck && w.contractJob.IsZero() {
			w.contractJob = j.CreationTimestamp.Time
		}
	}
}

func (w *watcher) lifecycleTimes() (lastV1, contractJob time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastV1, w.contractJob
}

func (w *watcher) seen(key string, t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.firstSeen[key]; !ok {
		w.firstSeen[key] = t
	}
}

func jobState(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return string(c.Type)
		}
	}
	return fmt.Sprintf("running (active %d, failed %d)", j.Status.Active, j.Status.Failed)
}

func shortImage(image string) string {
	if i := strings.LastIndex(image, "/"); i >= 0 {
		return image[i+1:]
	}
	return image
}

func (w *watcher) get() *routingv1alpha1.RoutingService {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// update changes the spec and returns the new generation.
func (w *watcher) update(ctx context.Context, mutate func(*routingv1alpha1.RoutingService)) (int64, error) {
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rsvc := &routingv1alpha1.RoutingService{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.name}, rsvc); err != nil {
			return err
		}
		mutate(rsvc)
		if err := w.c.Update(ctx, rsvc); err != nil {
			return err
		}
		gen = rsvc.Generation
		return nil
	})
	return gen, err
}

func (w *watcher) waitFor(ctx context.Context, timeout time.Duration, what string, done func(*routingv1alpha1.RoutingService) bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r := w.get(); r != nil && done(r) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s: not within %s", what, timeout)
}

func conditionIs(r *routingv1alpha1.RoutingService, gen int64, t string, s metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(r.Status.Conditions, t)
	return c != nil && c.Status == s && c.ObservedGeneration >= gen && r.Status.ObservedGeneration >= gen
}

func (w *watcher) waitReady(ctx context.Context, gen int64, timeout time.Duration) error {
	return w.waitFor(ctx, timeout, "Ready=True", func(r *routingv1alpha1.RoutingService) bool {
		return conditionIs(r, gen, routingv1alpha1.ConditionReady, metav1.ConditionTrue)
	})
}

func (w *watcher) waitStalledAndRolledBack(ctx context.Context, gen int64, timeout time.Duration) error {
	return w.waitFor(ctx, timeout, "Stalled=True and rolled back", func(r *routingv1alpha1.RoutingService) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, routingv1alpha1.ConditionStalled)
		return conditionIs(r, gen, routingv1alpha1.ConditionStalled, metav1.ConditionTrue) && strings.Contains(c.Message, "rolled back:")
	})
}

// expectServing checks that every shard's pods are image's and Ready, on nodes of the
// shard's region, and prints where they run.
func (w *watcher) expectServing(ctx context.Context, image string) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = w.checkServing(ctx, image, false); last == nil {
			return w.checkServing(ctx, image, true)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

func (w *watcher) checkServing(ctx context.Context, image string, print bool) error {
	var pods corev1.PodList
	if err := w.c.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{rollout.LabelName: w.name, rollout.LabelComponent: rollout.ComponentRouting}); err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := w.c.List(ctx, &nodes); err != nil {
		return err
	}
	region := map[string]string{}
	for _, n := range nodes.Items {
		region[n.Name] = n.Labels["topology.kubernetes.io/region"]
	}
	rsvc := w.get()
	perShard := map[string][]string{}
	var b strings.Builder
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		shard := p.Labels[rollout.LabelShard]
		if p.Spec.Containers[0].Image != image {
			return fmt.Errorf("pod %s in %s runs %s", p.Name, shard, p.Spec.Containers[0].Image)
		}
		if !podReady(&p) {
			return fmt.Errorf("pod %s in %s is not ready", p.Name, shard)
		}
		perShard[shard] = append(perShard[shard], fmt.Sprintf("%s (%s)", p.Spec.NodeName, region[p.Spec.NodeName]))
	}
	for _, s := range rsvc.Spec.Shards {
		if int32(len(perShard[s.Name])) != s.Replicas {
			return fmt.Errorf("shard %s has %d pods, want %d", s.Name, len(perShard[s.Name]), s.Replicas)
		}
		for _, where := range perShard[s.Name] {
			if !strings.Contains(where, s.NodeSelector["topology.kubernetes.io/region"]) {
				return fmt.Errorf("a pod of shard %s runs outside its region: %s", s.Name, where)
			}
		}
		if print {
			sort.Strings(perShard[s.Name])
			fmt.Fprintf(&b, "  %-9s %d pods of %s on %s\n", s.Name, s.Replicas, shortImage(image), strings.Join(perShard[s.Name], ", "))
		}
	}
	printf("%s", b.String())
	return nil
}

// summary prints how long each phase of the act that began at start took.
func (w *watcher) summary(act string, start time.Time) {
	rsvc := w.get()
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	defer func() { printf("%s", b.String()) }()
	fmt.Fprintf(&b, "\n  Summary of %s (revision %s):\n", act, rsvc.Status.UpdateRevision)
	row := func(what string, d time.Duration) { fmt.Fprintf(&b, "    %-46s %6.1fs\n", what, d.Seconds()) }
	if s := rsvc.Status.Schema; s.StartTime != nil && s.CompletionTime != nil && !s.StartTime.Time.Before(start.Truncate(time.Second)) {
		row(fmt.Sprintf("migration Job %s", s.MigrationJob), s.CompletionTime.Sub(s.StartTime.Time))
	}
	if t, ok := w.firstSeen[fmt.Sprintf("gate/%d", rsvc.Generation)]; ok {
		row("update → SchemaReady gate open", t.Sub(start))
	}
	if s := rsvc.Status.Schema; s.ReportedBy != "" {
		fmt.Fprintf(&b, "    schema report: the database is at version %s (%s); required %s, confirmed %s\n",
			s.ReportedVersion, s.ReportedBy, s.RequiredVersion, s.ConfirmedVersion)
	}
	rev := rsvc.Status.UpdateRevision
	for _, s := range rsvc.Spec.Shards {
		began, ok := w.firstSeen[fmt.Sprintf("%s/%s/%s", rev, s.Name, routingv1alpha1.ShardStepProgressing)]
		if !ok || began.Before(start) {
			// Not stepped in this act (a revision that comes back was seen stepping in an
			// earlier one).
			continue
		}
		ends := []routingv1alpha1.ShardStep{routingv1alpha1.ShardStepPromoted, routingv1alpha1.ShardStepFailed, routingv1alpha1.ShardStepRolledBack}
		for _, end := range ends {
			if t, ok := w.firstSeen[fmt.Sprintf("%s/%s/%s", rev, s.Name, end)]; ok && !t.Before(began) {
				label := fmt.Sprintf("shard %s: %s", s.Name, strings.ToLower(string(end)))
				if end == routingv1alpha1.ShardStepRolledBack {
					label = fmt.Sprintf("shard %s: rolled back", s.Name)
				}
				if end == routingv1alpha1.ShardStepPromoted {
					label += fmt.Sprintf(" (incl. %ds bake)", rsvc.Spec.Strategy.BakeSecondsOrDefault())
				}
				row(label, t.Sub(began))
			}
		}
	}
	row("total", time.Since(start))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// explainNotReady waits for a pod of image that runs but is not ready, asks its router why
// (GET /ready on the pod's loopback address) and prints the answer once.
func (w *watcher) explainNotReady(ctx context.Context, image string) {
	for ctx.Err() == nil {
		var pods corev1.PodList
		if err := w.c.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{rollout.LabelName: w.name, rollout.LabelComponent: rollout.ComponentRouting}); err == nil {
			for _, p := range pods.Items {
				if p.Spec.Containers[0].Image != image || p.Status.PodIP == "" || p.DeletionTimestamp != nil || podReady(&p) ||
					len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
					continue
				}
				if time.Since(p.Status.ContainerStatuses[0].State.Running.StartedAt.Time) < 2*time.Second {
					continue // past its first route load
				}
				if reason := readyReason(ctx, p.Status.PodIP); !strings.HasPrefix(reason, "200") {
					printf("  %s  %-11s pod %s on %s asks its router: GET /ready → %s\n",
						time.Now().Format("15:04:05.0"), "not ready", p.Name, p.Spec.NodeName, reason)
					return
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}
