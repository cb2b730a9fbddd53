package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// palette colours text with ANSI SGR codes when on; off, it returns text as it is.
type palette struct{ on bool }

const (
	sgrRed    = "31"
	sgrGreen  = "32"
	sgrYellow = "33"
	sgrCyan   = "36"
	sgrBold   = "1"
	sgrDim    = "2"
)

func (p palette) paint(code, s string) string {
	if !p.on || code == "" || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// stateColor is the colour of a state word anywhere in the tree: green for done and healthy,
// yellow for on the way, red for failed or needing a person.
func stateColor(word string) string {
	switch word {
	case StateReady, "Complete", "Completed", "Succeeded", "Promoted", "Passed":
		return sgrGreen
	case StateStalled, "Failed", "Error", "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "Inconclusive",
		"RolledBack", "OOMKilled", "CreateContainerConfigError", "DeadlineExceeded":
		return sgrRed
	case StateProgressing, StatePaused, StatePending, StateNotReady, "Baking", "RollingBack", "Running", "Suspended",
		"Expanding", "RollingOut", "RollbackWindow", "Contracting",
		"ContainerCreating", "Terminating", "PodInitializing":
		return sgrYellow
	}
	if strings.HasPrefix(word, "ExitCode:") {
		return sgrRed
	}
	return ""
}

// reasonColor is red for the reasons of the schema lifecycle that need a person at once: a
// rollback refused because the database is past the revision's range, or a database ahead of a
// serving revision.
func reasonColor(reason string) string {
	switch reason {
	case routingv1alpha1.ReasonRollbackRefused, routingv1alpha1.ReasonDatabaseAhead, routingv1alpha1.ReasonRollbackUnsafe:
		return sgrRed
	}
	return ""
}

// cell is one column of a row: its text and colour, the colour applied after padding is computed
// on the text alone (escape codes take no room on screen).
type cell struct {
	text  string
	color string
}

// table prints rows with columns padded to the widest text, two spaces apart; the last column is
// not padded.
type table struct {
	header []string
	rows   [][]cell
}

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, p palette) {
	n := len(t.header)
	for _, r := range t.rows {
		n = max(n, len(r))
	}
	width := make([]int, n)
	for i, h := range t.header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c.text))
		}
	}
	line := func(cells []cell) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(p.paint(c.color, c.text))
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.text)))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if len(t.header) > 0 {
		hs := make([]cell, len(t.header))
		for i, h := range t.header {
			hs[i] = cell{text: h, color: sgrBold}
		}
		line(hs)
	}
	for _, r := range t.rows {
		line(r)
	}
}

// node is one line of the tree: its cells (the first is prefixed with the tree's branches) and
// its children.
type node struct {
	cells    []cell
	children []*node
}

func (n *node) add(c *node) *node {
	n.children = append(n.children, c)
	return c
}

// flatten adds n and its descendants to t, drawing the branches in front of the first cell.
func flatten(t *table, n *node, prefix, branch string) {
	cells := append([]cell{}, n.cells...)
	cells[0].text = prefix + branch + cells[0].text
	t.add(cells...)
	next := prefix
	switch branch {
	case "├─ ":
		next += "│  "
	case "└─ ":
		next += "   "
	}
	for i, c := range n.children {
		b := "├─ "
		if i == len(n.children)-1 {
			b = "└─ "
		}
		flatten(t, c, next, b)
	}
}

