package preview

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// cluster is a live object and its ReplicaSets, as the plugin reads them.
type cluster struct {
	live *routingv1alpha1.RoutingService
	rss  []appsv1.ReplicaSet
}

// serving makes the live object's spec (image, version, compatibility) the revision every shard
// serves and the stable one, with its ReplicaSets recording rng ("" "": no range annotations, a
// ReplicaSet of an earlier release), the database at db.
func serving(t *testing.T, image, version string, compat *routingv1alpha1.SchemaCompatibility, rng [2]string, db string) cluster {
	t.Helper()
	l := live(t)
	l.Spec.Template.Spec.Containers[0].Image = image
	l.Spec.Schema.Version = version
	l.Spec.Schema.Compatibility = compat
	rev := rollout.Revision(&l.Spec)
	l.Status.StableRevision, l.Status.UpdateRevision = rev, rev
	l.Status.Schema.ConfirmedVersion, l.Status.Schema.ReportedVersion = db, db
	c := cluster{live: l}
	for _, sh := range l.Spec.Shards {
		l.Status.Shards = append(l.Status.Shards, routingv1alpha1.ShardStatus{Name: sh.Name, Revision: rev, Step: routingv1alpha1.ShardStepPromoted,
			StepRevision: rev, Replicas: sh.Replicas, Updated: sh.Replicas, Ready: sh.Replicas, Available: sh.Replicas})
		rs := rollout.NewReplicaSet(l, sh, rev, sh.Replicas)
		if rng[0] != "" {
			rs.Annotations[annotationSchemaMin] = rng[0]
		}
		if rng[1] != "" {
			rs.Annotations[annotationSchemaMax] = rng[1]
		}
		c.rss = append(c.rss, *rs)
	}
	return c
}

func compat(lo, hi string) *routingv1alpha1.SchemaCompatibility {
	return &routingv1alpha1.SchemaCompatibility{Min: lo, Max: hi}
}

// v2 is the sample with image v2 needing schema version on range rng, and a contract to
// contractTo when it is set.
func v2(t *testing.T, version string, rng *routingv1alpha1.SchemaCompatibility, contractTo string) *routingv1alpha1.RoutingService {
	t.Helper()
	n := sample(t)
	n.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2"
	n.Spec.Schema.Version = version
	n.Spec.Schema.Compatibility = rng
	if contractTo != "" {
		n.Spec.Schema.Contract = &routingv1alpha1.ContractSpec{Version: contractTo, Migration: n.Spec.Schema.Migration, RollbackWindowSeconds: ptr.To(int32(600))}
		n.Spec.Schema.Contract.Migration.Template.Spec.Containers[0].Image = "registry.example/edge-router-migrate:contract"
	}
	return n
}

