package main

import (
	"errors"
	"io/fs"
	"os"
)

// serviceAccountNamespaceFile is where a pod finds its namespace; controller-runtime reads it to
// default the leader election namespace, and fails ("unable to find leader election namespace")
// when it does not exist.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// outOfClusterLeaderElectionNamespace holds the leader election Lease of a manager run outside
// the cluster (make run) when --leader-election-namespace is not given.
const outOfClusterLeaderElectionNamespace = "kube-system"

// resolveLeaderElectionNamespace returns the namespace to give controller-runtime for the leader
// election Lease. An explicit flag value wins. In cluster (the service-account namespace file
// exists) it returns "" so that controller-runtime uses the manager's own namespace; out of
// cluster (the file does not exist) it returns kube-system. Any other error reading the file is
// left to controller-runtime to report.
func resolveLeaderElectionNamespace(flagValue, namespaceFile string) string {
	if flagValue != "" {
		return flagValue
	}
	if _, err := os.Stat(namespaceFile); errors.Is(err, fs.ErrNotExist) {
		return outOfClusterLeaderElectionNamespace
	}
	return ""
}
