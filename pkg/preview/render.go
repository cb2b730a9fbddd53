package preview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Write prints p for people: what happens, in the order it happens, then the risks.
func (p Preview) Write(w io.Writer) error {
	var b strings.Builder
	against := "compared with the live object"
	if !p.Live {
		against = "not in the cluster (or --offline): compared with nothing"
	}
	name := p.Name
	if p.Namespace != "" {
		name = p.Namespace + "/" + name
	}
	fmt.Fprintf(&b, "RoutingService %s, %s\n", name, against)
	switch {
	case !p.Live:
		fmt.Fprintf(&b, "Revision:  %s: every shard is created, one at a time\n", p.NextRevision)
	case p.Rollout:
		rerolls, existing := 0, 0
		for _, s := range p.Shards {
			if s.Action != "create" && s.Action != "remove" {
				existing++
			}
			if s.Action == "re-roll" {
				rerolls++
			}
		}
		which := "every shard re-rolls"
		if rerolls < existing {
			which = fmt.Sprintf("%d of %d shards re-roll", rerolls, existing)
		}
		if p.CurrentRevision == p.NextRevision {
			// The same revision, whose rollout this apply lets go on (a fixed failed migration).
			fmt.Fprintf(&b, "Revision:  %s (unchanged): its rollout goes on; %s, one at a time\n", p.CurrentRevision, which)
		} else {
			fmt.Fprintf(&b, "Revision:  %s → %s: a rollout; %s, one at a time\n", p.CurrentRevision, p.NextRevision, which)
		}
	case p.CurrentRevision != p.NextRevision:
		fmt.Fprintf(&b, "Revision:  %s → %s: no rollout, no pod replaced (every shard already serves %s)\n", p.CurrentRevision, p.NextRevision, p.NextRevision)
	default:
		fmt.Fprintf(&b, "Revision:  %s (unchanged): no rollout, no pod replaced\n", p.CurrentRevision)
	}
	m := p.Migration
	switch {
	case m.Attempt > 0:
		fmt.Fprintf(&b, "Migration: schema %s → %s: attempt %d runs first (spec.schema.migration.template changed since attempt %d failed: %s; deadline %s); no pod needing %s runs before it is confirmed\n",
			orUnknown(m.From), m.To, m.Attempt, m.Attempt-1, m.Failed, m.Deadline, m.To)
	case !m.Runs:
		fmt.Fprintf(&b, "Migration: none (schema %s confirmed; %s required)\n", m.From, m.To)
	case p.Decision != nil && !p.Decision.StartsMigration && p.Decision.Refusal() != "":
		fmt.Fprintf(&b, "Migration: schema %s → %s: refused, no Job is created (see the manager's first decision)\n", orUnknown(m.From), m.To)
	case p.Decision != nil && p.Decision.BinaryFirst, p.Decision == nil && p.Lifecycle.BinaryFirst:
		fmt.Fprintf(&b, "Migration: schema %s → %s: a Job that may follow the shards (binary first, see Lifecycle; deadline %s)\n", m.From, m.To, m.Deadline)
	case m.From == "":
		fmt.Fprintf(&b, "Migration: a Job brings the database to schema %s first, unless a report says it is there (deadline %s)\n", m.To, m.Deadline)
	default:
		fmt.Fprintf(&b, "Migration: schema %s → %s: a Job runs first (deadline %s); no pod needing %s runs before it is confirmed\n", m.From, m.To, m.Deadline, m.To)
	}
	b.WriteString("Shards, in promotion order:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, s := range p.Shards {
		order := fmt.Sprintf("%d.", s.Order)
		if s.Order == 0 {
			order = "-"
		}
		what := s.Action
		switch s.Action {
		case "re-roll":
			replaced := pods(s.Replaced) + " replaced"
			if s.LiveReplicas != s.Replicas {
				replaced = fmt.Sprintf("%s replaced by %d", pods(s.Replaced), s.Replicas)
			}
			what = fmt.Sprintf("re-roll: %s, at least %d of %d available, surge %d", replaced, s.Floor, s.Replicas, s.Surge)
		case "create":
			what = fmt.Sprintf("create: %d pods", s.Replicas)
		case "scale":
			what = fmt.Sprintf("scale: %d → %d pods", s.LiveReplicas, s.Replicas)
		case "remove":
			what = fmt.Sprintf("remove: %d pods deleted at once", s.Replicas)
			if s.LiveCluster != "" {
				what = fmt.Sprintf("remove: %s deleted in %s once the rollout is complete", pods(s.Replicas), s.LiveCluster)
			}
		case "none":
			what = "unchanged"
		}
		dur := ""
		if s.Duration.Max > 0 {
			dur = s.Duration.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", order, s.Name, what, dur)
	}
	_ = tw.Flush()
	if p.usesClusters() {
		p.writeClusters(&b)
	}
	if p.Duration.Max > 0 {
		fmt.Fprintf(&b, "Duration:  %s (min: bake, checks and minReadySeconds; max: every deadline)\n", p.Duration)
	}
	if p.Lifecycle.Shown {
		p.writeLifecycle(&b)
	}
	if len(p.Changes) > 0 {
		b.WriteString("Other changes:\n")
		for _, c := range p.Changes {
			fmt.Fprintf(&b, "  - %s\n", c)
		}
	}
	if p.Decision != nil || p.Undecided != "" {
		p.writeDecision(&b)
	}
	if p.Probe != nil {
		p.Probe.write(&b)
	}
	if len(p.Risks) > 0 {
		b.WriteString("Risks:\n")
		for _, r := range p.Risks {
			fmt.Fprintf(&b, "  ! %s: %s\n", r.Field, r.Message)
		}
	}
	lines := strings.Split(b.String(), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

// ClusterText names a shard's cluster for people: its name, or "this cluster" (the
// RoutingService's own) for "".
func ClusterText(name string) string {
	if name == "" {
		return "this cluster"
	}
	return name
}

// usesClusters: a shard of the manifest or of the live spec names a cluster.
func (p Preview) usesClusters() bool {
	for _, s := range p.Shards {
		if s.Cluster != "" || s.LiveCluster != "" {
			return true
		}
	}
	return false
}

// writeClusters says which clusters the apply writes to, each with the shards it changes there,
// in promotion order, then the clusters it leaves alone.
func (p Preview) writeClusters(b *strings.Builder) {
	var touched, untouched []string
	shards := map[string][]string{}
	for _, s := range p.Shards {
		if !s.Touches() {
			continue
		}
		if _, ok := shards[s.Cluster]; !ok {
			touched = append(touched, s.Cluster)
		}
		shards[s.Cluster] = append(shards[s.Cluster], s.Name)
	}
	alone := map[string][]string{}
	for _, s := range p.Shards {
		if _, ok := shards[s.Cluster]; ok || s.Touches() {
			continue
		}
		if _, ok := alone[s.Cluster]; !ok {
			untouched = append(untouched, s.Cluster)
		}
		alone[s.Cluster] = append(alone[s.Cluster], s.Name)
	}
	list := func(names []string, of map[string][]string) string {
		var out []string
		for _, c := range names {
			out = append(out, fmt.Sprintf("%s (%s)", ClusterText(c), strings.Join(of[c], ", ")))
		}
		return strings.Join(out, ", ")
	}
	line := "no cluster: no shard changes"
	if len(touched) > 0 {
		line = list(touched, shards)
	}
	if len(untouched) > 0 {
		line += "; not " + list(untouched, alone)
	}
	fmt.Fprintf(b, "Clusters:  the apply touches %s\n", line)
}

// pods is "1 pod" or "n pods".
func pods(n int32) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// String is "min – max".
func (r Range) String() string { return fmt.Sprintf("%s – %s", round(r.Min), round(r.Max)) }

func round(d time.Duration) time.Duration { return d.Round(time.Second) }

// writeLifecycle prints the phases of the schema lifecycle in order, then the revisions' ranges.
func (p Preview) writeLifecycle(b *strings.Builder) {
	l := p.Lifecycle
	m := p.Migration
	b.WriteString("Lifecycle, in order:\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	expand := ""
	switch {
	case m.Attempt > 0:
		expand = fmt.Sprintf("attempt %d of the migration to schema %s (the template changed since attempt %d failed)", m.Attempt, m.To, m.Attempt-1)
	case !m.Runs:
		expand = fmt.Sprintf("none: the database is at schema %s (%s required)", m.From, m.To)
	case l.BinaryFirst:
		expand = fmt.Sprintf("binary first: revision %s runs on %s, which contains the database's schema %s, so its shards may roll before the migration to %s, which follows",
			l.Next.Revision, l.Next.Text(), l.Database, m.To)
	case l.Database == "":
		expand = fmt.Sprintf("to schema %s before any shard (the database's version is not known here)", m.To)
	default:
		expand = fmt.Sprintf("schema %s → %s before any shard", l.Database, m.To)
	}
	fmt.Fprintf(tw, "  1.\texpand\t%s\n", expand)
	var rolls []string
	for _, s := range p.Shards {
		if s.Action == "re-roll" || s.Action == "create" {
			rolls = append(rolls, s.Name)
		}
	}
	roll := "no shard re-rolls"
	if len(rolls) > 0 {
		roll = strings.Join(rolls, ", ") + ", one at a time (the shards above)"
	}
	fmt.Fprintf(tw, "  2.\troll out\t%s\n", roll)
	contract := "none (spec.schema.contract is not set)"
	if c := l.Contract; c != nil {
		switch {
		case c.Done:
			contract = fmt.Sprintf("done: the database reports schema %s", c.Version)
		case c.Earliest != nil:
			contract = fmt.Sprintf("schema %s → %s (deadline %s), at the earliest %s (the rollback window's end, from the live status)", c.From, c.Version, c.Deadline, c.Earliest.UTC().Format(time.RFC3339))
		default:
			contract = fmt.Sprintf("schema %s → %s (deadline %s), at the earliest %s after every shard is promoted and baked: %s after the apply",
				c.From, c.Version, c.Deadline, round(c.Window), c.AfterApply)
		}
		if c.RequireApproval && !c.Done {
			contract += "; then it waits for a person (kubectl schemagate approve-contract " + p.Name + ")"
		}
	}
	fmt.Fprintf(tw, "  3.\tcontract\t%s\n", contract)
	_ = tw.Flush()
	b.WriteString("Schema ranges:\n")
	tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\t%s\tthis manifest\n", l.Next.Revision, l.Next.Text())
	for _, r := range l.Revisions {
		if r.Revision == l.Next.Revision {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s (range from %s)\n", r.Revision, r.Text(), r.role(), r.Source)
	}
	if !p.Live {
		fmt.Fprintf(tw, "  (the live revisions are not known: a new RoutingService, or --offline)\n")
	}
	_ = tw.Flush()
}

// orUnknown is v, or "unknown" when empty.
func orUnknown(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}
