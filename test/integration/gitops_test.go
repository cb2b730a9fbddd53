package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"sigs.k8s.io/yaml"

	"github.com/schemagate/schemagate/test/story"
)

// gitopsManifest sets, in each of the four embedded pod templates, the fields Kubernetes' own
// types default (a container port without protocol, a gRPC probe without service, references
// without a name), as people write them.
const gitopsManifest = `apiVersion: routing.schemagate.io/v1alpha1
kind: RoutingService
metadata:
  name: drift
spec:
  template:
    spec:
      containers:
      - name: router
        image: registry.example/edge-router:v1
        ports:
        - containerPort: 8080
        - {name: metrics, containerPort: 9090}
        readinessProbe:
          grpc: {port: 9091}
        env:
        - name: REGION
          valueFrom: {configMapKeyRef: {key: region}}
      volumes:
      - name: cfg
        configMap: {}
  schema:
    version: "1"
    migration:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: migrate
            image: registry.example/migrate:v1
            ports: [{containerPort: 5000}]
    check:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: check
            image: registry.example/check:v1
            ports: [{containerPort: 5001}]
  shards:
  - name: us-east
    replicas: 1
    nodeSelector: {topology.kubernetes.io/region: us-east-1}
  strategy:
    checks:
    - name: smoke
      job:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: smoke
              image: registry.example/smoke:v1
              ports: [{containerPort: 5002}]
`

// A GitOps tool's client-side diff finds no drift between a RoutingService manifest and the live
// object, once the manager has reconciled it. This is the diff Argo CD computes for a custom
// resource: a three-way JSON merge patch from the last applied configuration, the manifest and the
// live object, in which a list is replaced as a whole. A default the API server filled in inside a
// list element (a container port's protocol) would make it replace the list on every sync.
func TestGitOpsDiffFindsNoDrift(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	file := filepath.Join(t.TempDir(), "drift.yaml")
	if err := os.WriteFile(file, []byte(gitopsManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	// Client-side apply, as Argo CD does by default: it records the last applied configuration.
	if out, err := kubectl(t, "apply", "-n", ns, "-f", file); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	var live map[string]any
	story.Eventually(t, 20*time.Second, "the manager has reconciled the RoutingService", func() error {
		out, err := kubectl(t, "get", "-n", ns, "routingservice", "drift", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		live = nil
		if err := json.Unmarshal([]byte(out), &live); err != nil {
			return err
		}
		status, _ := live["status"].(map[string]any)
		if g, _ := status["observedGeneration"].(float64); g < 1 {
			return fmt.Errorf("status.observedGeneration %v", status["observedGeneration"])
		}
		return nil
	})

	manifest, err := yaml.YAMLToJSON([]byte(gitopsManifest))
	if err != nil {
		t.Fatal(err)
	}
	md, _ := live["metadata"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	lastApplied, _ := annotations["kubectl.kubernetes.io/last-applied-configuration"].(string)
	if lastApplied == "" {
		t.Fatal("no last-applied-configuration: the test proves nothing")
	}
	// The diff is over what a sync would send: spec (metadata and status are the server's).
	specOf := func(doc []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"spec": m["spec"]})
		return b
	}
	liveJSON, _ := json.Marshal(live)
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(specOf([]byte(lastApplied)), specOf(manifest), specOf(liveJSON))
	if err != nil {
		t.Fatal(err)
	}
	if string(patch) != "{}" {
		t.Errorf("a sync would patch the live object (drift): %s", patch)
	}

	// The same from the manifest's side: every field it sets reads back as it wrote it, and every
	// list it sets reads back as the same list, with nothing added to its elements.
	var want map[string]any
	if err := json.Unmarshal(manifest, &want); err != nil {
		t.Fatal(err)
	}
	for _, d := range setFieldsDiffer("spec", want["spec"], live["spec"], false) {
		t.Error(d)
	}
}

// setFieldsDiffer lists where have differs from what want sets: objects must have want's members
// (more are allowed outside lists: schemagate's own defaults), and inside a list, which a GitOps
// diff compares as a whole, nothing more.
func setFieldsDiffer(path string, want, have any, inList bool) []string {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: manifest has an object, live %v", path, have)}
		}
		var out []string
		for k, v := range w {
			out = append(out, setFieldsDiffer(path+"."+k, v, h[k], inList)...)
		}
		if inList {
			for k, v := range h {
				if _, set := w[k]; !set {
					out = append(out, fmt.Sprintf("%s.%s: %v, which the manifest does not set, inside a list", path, k, v))
				}
			}
		}
		return out
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return []string{fmt.Sprintf("%s: manifest has %d items, live %v", path, len(w), have)}
		}
		var out []string
		for i := range w {
			out = append(out, setFieldsDiffer(path+"["+strconv.Itoa(i)+"]", w[i], h[i], true)...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, have) {
			return []string{fmt.Sprintf("%s: manifest %v, live %v", path, want, have)}
		}
		return nil
	}
}

// kubectl get names the columns for what they show, and -o wide adds the Stalled condition, the
// revisions, spec.paused and the Ready message.
func TestKubectlGetColumns(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	file := filepath.Join(t.TempDir(), "columns.yaml")
	if err := os.WriteFile(file, []byte(gitopsManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(t, "apply", "--server-side", "-n", ns, "-f", file); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	story.Eventually(t, 20*time.Second, "the columns", func() error {
		out, err := kubectl(t, "get", "-n", ns, "rsvc", "drift")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if want := []string{"NAME", "READY", "REASON", "CONFIRMED", "REQUIRED", "SHARDS", "AGE"}; !slices.Equal(header, want) {
			return fmt.Errorf("columns %v, want %v", header, want)
		}
		out, err = kubectl(t, "get", "-n", ns, "rsvc", "drift", "-o", "wide")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		lines := strings.SplitN(out, "\n", 3)
		header = strings.Fields(lines[0])
		if want := []string{"NAME", "READY", "REASON", "CONFIRMED", "REQUIRED", "SHARDS", "AGE", "STALLED", "UPDATE", "STABLE", "PAUSED", "PHASE", "MESSAGE"}; !slices.Equal(header, want) {
			return fmt.Errorf("wide columns %v, want %v", header, want)
		}
		// The update revision and the Ready message are there once the manager has seen it.
		rev, err := kubectl(t, "get", "-n", ns, "rsvc", "drift", "-o", "jsonpath={.status.updateRevision}")
		if err != nil || rev == "" {
			return fmt.Errorf("no updateRevision yet: %v %s", err, rev)
		}
		msg, err := kubectl(t, "get", "-n", ns, "rsvc", "drift", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		if err != nil || msg == "" {
			return fmt.Errorf("no Ready message yet: %v %s", err, msg)
		}
		// The manifest's template is refused where it is created (a configMap without a name), so
		// the message is what the manager says about that; the column shows its start whatever it is.
		head := strings.Join(strings.Fields(msg)[:min(4, len(strings.Fields(msg)))], " ")
		if len(lines) < 2 || !strings.Contains(lines[1], " "+rev+" ") || !strings.Contains(lines[1], head) {
			return fmt.Errorf("wide row %q lacks the revision %s or the Ready message %q", lines[1], rev, head)
		}
		return nil
	})
}
