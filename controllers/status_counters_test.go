package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

func counterStatus(available int32, step routingv1alpha1.ShardStep) routingv1alpha1.RoutingServiceStatus {
	return routingv1alpha1.RoutingServiceStatus{
		PromotedShards: "0/2",
		Shards: []routingv1alpha1.ShardStatus{
			{Name: "us-east", Replicas: 3, Updated: available, Ready: available, Available: available, Revision: "abc", Step: step},
			{Name: "eu-west", Replicas: 3, Updated: 0, Ready: 3, Available: 3, Revision: "old"},
		},
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing"}},
	}
}

func TestCountersOnly(t *testing.T) {
	base := counterStatus(1, routingv1alpha1.ShardStepProgressing)
	for _, tc := range []struct {
		name   string
		mutate func(*routingv1alpha1.RoutingServiceStatus)
		want   bool
	}{
		{"the same", func(*routingv1alpha1.RoutingServiceStatus) {}, true},
		{"counters", func(s *routingv1alpha1.RoutingServiceStatus) {
			s.Shards[0].Available, s.Shards[0].Ready, s.Shards[0].Updated = 2, 2, 3
		}, true},
		{"the serving revision", func(s *routingv1alpha1.RoutingServiceStatus) { s.Shards[0].Revision = "new" }, false},
		{"a step", func(s *routingv1alpha1.RoutingServiceStatus) { s.Shards[0].Step = routingv1alpha1.ShardStepPromoted }, false},
		{"the shard's replicas", func(s *routingv1alpha1.RoutingServiceStatus) { s.Shards[1].Replicas = 4 }, false},
		{"a condition's message", func(s *routingv1alpha1.RoutingServiceStatus) { s.Conditions[0].Message = "2/3 available" }, false},
		{"shards reordered", func(s *routingv1alpha1.RoutingServiceStatus) { s.Shards[0], s.Shards[1] = s.Shards[1], s.Shards[0] }, false},
		{"a shard more", func(s *routingv1alpha1.RoutingServiceStatus) {
			s.Shards = append(s.Shards, routingv1alpha1.ShardStatus{Name: "ap-south"})
		}, false},
		{"promoted shards", func(s *routingv1alpha1.RoutingServiceStatus) { s.PromotedShards = "1/2" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			computed := base.DeepCopy()
			tc.mutate(computed)
			if got := countersOnly(&base, computed); got != tc.want {
				t.Errorf("countersOnly = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCounterWritesHoldOnlyCountersWithinThePeriod(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "rs-a"}
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	stored := counterStatus(1, routingv1alpha1.ShardStepProgressing)
	counters := counterStatus(2, routingv1alpha1.ShardStepProgressing)
	step := counterStatus(2, routingv1alpha1.ShardStepBaking)

	var c counterWrites
	if d := c.holdFor(key, &stored, &counters, t0); d != 0 {
		t.Fatalf("no write recorded yet: held %v, want 0", d)
	}
	c.wrote(key, t0)
	if d := c.holdFor(key, &stored, &counters, t0.Add(2*time.Second)); d != CounterWritePeriod-2*time.Second {
		t.Errorf("counters 2 s after a write: held %v, want %v", d, CounterWritePeriod-2*time.Second)
	}
	if d := c.holdFor(key, &stored, &step, t0.Add(2*time.Second)); d != 0 {
		t.Errorf("a step change is written at once: held %v", d)
	}
	if d := c.holdFor(key, &stored, &counters, t0.Add(CounterWritePeriod)); d != 0 {
		t.Errorf("counters once the period has passed: held %v, want 0", d)
	}
	if d := c.holdFor(key, &stored, &counters, t0.Add(-time.Second)); d != 0 {
		t.Errorf("a clock that went backwards: held %v, want 0", d)
	}
	other := types.NamespacedName{Namespace: "ns", Name: "rs-b"}
	if d := c.holdFor(other, &stored, &counters, t0.Add(time.Second)); d != 0 {
		t.Errorf("another RoutingService's write holds nothing here: held %v", d)
	}
	c.forget(key)
	if d := c.holdFor(key, &stored, &counters, t0.Add(time.Second)); d != 0 {
		t.Errorf("after forget: held %v, want 0", d)
	}
}
