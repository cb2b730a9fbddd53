package release

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
)

// installers renders config/default with the image ref and splits it in two: the CRDs alone
// (crds.yaml) and everything else (install.yaml), so that deleting what install.yaml created
// never deletes the CRD and with it every RoutingService.
func installers(moduleDir, ref string) (crds, rest []byte, err error) {
	all, err := installer.Render(filepath.Join(moduleDir, "config"), ref)
	if err != nil {
		return nil, nil, err
	}
	var c, r []string
	for _, doc := range strings.Split(string(all), "\n---\n") {
		if strings.Contains("\n"+doc, "\nkind: CustomResourceDefinition\n") {
			c = append(c, strings.TrimSpace(stripComments(doc)))
		} else if s := strings.TrimSpace(stripComments(doc)); s != "" {
			r = append(r, s)
		}
	}
	if len(c) == 0 {
		return nil, nil, fmt.Errorf("config/default rendered no CustomResourceDefinition")
	}
	crdHeader := "# schemagate's CRDs (routingservices and routingshards.routing.schemagate.io), apart from the manager: apply them first.\n" +
		"# Deleting them deletes every RoutingService and, through them, their ReplicaSets and pods.\n"
	restHeader := "# schemagate manager: namespace, RBAC, the Deployment (image " + ref + ")\n" +
		"# and its metrics Service; the CRD is in crds.yaml. kubectl apply --server-side -f crds.yaml -f install.yaml\n"
	return []byte(crdHeader + strings.Join(c, "\n---\n") + "\n"), []byte(restHeader + strings.Join(r, "\n---\n") + "\n"), nil
}

// stripComments drops the leading comment lines of a YAML document (the installer's header).
func stripComments(doc string) string {
	lines := strings.Split(doc, "\n")
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
		i++
	}
	return strings.Join(lines[i:], "\n")
}