// The schema lifecycle in plan, each case a change someone might merge (the column type change
// of docs/schema-lifecycle.md: v1 reads a text column, v2 a typed one), pinned in
// testdata/lifecycle-<name>.golden; want are the lines a reviewer must see.
func TestLifecycleGolden(t *testing.T) {
	cases := map[string]struct {
		cluster func(t *testing.T) *cluster
		next    func(t *testing.T) *routingv1alpha1.RoutingService
		rollout bool
		want    []string
	}{
		// The naive migration: v1 runs on [1, 1] only; the migration to 2 changes the column in
		// place. Refused before its Job exists, naming v1, its range and its shards.
		"breaking-migration": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "1"), [2]string{"1", "1"}, "1")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "2"), "") }, true,
			[]string{"the migration to schema 2 is refused before its Job exists (IncompatibleRevision): revision ", " runs on [1, 1] and serves us-east, eu-west, ap-south; the stable revision, where a rollback returns"},
		},
		// The same with allowBreakingMigration: said to be downtime.
		"breaking-migration-allowed": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "1"), [2]string{"1", "1"}, "1")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService {
				n := v2(t, "2", compat("2", "2"), "")
				n.Spec.Schema.AllowBreakingMigration = true
				return n
			}, true,
			[]string{"allowBreakingMigration: the migration to schema 2 runs although revision ", "planned downtime"},
		},
		// Expand/contract: v1 runs on [1, 2], v2 on [2, 3] with a contract to 3. Expand, the
		// shards, then the contract at the earliest 10 min after the last promotion; the contract
		// closes v1's way back.
		"expand-contract": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "2"), [2]string{"1", "2"}, "1")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "3"), "3") }, true,
			[]string{"1.  expand    schema 1 → 2 before any shard", "3.  contract  schema 2 → 3 (deadline 5m10s), at the earliest 10m0s after every shard is promoted and baked",
				"closes the rollback window of revision ", "which runs on [1, 2] (serves us-east, eu-west, ap-south; the stable revision, where a rollback returns): once the contract to 3 has run, a rollback, an abort or a revert to it is refused (RollbackSafe=False)"},
		},
		// Binary first: v2 also runs on the database's schema 1.
		"binary-first": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "2"), [2]string{"1", "2"}, "1")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("1", "3"), "") }, true,
			[]string{"1.  expand    binary first: revision ", "runs on [1, 3], which contains the database's schema 1, so its shards may roll before the migration to 2, which follows"},
		},
		// v1's ReplicaSets are of an earlier release (no range recorded): assumed [1, ∞), and said
		// to be what lets the migration through.
		"assumed": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v1", "1", nil, [2]string{}, "1")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "3"), "") }, true,
			[]string{"[1, ∞) (assumed)  serves us-east, eu-west, ap-south; the stable revision, where a rollback returns (range from replicasets)",
				"declares no range: it is assumed to run on [1, ∞), so the migration to 2 is let through on that assumption"},
		},
		// The same with a contract to 3: the assumed range is what lets the contract pass v1.
		"assumed-contract": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v1", "1", nil, [2]string{}, "1")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "3"), "3") }, true,
			[]string{"declares no range: it is assumed to run on [1, ∞), so the contract to 3 is taken not to break it and a rollback to it stays allowed after the contract"},
		},
		// After the contract (the database at 3), the spec reverted to v1 in Git (its ReplicaSets
		// are kept, scaled to 0): refused.
		"revert-after-contract": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v2", "2", compat("2", "3"), [2]string{"2", "3"}, "3")
				v1 := sample(t)
				v1.Spec.Schema.Compatibility = compat("1", "2")
				rs := rollout.NewReplicaSet(c.live, c.live.Spec.Shards[0], rollout.Revision(&v1.Spec), 0)
				rs.Annotations[annotationSchemaMin], rs.Annotations[annotationSchemaMax] = "1", "2"
				c.rss = append(c.rss, *rs)
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService {
				n := sample(t)
				n.Spec.Schema.Compatibility = compat("1", "2")
				return n
			}, true,
			[]string{"the database reports schema 3, outside revision ", "range [1, 2]: a return to it is refused (RollbackRefused): every shard holds on the revision that serves it"},
		},
		// A new image of v2 after a restored backup put the database at 4, past v2's range.
		"database-ahead": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v2", "2", compat("2", "3"), [2]string{"2", "3"}, "4")
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService {
				n := v2(t, "2", compat("2", "3"), "")
				n.Spec.Template.Spec.Containers[0].Image = "registry.example/edge-router:v2.1"
				return n
			}, true,
			[]string{"the database reports schema 4, outside revision ", "range [2, 3]: DatabaseAhead: nothing scales up on it"},
		},
		// Every shard promoted, the window's end known from the live status: the contract's time.
		"contract-pending": {
			func(t *testing.T) *cluster {
				c := serving(t, "registry.example/edge-router:v2", "2", compat("2", "3"), [2]string{"2", "3"}, "2")
				c.live.Spec = v2(t, "2", compat("2", "3"), "3").Spec
				rev := rollout.Revision(&c.live.Spec)
				c.live.Status.StableRevision, c.live.Status.UpdateRevision = rev, rev
				for i := range c.live.Status.Shards {
					c.live.Status.Shards[i].Revision, c.live.Status.Shards[i].StepRevision = rev, rev
				}
				for i := range c.rss {
					c.rss[i].Labels[rollout.LabelRevision] = rev
				}
				c.live.Status.Schema.Contract = &routingv1alpha1.ContractStatus{Version: "3", EligibleTime: ptr.To(metav1.NewTime(time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)))}
				return &c
			},
			func(t *testing.T) *routingv1alpha1.RoutingService { return v2(t, "2", compat("2", "3"), "3") }, false,
			[]string{"3.  contract  schema 2 → 3 (deadline 5m10s), at the earliest 2026-12-02T03:15:00Z (the rollback window's end, from the live status)"},
		},
		// Offline: what the manifest alone says.
		"offline": {
			func(*testing.T) *cluster { return nil },
			func(t *testing.T) *routingv1alpha1.RoutingService {
				n := v2(t, "2", compat("2", "3"), "3")
				n.Spec.Schema.Contract.RequireApproval = true
				return n
			}, true,
			[]string{"1.  expand    to schema 2 before any shard (the database's version is not known here)", "then it waits for a person (kubectl schemagate approve-contract edge-router)",
				"(the live revisions are not known: a new RoutingService, or --offline)"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var l *routingv1alpha1.RoutingService
			var rss []appsv1.ReplicaSet
			cl := c.cluster(t)
			if cl != nil {
				l, rss = cl.live, cl.rss
			}
			p := ComputeWith(l, c.next(t), rss)
			if cl == nil {
				// Offline, plan decides on the manifest alone (TestDecision has the live cases).
				p = ComputeDecided(nil, c.next(t), Read{}, decideAt)
			}
			if p.Rollout != c.rollout {
				t.Fatalf("rollout %v, want %v", p.Rollout, c.rollout)
			}
			var out bytes.Buffer
			if err := p.Write(&out); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("preview lacks %q:\n%s", w, out.String())
				}
			}
			golden(t, "lifecycle-"+name, out.Bytes())
		})
	}
}

