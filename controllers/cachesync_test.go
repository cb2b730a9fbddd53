package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestWrittenVersionsSkipsOnlyTheReplacedVersion(t *testing.T) {
	var w writtenVersions
	key := types.NamespacedName{Namespace: "ns", Name: "edge"}
	if w.stale(key, "10") {
		t.Fatal("nothing written: nothing is stale")
	}
	w.wrote(key, "10")
	for range 2 { // asked again, the same answer
		if !w.stale(key, "10") {
			t.Fatal("the cache still serving the replaced version 10 must be stale, for as long as it does")
		}
	}
	if w.stale(types.NamespacedName{Namespace: "ns", Name: "other"}, "10") {
		t.Fatal("another RoutingService's version is not stale")
	}
	if w.stale(key, "11") {
		t.Fatal("the cache moved past the write: not stale")
	}
	if w.stale(key, "10") {
		t.Fatal("once the cache moved on, the record is cleared (a restored object may reuse nothing, but never skip twice)")
	}
	w.wrote(key, "12")
	w.forget(key)
	if w.stale(key, "12") {
		t.Fatal("forgotten RoutingService still skipped")
	}
}
