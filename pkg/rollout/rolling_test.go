package rollout

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestResolveBudget(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int32) *intstr.IntOrString { v := intstr.FromInt32(i); return &v }
	cases := []struct {
		name           string
		replicas       int32
		surge, unavail *intstr.IntOrString
		wantS, wantU   int32
	}{
		{"defaults 25%/0 of 3: surge rounds up", 3, nil, nil, 1, 0},
		{"25% of 10 → 3 surge", 10, pct("25%"), num(0), 3, 0},
		{"unavailable 25% of 10 rounds down to 2", 10, num(0), pct("25%"), 0, 2},
		{"both zero → surge 1", 4, num(0), num(0), 1, 0},
		{"unavailable capped at replicas", 2, num(1), num(5), 1, 2},
		{"zero replicas", 0, pct("25%"), num(0), 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := ResolveBudget(c.replicas, c.surge, c.unavail)
			if b.Surge != c.wantS || b.Unavailable != c.wantU {
				t.Fatalf("got surge %d unavailable %d, want %d %d", b.Surge, b.Unavailable, c.wantS, c.wantU)
			}
		})
	}
}

func TestStep(t *testing.T) {
	cases := []struct {
		name       string
		b          Budget
		target     Counts
		others     []Counts
		wantTarget int32
		wantOthers []int32
	}{
		{"start: surge one new pod, keep all old", Budget{3, 1, 0}, Counts{0, 0}, []Counts{{3, 3}}, 1, []int32{3}},
		{"new pod not yet available: nothing to scale down", Budget{3, 1, 0}, Counts{1, 0}, []Counts{{3, 3}}, 1, []int32{3}},
		{"new pod available: one old down", Budget{3, 1, 0}, Counts{1, 1}, []Counts{{3, 3}}, 1, []int32{2}},
		{"room again: new up, no spare availability", Budget{3, 1, 0}, Counts{1, 1}, []Counts{{2, 2}}, 2, []int32{2}},
		{"last step", Budget{3, 1, 0}, Counts{3, 3}, []Counts{{1, 1}}, 3, []int32{0}},
		{"maxUnavailable 1 lets old go first", Budget{4, 0, 1}, Counts{0, 0}, []Counts{{4, 4}}, 0, []int32{3}},
		{"unhealthy old pods are removed without using the budget", Budget{3, 1, 0}, Counts{1, 1}, []Counts{{3, 2}}, 1, []int32{2}},
		{"two old revisions scale down oldest first", Budget{3, 1, 0}, Counts{2, 2}, []Counts{{1, 1}, {1, 1}}, 2, []int32{0, 1}},
		{"broken new revision never takes old pods", Budget{3, 1, 0}, Counts{1, 0}, []Counts{{3, 3}}, 1, []int32{3}},
		{"rollback: stable up to replicas at once, one unhealthy pod goes", Budget{3, 3, 0}, Counts{1, 1}, []Counts{{3, 0}}, 3, []int32{2}},
		{"rollback: failed pods go once stable is available", Budget{3, 3, 0}, Counts{3, 3}, []Counts{{1, 0}}, 3, []int32{0}},
		{"rollback never removes the last available pods", Budget{3, 3, 0}, Counts{3, 0}, []Counts{{3, 3}}, 3, []int32{3}},
		{"scale down a shard", Budget{2, 1, 0}, Counts{3, 3}, nil, 2, []int32{}},
		{"S-18: shard grew 3→8 mid-step: the serving set grows, not the unproven revision", Budget{8, 2, 0}, Counts{1, 0}, []Counts{{3, 3}}, 1, []int32{8}},
		{"S-18: shard shrank 8→3 mid-step: unproven pods go first, never above replicas+surge", Budget{3, 1, 0}, Counts{3, 0}, []Counts{{3, 3}}, 1, []int32{3}},
		{"new revision lost an available pod: the serving set covers the floor again", Budget{3, 1, 0}, Counts{2, 1}, []Counts{{1, 1}}, 2, []int32{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gotT, gotO := Step(c.b, c.target, c.others)
			if gotT != c.wantTarget || fmt.Sprint(gotO) != fmt.Sprint(c.wantOthers) {
				t.Fatalf("Step = %d %v, want %d %v", gotT, gotO, c.wantTarget, c.wantOthers)
			}
		})
	}
}

