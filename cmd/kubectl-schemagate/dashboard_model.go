package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/checkspec"
	"github.com/schemagate/schemagate/pkg/preview"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Snapshot is what the dashboard sends to every open tab after a change: every RoutingService
// in scope, each with get's View and what the page draws besides.
type Snapshot struct {
	Now time.Time `json:"now"`
	// Namespace is the namespace watched, "" with -A.
	Namespace string `json:"namespace"`
	ReadOnly  bool   `json:"readOnly"`
	// Seq counts the snapshots of this run.
	Seq      uint64         `json:"seq"`
	Services []ServiceModel `json:"services"`
	// Notes are what the dashboard cannot show (Events it may not list, an object it cannot read).
	Notes []string `json:"notes,omitempty"`
}

// ServiceModel is one RoutingService on the dashboard.
type ServiceModel struct {
	View *View `json:"view"`
	// Timeline merges the migration Jobs, the Events, the shards' steps and the conditions'
	// transitions, oldest first.
	Timeline []TimelineEntry `json:"timeline"`
	// Checks are the measurements of each shard check, with the thresholds of its conditions.
	Checks   []CheckPlot    `json:"checks,omitempty"`
	Events   []EventModel   `json:"events,omitempty"`
	Plan     PlanModel      `json:"plan"`
	GitOps   []string       `json:"gitops,omitempty"`
	Controls []ControlModel `json:"controls"`
}

// TimelineEntry is one dated thing that happened to a RoutingService.
type TimelineEntry struct {
	Time time.Time `json:"time"`
	// Kind is job, event, step or condition.
	Kind   string `json:"kind"`
	Object string `json:"object,omitempty"`
	Text   string `json:"text"`
	// Level is normal, warning or error.
	Level string `json:"level"`
}

// EventModel is one Event of the RoutingService.
type EventModel struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Source  string    `json:"source,omitempty"`
}

// CheckPlot is one check of one shard: its measurements as points and its thresholds as lines.
type CheckPlot struct {
	Shard      string          `json:"shard"`
	Check      string          `json:"check"`
	When       string          `json:"when"`
	Phase      string          `json:"phase"`
	Revision   string          `json:"revision,omitempty"`
	Points     []PlotPoint     `json:"points"`
	Thresholds []PlotThreshold `json:"thresholds,omitempty"`
}

// PlotPoint is one measurement. Value is null when the measurement has no number (an error, no
// data, NaN or an infinity).
type PlotPoint struct {
	Time  time.Time  `json:"time"`
	Phase string     `json:"phase"`
	Value jsonNumber `json:"value"`
	Raw   string     `json:"raw,omitempty"`
	// Message explains an error or an inconclusive result.
	Message string `json:"message,omitempty"`
}

// PlotThreshold is a condition of the form `result <op> number`: Kind is success or failure.
type PlotThreshold struct {
	Kind      string     `json:"kind"`
	Op        string     `json:"op"`
	Value     jsonNumber `json:"value"`
	Condition string     `json:"condition"`
}

