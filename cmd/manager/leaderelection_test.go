package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveLeaderElectionNamespace(t *testing.T) {
	dir := t.TempDir()
	inCluster := filepath.Join(dir, "namespace")
	if err := os.WriteFile(inCluster, []byte("schemagate-system"), 0o600); err != nil {
		t.Fatal(err)
	}
	outOfCluster := filepath.Join(dir, "absent", "namespace")

	for _, tc := range []struct {
		name, flag, file, want string
	}{
		{"out of cluster, flag empty: kube-system", "", outOfCluster, "kube-system"},
		{"in cluster, flag empty: left to controller-runtime (the service-account namespace)", "", inCluster, ""},
		{"out of cluster, flag set: the flag", "leases", outOfCluster, "leases"},
		{"in cluster, flag set: the flag", "leases", inCluster, "leases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolveLeaderElectionNamespace(tc.flag, tc.file); got != tc.want {
				t.Errorf("resolveLeaderElectionNamespace(%q, %q) = %q, want %q", tc.flag, tc.file, got, tc.want)
			}
		})
	}
}