// TestStepConverges runs Step to convergence against a model where every scaled-up pod becomes
// available at the next step, and checks availability never drops below the minimum (I2).
func TestStepConverges(t *testing.T) {
	for _, b := range []Budget{{3, 1, 0}, {10, 3, 0}, {10, 0, 2}, {1, 1, 0}, {7, 2, 3}} {
		target, old := Counts{}, Counts{b.Replicas, b.Replicas}
		for i := 0; i < 100 && !(target.Spec == b.Replicas && target.Available == b.Replicas && old.Spec == 0); i++ {
			nt, no := Step(b, target, []Counts{old})
			// Scale-downs take effect at once; scale-ups become available at the next step.
			target = Counts{nt, target.Spec}
			old = Counts{no[0], min(no[0], old.Available)}
			if avail := target.Available + old.Available; avail < b.MinAvailable() {
				t.Fatalf("budget %+v step %d: %d available < %d", b, i, avail, b.MinAvailable())
			}
			if total := target.Spec + old.Spec; total > b.Replicas+b.Surge {
				t.Fatalf("budget %+v step %d: %d pods > replicas+surge", b, i, total)
			}
		}
		if target.Spec != b.Replicas || old.Spec != 0 {
			t.Fatalf("budget %+v did not converge: target %+v old %+v", b, target, old)
		}
	}
}

func TestResize(t *testing.T) {
	cases := []struct {
		name string
		b    Budget
		live []Counts
		want []int32
	}{
		{"one revision serves: it gets replicas", Budget{5, 2, 0}, []Counts{{3, 3}}, []int32{5}},
		{"one revision, fewer", Budget{1, 1, 0}, []Counts{{3, 3}}, []int32{1}},
		{"halted mid-step, grown: the serving set grows", Budget{8, 2, 0}, []Counts{{3, 3}, {1, 0}}, []int32{8, 1}},
		{"halted mid-step, shrunk: unproven pods first, then spare old ones", Budget{3, 1, 0}, []Counts{{8, 8}, {1, 0}}, []int32{4, 0}},
		{"within replicas..replicas+surge: unchanged", Budget{3, 1, 0}, []Counts{{3, 3}, {1, 0}}, []int32{3, 1}},
		{"nothing available: nothing to grow", Budget{5, 1, 0}, []Counts{{1, 0}, {1, 0}}, []int32{1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Resize(c.b, c.live); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("Resize = %v, want %v", got, c.want)
			}
		})
	}
}

// A revision whose schema is not confirmed (the gate closed mid-step) keeps its pods and counts
// for the floor; it never grows, and nothing else moves unless the replicas changed.
func TestResizeWithAClosedGate(t *testing.T) {
	cases := []struct {
		name  string
		b     Budget
		live  []Counts
		grows []bool
		want  []int32
	}{
		{"end of step: nothing moves", Budget{3, 1, 0}, []Counts{{1, 1}, {3, 3}}, []bool{true, false}, []int32{1, 3}},
		{"mid-step: nothing moves", Budget{3, 1, 0}, []Counts{{2, 2}, {2, 2}}, []bool{true, false}, []int32{2, 2}},
		{"grown: only the confirmed revision grows", Budget{5, 2, 0}, []Counts{{1, 1}, {3, 3}}, []bool{true, false}, []int32{2, 3}},
		{"shrunk: pods above replicas+surge go, the unconfirmed ones first", Budget{2, 1, 0}, []Counts{{2, 2}, {3, 3}}, []bool{true, false}, []int32{2, 1}},
		{"alone and unconfirmed: never grows", Budget{5, 2, 0}, []Counts{{3, 3}}, []bool{false}, []int32{3}},
		{"alone and unconfirmed: shrinks", Budget{2, 1, 0}, []Counts{{3, 3}}, []bool{false}, []int32{2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := resizeGrowing(c.b, c.live, c.grows); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("resizeGrowing = %v, want %v", got, c.want)
			}
		})
	}
}