// PlanModel is what `kubectl schemagate plan` prints for the live spec: what it still does from
// where the status is.
type PlanModel struct {
	Text    string         `json:"text"`
	Rollout bool           `json:"rollout"`
	Risks   []preview.Risk `json:"risks,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// ControlModel is one button: the action, and the GitOps warning the CLI would print for it.
type ControlModel struct {
	Action  string `json:"action"`
	Warning string `json:"warning,omitempty"`
	// Enabled is false for a button that would change nothing (resume while not paused).
	Enabled bool `json:"enabled"`
}

// jsonNumber is a float64 that encodes NaN and the infinities as null: encoding/json refuses
// them, and one measurement must not stop the whole snapshot.
type jsonNumber float64

func (n jsonNumber) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// maxMessage bounds every string that comes from the cluster in a snapshot (messages, reasons,
// names): what a tab receives stays small whatever a Job or an Event writes.
const maxMessage = 1024

// cutMessage cuts s to maxMessage bytes, on a rune boundary, marking the cut with "…".
func cutMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	const mark = "…"
	end := maxMessage - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

// cutStrings cuts every string field reachable from v (a pointer) with cutMessage: the View is
// get's, with messages in a dozen places, and walking it misses none that a later field adds.
func cutStrings(v any) {
	cutValue(reflect.ValueOf(v))
}

func cutValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			cutValue(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				cutValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			cutValue(v.Index(i))
		}
	case reflect.String:
		if v.CanSet() && v.Len() > maxMessage {
			v.SetString(cutMessage(v.String()))
		}
	}
}

// dashboardActions are the controls, in the order the page shows them.
var dashboardActions = []string{"pause", "resume", "promote", "abort", "retry", "approve-contract"}

// annotateActions maps a dashboard action to the CLI's annotation action.
var annotateActions = map[string]annotateAction{
	"abort": abortAction, "retry": retryAction, "promote": promoteAction, "approve-contract": approveContractAction,
}

// buildService computes one RoutingService's model at now. steps are the shard steps the
// dashboard saw earlier (the status keeps only the current one).
func buildService(u *unstructured.Unstructured, r *routingv1alpha1.RoutingService, objs Objects, events []corev1.Event,
	steps []TimelineEntry, now time.Time) ServiceModel {
	m := ServiceModel{View: BuildView(r, objs, now)}
	m.Timeline = timeline(r, objs, events, steps)
	m.Checks = checkPlots(r)
	m.Events = eventModels(events)
	_, m.GitOps = gitops(u, pauseField.path)
	for i := range m.GitOps {
		m.GitOps[i] = oneLine(m.GitOps[i])
	}
	for _, act := range dashboardActions {
		c := ControlModel{Action: act, Enabled: true}
		switch act {
		case "pause", "resume":
			pause := act == "pause"
			owned, managed := pauseAdvice(pause)
			c.Warning = gitopsWarning(u, pauseField, owned, managed)
			c.Enabled = r.Spec.Paused != pause
		case "approve-contract":
			if r.Spec.Schema.Contract == nil || !r.Spec.Schema.Contract.RequireApproval {
				continue
			}
			fallthrough
		default:
			c.Warning = gitopsWarning(u, annotateActions[act].field(), annotateAdvice, "")
		}
		// The page shows the warning in the control's confirm(): an annotation or a field
		// manager name must not add lines to it that read as the dashboard's own.
		c.Warning = oneLine(c.Warning)
		m.Controls = append(m.Controls, c)
	}
	cutStrings(&m)
	// The plan is the plugin's own text (bounded by livePlan), not a message: cut apart.
	m.Plan = livePlan(r, objs.ReplicaSets)
	return m
}

// oneLine writes the control characters of s (newlines, carriage returns, escapes), its format
// characters (bidirectional overrides and isolates, zero-width characters) and its line and
// paragraph separators as Go escapes (\n, \u202e): a text from the cluster (an annotation's value,
// a field manager's name) stays on its line and reads in its own order.
func oneLine(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// livePlan is `kubectl schemagate plan` of the live spec against itself: the migration, the
// shards still to re-roll, the duration and the risks, from where the status is.
func livePlan(r *routingv1alpha1.RoutingService, rss []appsv1.ReplicaSet) (pm PlanModel) {
	defer func() {
		// A preview of an object the plugin cannot make sense of must not stop the feed.
		if x := recover(); x != nil {
			pm = PlanModel{Error: fmt.Sprint("cannot compute the plan: ", x)}
		}
	}()
	p := preview.ComputeWith(r, r.DeepCopy(), rss)
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		return PlanModel{Error: err.Error()}
	}
	const maxPlan = 64 << 10
	text := b.String()
	if len(text) > maxPlan {
		text = text[:maxPlan] + "\n…"
	}
	return PlanModel{Text: text, Rollout: p.Rollout, Risks: p.Risks}
}

// stepEntries are the shard steps the status reports now, with when each began: the feed keeps
// them, so a step the status has moved past stays on the timeline.
func stepEntries(r *routingv1alpha1.RoutingService) []TimelineEntry {
	var out []TimelineEntry
	for _, ss := range r.Status.Shards {
		if ss.StepStartTime == nil || ss.Step == "" {
			continue
		}
		text := fmt.Sprintf("shard %s: %s", ss.Name, ss.Step)
		if ss.StepRevision != "" {
			text += " (revision " + ss.StepRevision + ")"
		}
		level := "normal"
		switch ss.Step {
		case routingv1alpha1.ShardStepFailed, routingv1alpha1.ShardStepRollingBack, routingv1alpha1.ShardStepRolledBack:
			level = "warning"
		}
		out = append(out, TimelineEntry{Time: ss.StepStartTime.UTC(), Kind: "step", Object: "Shard/" + ss.Name, Text: text, Level: level})
	}
	return out
}

// maxTimeline bounds a timeline: its newest entries are kept.
const maxTimeline = 300

// timeline merges, with their own timestamps: each migration, check and contract Job's
// creation and end; the Events; the shard steps (the current ones and those seen before); and
// the conditions' last transitions. Oldest first.
func timeline(r *routingv1alpha1.RoutingService, objs Objects, events []corev1.Event, steps []TimelineEntry) []TimelineEntry {
	var out []TimelineEntry
	for _, j := range objs.Jobs {
		obj := "Job/" + j.Name
		what := j.Labels[rollout.LabelComponent]
		if what == "" {
			what = "job"
		}
		if v := j.Labels[rollout.LabelSchemaVersion]; v != "" {
			what += " to schema " + v
		}
		if a := j.Labels[rollout.LabelAttempt]; a != "" {
			what += ", attempt " + a
		}
		if !j.CreationTimestamp.IsZero() {
			out = append(out, TimelineEntry{Time: j.CreationTimestamp.UTC(), Kind: "job", Object: obj, Text: what + ": created", Level: "normal"})
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				out = append(out, TimelineEntry{Time: c.LastTransitionTime.UTC(), Kind: "job", Object: obj, Text: what + ": completed", Level: "normal"})
			case batchv1.JobFailed:
				text := what + ": failed"
				if c.Reason != "" {
					text += " (" + c.Reason + ")"
				}
				out = append(out, TimelineEntry{Time: c.LastTransitionTime.UTC(), Kind: "job", Object: obj, Text: text, Level: "error"})
			}
		}
	}
	for _, e := range eventModels(events) {
		level := "normal"
		if e.Type == corev1.EventTypeWarning {
			level = "warning"
		}
		text := e.Reason + ": " + e.Message
		if e.Count > 1 {
			text += fmt.Sprintf(" (×%d)", e.Count)
		}
		out = append(out, TimelineEntry{Time: e.Time, Kind: "event", Object: "Event", Text: text, Level: level})
	}
	seen := map[string]bool{}
	for _, s := range append(append([]TimelineEntry{}, steps...), stepEntries(r)...) {
		key := s.Time.String() + s.Text
		if !seen[key] {
			seen[key] = true
			out = append(out, s)
		}
	}
	for _, c := range r.Status.Conditions {
		if c.LastTransitionTime.IsZero() {
			continue
		}
		level := "normal"
		if (c.Type == routingv1alpha1.ConditionStalled && c.Status == "True") || c.Reason == routingv1alpha1.ReasonRollbackRefused {
			level = "error"
		}
		// lastTransitionTime is when the status last changed; the reason may have changed since
		// without moving it, so the entry dates the status and names the reason as it is now.
		out = append(out, TimelineEntry{Time: c.LastTransitionTime.UTC(), Kind: "condition", Object: "Condition/" + c.Type,
			Text: conditionEntryText(c.Type, string(c.Status), c.Reason), Level: level})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return kindOrder[out[i].Kind] < kindOrder[out[j].Kind]
	})
	if len(out) > maxTimeline {
		out = out[len(out)-maxTimeline:]
	}
	return out
}

// kindOrder orders entries of the same second: a Job before the Event about it, a step before
// the condition it changes.
var kindOrder = map[string]int{"job": 0, "step": 1, "event": 2, "condition": 3}

// eventModels are the Events, oldest first, each dated by its last occurrence.
func eventModels(events []corev1.Event) []EventModel {
	var out []EventModel
	for _, e := range events {
		t := eventTime(e)
		src := e.Source.Component
		if src == "" {
			src = e.ReportingController
		}
		count := e.Count
		if e.Series != nil && e.Series.Count > count {
			count = e.Series.Count
		}
		out = append(out, EventModel{Time: t.UTC(), Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count, Source: src})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

// eventTime is when an Event last happened: lastTimestamp (core/v1 events), eventTime
// (events.k8s.io), firstTimestamp, or its creation.
func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// checkPlots are the measurements of every shard check, with the thresholds its prometheus
// conditions give when checkspec.Threshold reads one (`result < 0.01`: the threshold the
// manager's schemagate_check_threshold metric reports too; an http check's value is a status
// code, with no threshold to draw).
func checkPlots(r *routingv1alpha1.RoutingService) []CheckPlot {
	spec := map[string]*routingv1alpha1.ShardCheck{}
	for i := range r.Spec.Strategy.Checks {
		spec[r.Spec.Strategy.Checks[i].Name] = &r.Spec.Strategy.Checks[i]
	}
	var out []CheckPlot
	for _, ss := range r.Status.Shards {
		for _, c := range ss.Checks {
			p := CheckPlot{Shard: ss.Name, Check: c.Name, When: string(c.When), Phase: string(c.Phase), Revision: c.Revision, Points: []PlotPoint{}}
			for _, m := range c.Measurements {
				p.Points = append(p.Points, PlotPoint{Time: m.Time.UTC(), Phase: string(m.Phase), Value: measuredValue(m.Value), Raw: m.Value, Message: m.Message})
			}
			if sc := spec[c.Name]; sc != nil && sc.Prometheus != nil {
				for _, cond := range []struct{ kind, expr string }{{"success", sc.Prometheus.SuccessCondition}, {"failure", sc.Prometheus.FailureCondition}} {
					if op, v, ok := checkspec.Threshold(cond.expr); ok {
						p.Thresholds = append(p.Thresholds, PlotThreshold{Kind: cond.kind, Op: op, Value: jsonNumber(v), Condition: cond.expr})
					}
				}
			}
			out = append(out, p)
		}
	}
	return out
}

// measuredValue is a measurement's value as a number: NaN (encoded null) when it has none.
func measuredValue(s string) jsonNumber {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return jsonNumber(math.NaN())
	}
	return jsonNumber(f)
}

// encodeSnapshot encodes s compactly (one line: one SSE data field).
func encodeSnapshot(s *Snapshot) ([]byte, error) {
	return json.Marshal(s)
}

// conditionEntryText is a condition's timeline entry, dated at its lastTransitionTime: the status
// it became then, and its reason now (Kubernetes moves that time only when the status changes).
func conditionEntryText(condType, status, reason string) string {
	if reason == "" {
		return fmt.Sprintf("%s became %s", condType, status)
	}
	return fmt.Sprintf("%s became %s (reason now %s)", condType, status, reason)
}
