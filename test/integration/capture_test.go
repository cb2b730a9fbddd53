package integration

import (
	"testing"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// capture writes rsvc to the Argo CD health check's testdata when SCHEMAGATE_CAPTURE_TESTDATA is
// set (story.Capture).
func capture(t *testing.T, name string, rsvc *routingv1alpha1.RoutingService) {
	t.Helper()
	story.Capture(t, rootDir, name, rsvc)
}