// renderView writes the header and the tree of v.
func renderView(w io.Writer, v *View, p palette) {
	label := func(s string) string { return p.paint(sgrBold, fmt.Sprintf("%-11s", s)) }
	fmt.Fprintf(w, "%s %s\n", label("Name:"), v.Name)
	fmt.Fprintf(w, "%s %s\n", label("Namespace:"), v.Namespace)
	status := p.paint(stateColor(v.State), v.State)
	if why := nonEmpty(v.Condition, p.paint(reasonColor(v.Reason), v.Reason)); len(why) > 0 {
		status += " (" + strings.Join(why, ", ") + ")"
	}
	if v.Message != "" {
		status += ": " + v.Message
	}
	fmt.Fprintf(w, "%s %s\n", label("Status:"), status)
	fmt.Fprintf(w, "%s %d (observed %d), %s\n", label("Generation:"), v.Generation, v.ObservedGeneration, pausedText(v.Paused))
	fmt.Fprintf(w, "%s %s\n", label("Schema:"), schemaText(v.Schema))
	if v.Schema.Lifecycle != nil {
		renderLifecycle(w, v.Schema.Lifecycle, p, label)
	}
	fmt.Fprintf(w, "%s stable %s%s, update %s%s\n", label("Revisions:"), orNone(v.Revisions.Stable), imagesNote(v.Revisions.StableImages),
		orNone(v.Revisions.Update), imagesNote(v.Revisions.UpdateImages))
	fmt.Fprintf(w, "%s %s\n", label("Strategy:"), v.Strategy.Summary)
	fmt.Fprintf(w, "%s %s\n", label("Progress:"), v.Progress.Summary)
	if f := v.Failure; f != nil {
		where := ""
		if f.Shard != "" {
			where = " in shard " + f.Shard
		}
		fmt.Fprintf(w, "%s %s%s, revision %s, %s ago\n", label("Failure:"), p.paint(sgrRed, f.Reason), where, f.Revision, f.Age)
	}
	fmt.Fprintln(w)

	root := &node{cells: []cell{{text: "RoutingService/" + v.Name}, {text: v.State, color: stateColor(v.State)},
		{text: rootDetails(v)}, {text: v.Age}}}
	for _, j := range v.Jobs {
		root.add(jobNode(j))
	}
	for _, s := range v.Shards {
		sn := root.add(shardNode(s, p))
		if s.Cluster != nil {
			sn.add(clusterNode(s.Cluster, v.Namespace))
		}
		for _, c := range s.Checks {
			cn := sn.add(checkNode(c))
			if c.Job != nil {
				cn.add(jobNode(*c.Job))
			}
		}
		for _, j := range s.Jobs {
			sn.add(jobNode(j))
		}
		for _, rs := range s.RSs {
			rn := sn.add(rsNode(rs))
			for _, pod := range rs.Pods {
				rn.add(podNode(pod))
			}
		}
		for _, pod := range s.Pods {
			sn.add(podNode(pod))
		}
	}
	t := &table{header: []string{"NAME", "STATUS", "DETAILS", "AGE"}}
	flatten(t, root, "", "")
	t.write(w, p)
}

func rootDetails(v *View) string {
	parts := []string{v.Progress.Summary}
	if v.Revisions.Update != "" {
		parts = append(parts, "update "+v.Revisions.Update)
	}
	return strings.Join(parts, "; ")
}

func pausedText(paused bool) string {
	if paused {
		return "paused"
	}
	return "not paused"
}

func schemaText(s SchemaView) string {
	parts := []string{"required " + s.Required + ", confirmed " + orNone(s.Confirmed)}
	if s.ConfirmedBy != "" {
		parts[0] += " by " + s.ConfirmedBy
	}
	if s.Reported != "" && s.Reported != s.Confirmed {
		parts = append(parts, "reported "+s.Reported+" by "+s.ReportedBy)
	}
	if s.MigrationJob != "" {
		parts = append(parts, fmt.Sprintf("migration Job %s (attempt %d)", s.MigrationJob, s.Attempt))
	} else {
		parts = append(parts, "no migration Job")
	}
	if s.CheckJob != "" {
		parts = append(parts, "check Job "+s.CheckJob)
	}
	if p := s.Probe; p != nil {
		probe := fmt.Sprintf("probe Job %s: %s", p.Job, p.Verdict)
		if p.Changes != "" {
			probe += " (" + p.Changes + ")"
		}
		parts = append(parts, probe)
	}
	if s.Gate != "" {
		parts = append(parts, "SchemaReady="+s.Gate)
	}
	if s.Evidence != "" && s.Evidence != "Report" {
		parts = append(parts, "evidence "+s.Evidence)
	}
	return strings.Join(parts, "; ")
}

func jobNode(j JobView) *node {
	var what string
	switch j.Component {
	case "migration":
		what = fmt.Sprintf("migration to schema %s, attempt %s", j.SchemaVersion, j.Attempt)
	case "check":
		what = fmt.Sprintf("schema check for %s, #%s", j.SchemaVersion, j.Attempt)
	case "probe":
		what = fmt.Sprintf("probe of the migration to schema %s, attempt %s", j.SchemaVersion, j.Attempt)
	case "contract":
		what = fmt.Sprintf("contract to schema %s, attempt %s", j.SchemaVersion, j.Attempt)
	default:
		what = "shard check"
	}
	var counts []string
	if j.Active > 0 {
		counts = append(counts, fmt.Sprintf("%d active", j.Active))
	}
	if j.Succeeded > 0 {
		counts = append(counts, fmt.Sprintf("%d succeeded", j.Succeeded))
	}
	if j.Failed > 0 {
		counts = append(counts, fmt.Sprintf("%d failed", j.Failed))
	}
	details := what
	if len(counts) > 0 {
		details += "; " + strings.Join(counts, ", ")
	}
	if j.Duration != "" {
		switch j.Status {
		case "Complete", "Failed":
			details += "; took " + j.Duration
		default:
			details += "; running for " + j.Duration
		}
	}
	if j.Status == "Failed" && j.Reason != "" {
		details += "; " + j.Reason
	}
	n := &node{cells: []cell{{text: "Job/" + j.Name}, {text: j.Status, color: stateColor(j.Status)}, {text: details}, {text: j.Age}}}
	for _, p := range j.Pods {
		n.add(podNode(p))
	}
	return n
}

