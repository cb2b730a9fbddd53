// Package bases embeds the generated RoutingService CRD (make manifests writes it), so that tools
// check a manifest against exactly what the API server enforces: the kubectl plugin's offline
// validation (pkg/validate).
package bases

import _ "embed"

// RoutingServiceCRD is routing.schemagate.io_routingservices.yaml.
//
//go:embed routing.schemagate.io_routingservices.yaml
var RoutingServiceCRD []byte
