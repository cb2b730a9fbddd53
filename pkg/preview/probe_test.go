package preview

import (
	"testing"

	"github.com/schemagate/schemagate/pkg/schemadiff"
)

func TestDecideProbe(t *testing.T) {
	breaking := schemadiff.NewReport([]schemadiff.Change{{Class: schemadiff.Breaking, Kind: schemadiff.ColumnType, Table: "routes", Column: "upstream", From: "text", To: "jsonb"}})
	conditional := schemadiff.NewReport([]schemadiff.Change{{Class: schemadiff.Conditional, Kind: schemadiff.TriggerAdded, Table: "routes"}})
	v1Assumed := RevisionRange{Revision: "v1", Min: "1", Assumed: true, Shards: []string{"us-east", "eu-west"}, Stable: true}
	v1Declared := RevisionRange{Revision: "v1", Min: "1", Max: "2", Stable: true}
	v1OnlyOne := RevisionRange{Revision: "v1", Min: "1", Max: "1", Stable: true}
	for _, c := range []struct {
		name                                       string
		report                                     *schemadiff.Report
		revisions                                  []RevisionRange
		broken, contradicted, assumed, noRollbacks int
	}{
		{"the incident: breaking, v1 assumed", breaking, []RevisionRange{v1Assumed}, 1, 0, 0, 1},
		{"breaking, v1 declared on [1, 2]: contradicted, not broken", breaking, []RevisionRange{v1Declared}, 0, 1, 0, 0},
		{"breaking, v1 declared on [1, 1]: the gate refuses it already", breaking, []RevisionRange{v1OnlyOne}, 0, 0, 0, 1},
		{"conditional, v1 assumed: passes on the assumption", conditional, []RevisionRange{v1Assumed}, 0, 0, 1, 0},
		{"conditional, v1 declared", conditional, []RevisionRange{v1Declared}, 0, 0, 0, 0},
		{"the manifest's own revision is not judged", breaking, nil, 0, 0, 0, 0},
	} {
		o := DecideProbe(c.report, "1", "2", c.revisions, nil)
		if len(o.Broken) != c.broken || len(o.Contradicted) != c.contradicted || len(o.Assumed) != c.assumed || len(o.ClosesRollback) != c.noRollbacks {
			t.Errorf("%s: broken %d, contradicted %d, assumed %d, closes rollback %d", c.name, len(o.Broken), len(o.Contradicted), len(o.Assumed), len(o.ClosesRollback))
		}
		for _, r := range o.Broken {
			if r.Max != "1" {
				t.Errorf("%s: %s narrowed to %s", c.name, r.Revision, r.Text())
			}
		}
	}
}

// A contract judges the revision that serves through it; the revisions it retires only lose their
// way back.
func TestDecideProbeForAContract(t *testing.T) {
	dropped := schemadiff.NewReport([]schemadiff.Change{{Class: schemadiff.Breaking, Kind: schemadiff.ColumnDropped, Table: "routes", Column: "upstream"}})
	own := RevisionRange{Revision: "v3", Min: "2", Max: "3", Source: "manifest"}
	retired := RevisionRange{Revision: "v2", Min: "2", Assumed: true, Shards: []string{"us-east"}, Stable: true}
	o := DecideProbe(dropped, "2", "3", []RevisionRange{own}, []RevisionRange{retired})
	if len(o.Broken) != 0 || len(o.Contradicted) != 1 || len(o.ClosesRollback) != 1 || o.ClosesRollback[0].Revision != "v2" {
		t.Fatalf("outcome %+v", o)
	}
	if f := o.Findings(); f != "closes the way back to v2" {
		t.Fatalf("findings %q", f)
	}
	own.Max, own.Assumed = "", true
	if o := DecideProbe(dropped, "2", "3", []RevisionRange{own}, []RevisionRange{retired}); len(o.Broken) != 1 || o.Findings() != "breaks v3; closes the way back to v2" {
		t.Fatalf("an assumed own range: %+v, %q", o, o.Findings())
	}
}