func podNode(p PodView) *node {
	status := p.Status
	color := stateColor(status)
	if status == "Running" && p.IsReady {
		color = sgrGreen
	}
	state := p.Ready + " ready"
	if p.Finished {
		state = p.Exited + " exited"
	}
	details := fmt.Sprintf("%s, %d %s", state, p.Restarts, plural(int(p.Restarts), "restart", "restarts"))
	if p.Node != "" {
		details += ", on " + p.Node
	}
	if p.Message != "" {
		details += ": " + p.Message
	}
	return &node{cells: []cell{{text: "Pod/" + p.Name}, {text: status, color: color}, {text: details}, {text: p.Age}}}
}

func shardNode(s ShardView, p palette) *node {
	step := s.Step
	if step == "" {
		step = "Unknown"
	}
	if !s.InSpec {
		step = "NotInSpec"
	}
	parts := []string{fmt.Sprintf("%d replicas: %d updated, %d ready, %d available", s.Replicas, s.Updated, s.Ready, s.Available)}
	if s.Scaling != nil {
		parts = append(parts, s.Scaling.text())
	}
	if s.Serving != "" {
		parts = append(parts, "serving "+s.Serving)
	}
	if s.Timer != nil {
		t := s.Timer.Text
		if s.Timer.Kind == "deadline" && s.Timer.RemainingSeconds <= 0 {
			t = p.paint(sgrRed, t)
		}
		parts = append(parts, t)
	}
	if s.Failure != nil {
		parts = append(parts, "failed: "+s.Failure.Reason)
	}
	name := "Shard/" + s.Name
	return &node{cells: []cell{{text: name, color: currentColor(s.Current)}, {text: step, color: stateColor(step)},
		{text: strings.Join(parts, "; ")}, {text: s.StepAge}}}
}

func currentColor(current bool) string {
	if current {
		return sgrCyan
	}
	return ""
}

func checkNode(c CheckView) *node {
	parts := []string{c.Provider}
	if c.Provider == "" {
		parts = parts[:0]
	}
	parts = append(parts, strings.ToLower(c.When[:1])+c.When[1:])
	if c.When == "BeforeStart" {
		parts[len(parts)-1] = "before start"
	}
	if c.DryRun {
		parts = append(parts, "dry run")
	}
	details := strings.Join(parts, ", ")
	if c.Required > 0 || c.Count > 0 {
		var split []string
		for _, x := range []struct {
			n    int32
			what string
		}{{c.Successful, "successful"}, {c.Failed, "failed"}, {c.Inconclusive, "inconclusive"}, {c.Errors, "errors"}} {
			if x.n > 0 {
				split = append(split, fmt.Sprintf("%d %s", x.n, x.what))
			}
		}
		m := fmt.Sprintf("%d", c.Count)
		if c.Required > 0 {
			m += fmt.Sprintf("/%d", c.Required)
		}
		m += " measurements"
		if len(split) > 0 {
			m += " (" + strings.Join(split, ", ") + ")"
		}
		details += "; " + m
	}
	if l := c.Last; l != nil {
		last := "last " + l.Phase
		if l.Value != "" {
			last += " " + l.Value
		}
		if l.Message != "" {
			last += " (" + l.Message + ")"
		}
		details += "; " + last + ", " + l.Age + " ago"
	} else if c.Message != "" && c.Job == nil {
		details += "; " + c.Message
	}
	return &node{cells: []cell{{text: "Check/" + c.Name}, {text: c.Phase, color: stateColor(c.Phase)}, {text: details}, {text: c.StartAge}}}
}

func rsNode(rs RSView) *node {
	tags := strings.Join(rs.Tags, ", ")
	if tags == "" {
		tags = "old"
	}
	details := fmt.Sprintf("revision %s: %d desired, %d current, %d ready, %d available", rs.Revision, rs.Desired, rs.Current, rs.Ready, rs.Available)
	if len(rs.Images) > 0 {
		details += "; " + strings.Join(rs.Images, ", ")
	}
	color := ""
	if rs.Desired > 0 && rs.Available >= rs.Desired {
		color = sgrGreen
	} else if rs.Desired > 0 {
		color = sgrYellow
	}
	return &node{cells: []cell{{text: "ReplicaSet/" + rs.Name}, {text: tags, color: color}, {text: details}, {text: rs.Age}}}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// imagesNote is " (image, image)" for a revision's images, or "" when they are unknown.
func imagesNote(images []string) string {
	if len(images) == 0 {
		return ""
	}
	return " (" + strings.Join(images, ", ") + ")"
}
