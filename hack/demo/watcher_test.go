package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func conds(c ...[4]string) []metav1.Condition {
	var out []metav1.Condition
	for _, x := range c {
		out = append(out, metav1.Condition{Type: x[0], Status: metav1.ConditionStatus(x[1]), Reason: x[2], Message: x[3]})
	}
	return out
}

// Each transition is printed once: conditions that say the same thing share a line, a poll that
// sees nothing new prints nothing, and a condition that joins or leaves a group is not printed
// again for the part already shown.
func TestTransitionsPrintedOnce(t *testing.T) {
	now := time.Date(2026, 12, 1, 19, 33, 30, 0, time.UTC)
	printed := map[string]string{}
	poll := func(c []metav1.Condition) []string {
		facts := map[string]string{}
		for i, l := range conditionLines(c) {
			facts["cond/"+string(rune('0'+i))] = l
		}
		out := strings.TrimSpace(changedLines(printed, facts, now))
		if out == "" {
			return nil
		}
		return strings.Split(out, "\n")
	}
	baking := conds(
		[4]string{"SchemaReady", "True", "SchemaConfirmed", "schema 2 confirmed"},
		[4]string{"Ready", "False", "ShardBaking", "shard us-east bakes"},
		[4]string{"Stalled", "False", "ShardBaking", "shard us-east bakes"},
		[4]string{"Reconciling", "True", "ShardBaking", "shard us-east bakes"},
	)
	got := poll(baking)
	if len(got) != 2 || !strings.Contains(got[1], "Ready=False Stalled=False ShardBaking: shard us-east bakes") {
		t.Fatalf("first poll: %q", got)
	}
	if got := poll(baking); got != nil {
		t.Fatalf("same state printed again: %q", got)
	}
	done := conds(
		[4]string{"SchemaReady", "True", "SchemaConfirmed", "schema 2 confirmed"},
		[4]string{"Ready", "True", "RolloutComplete", "promoted in all 3 shards"},
		[4]string{"Stalled", "False", "RolloutComplete", "promoted in all 3 shards"},
	)
	if got := poll(done); len(got) != 1 || !strings.Contains(got[0], "Ready=True Stalled=False RolloutComplete") {
		t.Fatalf("transition to Ready: %q", got)
	}
	for _, l := range poll(conds([4]string{"Ready", "True", "RolloutComplete", "promoted in all 3 shards"},
		[4]string{"Stalled", "False", "RolloutComplete", "promoted in all 3 shards"})) {
		if strings.Contains(l, "RolloutComplete") {
			t.Fatalf("the Ready line is printed again when SchemaReady goes: %q", l)
		}
	}
}