// golden compares out with testdata/<name>.golden (-update rewrites it).
func golden(t *testing.T, name string, out []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("preview differs from %s (go test ./pkg/preview -update rewrites it):\n%s", path, out)
	}
}

// Ranges from hand-edited ReplicaSet annotations or status never let a migration through: a bound
// that is not a version, a missing min, or two ReplicaSets of one revision that disagree (the
// narrowest counts).
func TestUntrustedRanges(t *testing.T) {
	for name, edit := range map[string]func(c *cluster){
		"max not a version":  func(c *cluster) { c.rss[0].Annotations[annotationSchemaMax] = "banana" },
		"min not a version":  func(c *cluster) { c.rss[1].Annotations[annotationSchemaMin] = "2; drop table" },
		"no min":             func(c *cluster) { delete(c.rss[2].Annotations, annotationSchemaMin) },
		"narrower on one RS": func(c *cluster) { c.rss[1].Annotations[annotationSchemaMax] = "1" },
		"status bound garbage": func(c *cluster) {
			for i := range c.rss {
				delete(c.rss[i].Annotations, annotationSchemaMin)
				delete(c.rss[i].Annotations, annotationSchemaMax)
				delete(c.rss[i].Annotations, annotationRequiresSchema)
			}
			c.live.Spec.Schema.Compatibility = nil
			c.live.Status.UpdateRevision = "someotherrev"
			c.live.Status.Schema.Revisions = []routingv1alpha1.RevisionSchema{{Revision: c.live.Status.StableRevision, Min: "1", Max: strings.Repeat("\xff", 100)}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "2"), [2]string{"1", "2"}, "1")
			edit(&c)
			p := ComputeWith(c.live, v2(t, "2", compat("2", "3"), ""), c.rss)
			var refused bool
			for _, r := range p.Risks {
				refused = refused || strings.Contains(r.Message, "is refused before its Job exists (IncompatibleRevision)")
			}
			if !refused {
				t.Fatalf("the migration to 2 is not flagged: %+v\n%+v", p.Risks, p.Lifecycle.Revisions)
			}
			if _, err := json.Marshal(p); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The untouched range lets it through.
	c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "2"), [2]string{"1", "2"}, "1")
	for _, r := range ComputeWith(c.live, v2(t, "2", compat("2", "3"), ""), c.rss).Risks {
		if strings.Contains(r.Message, "IncompatibleRevision") {
			t.Fatalf("v1 on [1, 2] flagged for a migration to 2: %s", r.Message)
		}
	}
}

// FuzzRanges: whatever a ReplicaSet's annotations or the status say a revision runs on, the
// preview neither panics nor lets a migration to a version outside a readable range through.
func FuzzRanges(f *testing.F) {
	f.Add("1", "2", "1", "2", "2")
	f.Add("banana", "", "", "9999999999999999999999", "3")
	f.Add("", "1", "\xff", "1.2.3", "0")
	f.Fuzz(func(t *testing.T, lo, hi, stLo, stHi, version string) {
		c := serving(t, "registry.example/edge-router:v1", "1", compat("1", "2"), [2]string{"1", "2"}, "1")
		c.rss[0].Annotations[annotationSchemaMin], c.rss[0].Annotations[annotationSchemaMax] = lo, hi
		c.live.Status.Schema.Revisions = []routingv1alpha1.RevisionSchema{{Revision: c.live.Status.StableRevision, Min: stLo, Max: stHi}}
		next := v2(t, "2", nil, "")
		next.Spec.Schema.Version = version
		p := ComputeWith(c.live, next, c.rss)
		if err := p.Write(&bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		if !p.Migration.Runs {
			return
		}
		for _, r := range p.Lifecycle.Revisions {
			if r.Revision == p.NextRevision || !(len(r.Shards) > 0 || r.Stable) || r.contains(version) {
				continue
			}
			flagged := false
			for _, k := range p.Risks {
				flagged = flagged || strings.Contains(k.Message, "IncompatibleRevision") && strings.Contains(k.Message, r.Revision)
			}
			if !flagged {
				t.Fatalf("revision %s on %s, migration to %q not flagged: %+v", r.Revision, r.Text(), version, p.Risks)
			}
		}
	})
}
