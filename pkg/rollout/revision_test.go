package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

const (
	crdPath    = "../../config/crd/bases/routing.schemagate.io_routingservices.yaml"
	samplePath = "../../config/samples/routing_v1alpha1_routingservice.yaml"
)

// The specs below are this file's own, not sim_test.go's fixture(), so that the pinned revisions
// change only when Revision does.

func regionShards(names ...string) []routingv1alpha1.ShardSpec {
	var shards []routingv1alpha1.ShardSpec
	for _, n := range names {
		shards = append(shards, routingv1alpha1.ShardSpec{Name: n, Replicas: 3,
			NodeSelector: map[string]string{"topology.kubernetes.io/region": n}})
	}
	return shards
}

func migration() routingv1alpha1.MigrationSpec {
	return routingv1alpha1.MigrationSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "migrate", Image: "migrate:ok"}}}}}
}

// minimalSpec is sim_test.go's fixture() spec: image app:v1 needing schema 1, shards us-east,
// eu-west, ap-south with a region nodeSelector each.
func minimalSpec() *routingv1alpha1.RoutingServiceSpec {
	return &routingv1alpha1.RoutingServiceSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v1"}}}},
		Schema:   routingv1alpha1.SchemaSpec{Version: "1", Migration: migration()},
		Shards:   regionShards("us-east", "eu-west", "ap-south"),
	}
}

// richSpec sets every common pod field, and five shards, one with two nodeSelector entries.
func richSpec() *routingv1alpha1.RoutingServiceSpec {
	shards := regionShards("us-east", "us-west", "eu-west", "eu-central", "ap-south")
	shards[4].NodeSelector["node.kubernetes.io/instance-type"] = "m7g.large"
	return &routingv1alpha1.RoutingServiceSpec{
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "edge-router", "tier": "routing"},
				Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			},
			Spec: corev1.PodSpec{
				ServiceAccountName:            "edge-router",
				ImagePullSecrets:              []corev1.LocalObjectReference{{Name: "registry"}},
				NodeSelector:                  map[string]string{"kubernetes.io/os": "linux"},
				TerminationGracePeriodSeconds: ptr.To(int64(45)),
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65532)),
					FSGroup: ptr.To(int64(65532)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
						PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "edge-router"}}}}}}},
				Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "routing",
					Effect: corev1.TaintEffectNoSchedule}},
				InitContainers: []corev1.Container{{Name: "wait-db", Image: "busybox:1.36",
					Command: []string{"sh", "-c", "until nc -z db 5432; do sleep 1; done"}}},
				Containers: []corev1.Container{{
					Name:  "router",
					Image: "registry.example/edge-router:v1",
					Args:  []string{"--listen=:8080", "--metrics=:9090"},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080},
						{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
						{Name: "quic", ContainerPort: 8443, Protocol: corev1.ProtocolUDP}},
					Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"},
						{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "edge-router-config"}}}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready",
						Port: intstr.FromString("http")}}, PeriodSeconds: 5},
					LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9091}},
						InitialDelaySeconds: 10},
					StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
						Port: intstr.FromInt32(8080)}}, FailureThreshold: 30},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/edge-router", ReadOnly: true},
						{Name: "cache", MountPath: "/var/cache/edge-router"}, {Name: "tls", MountPath: "/etc/tls", ReadOnly: true}},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
				Volumes: []corev1.Volume{
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "edge-router-config"}}}},
					{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "tls", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
						Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
							LocalObjectReference: corev1.LocalObjectReference{Name: "edge-router-tls"}}}}}}},
				},
			},
		},
		Schema: routingv1alpha1.SchemaSpec{Version: "2026.10.1", Migration: migration()},
		Shards: shards,
	}
}

// crdDefaultedSpec uses the sources whose fields the CRD defaults inside the template (an
// azureDisk, rbd and iscsi volume, a fileKeyRef, an unnamed configMapKeyRef, a gRPC probe), leaving
// those fields unset.
func crdDefaultedSpec() *routingv1alpha1.RoutingServiceSpec {
	return &routingv1alpha1.RoutingServiceSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app:v1",
				Env: []corev1.EnvVar{
					{Name: "REGION", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "region"}}},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{FileKeyRef: &corev1.FileKeySelector{VolumeName: "disk", Path: "env", Key: "TOKEN"}}}},
				Ports:          []corev1.ContainerPort{{ContainerPort: 53, Protocol: corev1.ProtocolUDP}, {ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9091}}}}},
			Volumes: []corev1.Volume{
				{Name: "disk", VolumeSource: corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{DiskName: "d", DataDiskURI: "https://disk"}}},
				{Name: "ceph", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"10.0.0.1:6789"}, RBDImage: "img"}}},
				{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.0.0.2:3260", IQN: "iqn.2026-01.example:t", Lun: 0}}},
			},
		}},
		Schema: routingv1alpha1.SchemaSpec{Version: "3", Migration: migration()},
		Shards: regionShards("us-east"),
	}
}

// goldenSpecs are the pinned specs, by name.
func goldenSpecs() []struct {
	name string
	spec *routingv1alpha1.RoutingServiceSpec
} {
	schema2 := minimalSpec()
	schema2.Schema.Version = "2"
	single := minimalSpec()
	single.Shards = []routingv1alpha1.ShardSpec{{Name: "global", Replicas: 5}}
	labelled := minimalSpec()
	labelled.Template.Labels = map[string]string{"app": "rs-a"}
	labelled.Template.Annotations = map[string]string{"schemagate.io/owner": "team-routing"}
	return []struct {
		name string
		spec *routingv1alpha1.RoutingServiceSpec
	}{
		{"minimal (fixture)", minimalSpec()},
		{"minimal, schema 2", schema2},
		{"one shard without nodeSelector", single},
		{"template labels and annotations", labelled},
		{"every common pod field, five shards", richSpec()},
		{"sources with CRD defaults unset", crdDefaultedSpec()},
	}
}

// TestRevisionGolden pins the revision of each golden spec. Revision names every ReplicaSet
// (<name>-<shard>-<revision>): a different revision for an unchanged spec makes the new operator
// create a new ReplicaSet in every shard of every RoutingService after an upgrade.
func TestRevisionGolden(t *testing.T) {
	pinned := map[string]string{
		"minimal (fixture)":                   "8x44b46456",
		"minimal, schema 2":                   "8w6d8w6459",
		"one shard without nodeSelector":      "7fx665b449",
		"template labels and annotations":     "xd46zdzw94",
		"every common pod field, five shards": "2x85w428zd",
		"sources with CRD defaults unset":     "dwd6x4bb22",
	}
	seen := map[string]string{}
	for _, g := range goldenSpecs() {
		got := Revision(g.spec)
		if len(got) != 10 {
			t.Errorf("%s: Revision = %q, want 10 characters", g.name, got)
		}
		if got != pinned[g.name] {
			t.Errorf("%s: Revision = %q, pinned %q.\nChanging a pinned revision renames the revision of every "+
				"RoutingService and so re-rolls every shard of every RoutingService on upgrade (S-22). Do not just "+
				"update the pin: a change to Revision's canonical form or to templateDefaults needs a deliberate "+
				"migration path (e.g. adopting the old revision's ReplicaSets).", g.name, got, pinned[g.name])
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s have the same revision %s", g.name, other, got)
		}
		seen[got] = g.name
	}

	// The canonical form itself, for the minimal spec.
	tmpl, err := toUnstructured(minimalSpec().Template)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"schemaVersion":"1","shardNodeSelectors":[{"topology.kubernetes.io/region":"us-east"},` +
		`{"topology.kubernetes.io/region":"eu-west"},{"topology.kubernetes.io/region":"ap-south"}],` +
		`"template":{"spec":{"containers":[{"image":"app:v1","name":"app"}]}}}`
	if got := mustJSON(t, revisionDocument(tmpl, minimalSpec())); got != want {
		t.Errorf("canonical form of the minimal spec:\n%s\nwant\n%s", got, want)
	}
}

// crdSpecSchema reads the CRD and returns the OpenAPI schema of v1alpha1's spec.
func crdSpecSchema(t testing.TB) map[string]any {
	t.Helper()
	b, err := os.ReadFile(crdPath)
	if err != nil {
		t.Fatalf("reading the CRD: %v", err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatalf("parsing %s: %v", crdPath, err)
	}
	versions, _ := dig(crd, "spec", "versions").([]any)
	for _, v := range versions {
		if m, _ := v.(map[string]any); m["name"] == routingv1alpha1.GroupVersion.Version {
			if s, ok := dig(m, "schema", "openAPIV3Schema", "properties", "spec").(map[string]any); ok {
				return s
			}
		}
	}
	t.Fatalf("%s has no %s schema for spec", crdPath, routingv1alpha1.GroupVersion.Version)
	return nil
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// applySchemaDefaults fills in obj, in place, the defaults schema declares, as the API server's
// structural defaulting does: a property's default is set when the property is absent or null and
// its parent object exists, then defaulting goes on into it, its list items and map values.
func applySchemaDefaults(schema map[string]any, obj any) {
	switch o := obj.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for k, ps := range props {
			p, _ := ps.(map[string]any)
			if d, has := p["default"]; has && o[k] == nil {
				o[k] = deepCopyJSON(d)
			}
			if v, present := o[k]; present {
				applySchemaDefaults(p, v)
			}
		}
		if ap, ok := schema["additionalProperties"].(map[string]any); ok {
			for _, v := range o {
				applySchemaDefaults(ap, v)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for _, v := range o {
				applySchemaDefaults(items, v)
			}
		}
	}
}

func deepCopyJSON(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// serverForm returns spec as the API server stores it: with the CRD's structural defaults applied.
func serverForm(t *testing.T, schema map[string]any, spec *routingv1alpha1.RoutingServiceSpec) *routingv1alpha1.RoutingServiceSpec {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var u map[string]any
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	applySchemaDefaults(schema, u)
	if b, err = json.Marshal(u); err != nil {
		t.Fatal(err)
	}
	out := &routingv1alpha1.RoutingServiceSpec{}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decoding the defaulted spec: %v", err)
	}
	return out
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRevisionServerDefaults: a spec, the same spec with the CRD's defaults filled in as the API
// server returns it, and the same spec as an earlier release's CRD stored it (with the defaults it
// declared inside spec.template), have the same revision (S-22 a).
func TestRevisionServerDefaults(t *testing.T) {
	schema := crdSpecSchema(t)
	for _, g := range goldenSpecs() {
		for form, server := range map[string]*routingv1alpha1.RoutingServiceSpec{
			"server form":                  serverForm(t, schema, g.spec),
			"stored by an earlier release": storedEarlier(t, serverForm(t, schema, g.spec)),
		} {
			if got, want := Revision(server), Revision(g.spec); got != want {
				t.Errorf("%s: %s has revision %s, client form %s\nclient template: %s\nserver template: %s",
					g.name, form, got, want, mustJSON(t, g.spec.Template), mustJSON(t, server.Template))
			}
		}
	}
	// The earlier defaults do change the templates that use defaulted fields, or this test proves nothing.
	for _, spec := range []*routingv1alpha1.RoutingServiceSpec{richSpec(), crdDefaultedSpec()} {
		if mustJSON(t, spec.Template) == mustJSON(t, storedEarlier(t, spec).Template) {
			t.Errorf("the earlier CRD's defaults changed nothing in %s", mustJSON(t, spec.Template))
		}
	}

	// The sample manifest as written and as read back.
	b, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatalf("reading the sample: %v", err)
	}
	var client routingv1alpha1.RoutingService
	if err := yaml.Unmarshal(b, &client); err != nil {
		t.Fatalf("decoding %s: %v", samplePath, err)
	}
	var u map[string]any
	if err := yaml.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	applySchemaDefaults(schema, u["spec"])
	var server routingv1alpha1.RoutingService
	if err := json.Unmarshal([]byte(mustJSON(t, u)), &server); err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, client.Spec.Template) != mustJSON(t, server.Spec.Template) {
		t.Errorf("the CRD's defaults changed the sample's template:\n%s\n%s", mustJSON(t, client.Spec.Template), mustJSON(t, server.Spec.Template))
	}
	earlier := storedEarlier(t, &server.Spec)
	if mustJSON(t, client.Spec.Template) == mustJSON(t, earlier.Template) {
		t.Errorf("the earlier CRD's defaults changed nothing in the sample's template")
	}
	for form, spec := range map[string]*routingv1alpha1.RoutingServiceSpec{"read back": &server.Spec, "stored by an earlier release": earlier} {
		if got, want := Revision(spec), Revision(&client.Spec); got != want {
			t.Errorf("the sample has revision %s as written and %s %s", want, got, form)
		}
	}

	// Setting a defaulted field to its default explicitly is the same as omitting it.
	explicit := crdDefaultedSpec()
	c := &explicit.Template.Spec.Containers[0]
	c.Ports[1].Protocol = corev1.ProtocolTCP
	c.ReadinessProbe.GRPC.Service = ptr.To("")
	c.Env[1].ValueFrom.FileKeyRef.Optional = ptr.To(false)
	explicit.Template.Spec.Volumes[0].AzureDisk.FSType = ptr.To("ext4")
	explicit.Template.Spec.Volumes[0].AzureDisk.ReadOnly = ptr.To(false)
	explicit.Template.Spec.Volumes[1].RBD.RBDPool = "rbd"
	explicit.Template.Spec.Volumes[1].RBD.RadosUser = "admin"
	explicit.Template.Spec.Volumes[1].RBD.Keyring = "/etc/ceph/keyring"
	explicit.Template.Spec.Volumes[2].ISCSI.ISCSIInterface = "default"
	if got, want := Revision(explicit), Revision(crdDefaultedSpec()); got != want {
		t.Errorf("explicit defaults: revision %s, want %s", got, want)
	}
}

// TestRevisionIgnoresEmptyFields: null, {} and [] members, such as a k8s.io/api bump adds to the
// encoded template, change no revision (S-22 b).
func TestRevisionIgnoresEmptyFields(t *testing.T) {
	for _, g := range goldenSpecs() {
		want := Revision(g.spec)

		// In the Go types.
		typed := g.spec.DeepCopy()
		p := &typed.Template.Spec
		if p.SecurityContext == nil {
			p.SecurityContext = &corev1.PodSecurityContext{}
		}
		if p.Affinity == nil {
			p.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		}
		p.Tolerations = append([]corev1.Toleration{}, p.Tolerations...)
		if typed.Template.Labels == nil {
			typed.Template.Labels = map[string]string{}
		}
		for i := range p.Containers {
			c := &p.Containers[i]
			if c.Lifecycle == nil {
				c.Lifecycle = &corev1.Lifecycle{}
			}
			c.Command = append([]string{}, c.Command...)
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
		}
		for i := range typed.Shards {
			if typed.Shards[i].NodeSelector == nil {
				typed.Shards[i].NodeSelector = map[string]string{}
			}
		}
		if got := Revision(typed); got != want {
			t.Errorf("%s with empty Go fields: revision %s, want %s\n%s", g.name, got, want, mustJSON(t, typed.Template))
		}

		// In the encoded template: new members in every object, as a new Go field would add.
		tmpl, err := toUnstructured(g.spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		addEmptyMembers(tmpl)
		if got := shortHash(revisionDocument(tmpl, g.spec)); got != want {
			t.Errorf("%s with new empty members: revision %s, want %s", g.name, got, want)
		}
	}
}

func addEmptyMembers(v any) {
	switch t := v.(type) {
	case map[string]any:
		for _, e := range t {
			addEmptyMembers(e)
		}
		t["zzNull"] = nil
		t["zzObject"] = map[string]any{}
		t["zzList"] = []any{}
		t["zzNested"] = map[string]any{"a": map[string]any{"b": []any{}}, "c": nil}
	case []any:
		for _, e := range t {
			addEmptyMembers(e)
		}
	}
}

// TestRevisionChanges: what a pod would see changes the revision; what it would not, does not.
func TestRevisionChanges(t *testing.T) {
	changed := map[string]func(s *routingv1alpha1.RoutingServiceSpec){
		"image":          func(s *routingv1alpha1.RoutingServiceSpec) { s.Template.Spec.Containers[0].Image = "app:v2" },
		"env value":      func(s *routingv1alpha1.RoutingServiceSpec) { s.Template.Spec.Containers[0].Env[0].Value = "debug" },
		"schema version": func(s *routingv1alpha1.RoutingServiceSpec) { s.Schema.Version = "2026.10.2" },
		"shard nodeSelector": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Shards[1].NodeSelector["topology.kubernetes.io/region"] = "us-west-2"
		},
		"shard added":      func(s *routingv1alpha1.RoutingServiceSpec) { s.Shards = append(s.Shards, regionShards("sa-east")...) },
		"shards reordered": func(s *routingv1alpha1.RoutingServiceSpec) { s.Shards[0], s.Shards[1] = s.Shards[1], s.Shards[0] },
		"protocol UDP": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Template.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP
		},
		"emptyDir to hostPath": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Template.Spec.Volumes[1].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		},
		"gRPC service named": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Template.Spec.Containers[0].LivenessProbe.GRPC.Service = ptr.To("routing")
		},
		"label": func(s *routingv1alpha1.RoutingServiceSpec) { s.Template.Labels["tier"] = "edge" },
		"init container removed": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Template.Spec.InitContainers = nil
		},
	}
	base := Revision(richSpec())
	for name, change := range changed {
		s := richSpec()
		change(s)
		if Revision(s) == base {
			t.Errorf("%s: revision unchanged (%s)", name, base)
		}
	}

	same := map[string]func(s *routingv1alpha1.RoutingServiceSpec){
		"replicas": func(s *routingv1alpha1.RoutingServiceSpec) { s.Shards[0].Replicas = 9 },
		"migration template": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Schema.Migration.Template.Spec.Containers[0].Image = "migrate:v2"
		},
		"migration deadline": func(s *routingv1alpha1.RoutingServiceSpec) {
			s.Schema.Migration.ActiveDeadlineSeconds = ptr.To(int64(60))
		},
		"paused":        func(s *routingv1alpha1.RoutingServiceSpec) { s.Paused = true },
		"shard renamed": func(s *routingv1alpha1.RoutingServiceSpec) { s.Shards[0].Name = "us-east-a" },
	}
	for name, change := range same {
		s := richSpec()
		change(s)
		if got := Revision(s); got != base {
			t.Errorf("%s: revision %s, want %s", name, got, base)
		}
	}

	if got, want := Revision(nil), Revision(&routingv1alpha1.RoutingServiceSpec{}); got != want || len(got) != 10 {
		t.Errorf("Revision(nil) = %q, Revision(empty) = %q", got, want)
	}
}

// TestCRDDeclaresNoTemplateDefaults: the CRD declares no default inside spec.template (hack/crdtrim
// removes the ones controller-gen copies from k8s.io/api), so the API server stores the template
// as the manifest wrote it. templateDefaults stays: it is what the CRDs of earlier releases filled
// in, and RoutingServices stored then keep those values.
func TestCRDDeclaresNoTemplateDefaults(t *testing.T) {
	schema := crdSpecSchema(t)
	tmplSchema, ok := dig(schema, "properties", "template").(map[string]any)
	if !ok {
		t.Fatal("the CRD has no schema for spec.template")
	}
	if d := schemaDefaults(tmplSchema, ""); len(d) > 0 {
		t.Errorf("the CRD declares %d defaults inside spec.template (e.g. %s): the stored template then differs from "+
			"the manifest (run make manifests: hack/crdtrim removes them)", len(d), slices.Sorted(maps.Keys(d))[0])
	}
	if len(schemaDefaults(schema, "")) == 0 {
		t.Fatal("found no default anywhere in the CRD's spec: is the walk broken?")
	}
	// Every entry of templateDefaults names a field of the template's schema, with a value of its type.
	for _, d := range templateDefaults {
		if strings.HasPrefix(d.path, "spec.ephemeralContainers") {
			// The CRD refuses ephemeral containers in a template (maxItems 0, hack/crdtrim):
			// no default of theirs can ever apply.
			continue
		}
		node := tmplSchema
		for _, seg := range d.segments {
			name, each := strings.CutSuffix(seg, "[]")
			node, _ = dig(node, "properties", name).(map[string]any)
			if each && node != nil {
				node, _ = node["items"].(map[string]any)
			}
			if node == nil {
				t.Errorf("templateDefaults has spec.template.%s, which the CRD's schema does not have", d.path)
				break
			}
		}
		if node == nil {
			continue
		}
		want := map[string]string{"string": "string", "boolean": "bool"}[fmt.Sprint(node["type"])]
		if got := fmt.Sprintf("%T", d.value); got != want {
			t.Errorf("spec.template.%s: templateDefaults has a %s, the schema's type is %v", d.path, got, node["type"])
		}
	}
}

// schemaDefaults returns the defaults declared in schema and below it, by path.
func schemaDefaults(s map[string]any, path string) map[string]any {
	declared := map[string]any{}
	var walk func(s map[string]any, path string)
	walk = func(s map[string]any, path string) {
		if d, has := s["default"]; has {
			declared[path] = d
		}
		props, _ := s["properties"].(map[string]any)
		for k, p := range props {
			if ps, ok := p.(map[string]any); ok {
				walk(ps, strings.TrimPrefix(path+"."+k, "."))
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(items, path+"[]")
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			walk(ap, path+"{}")
		}
		for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
			subs, _ := s[kw].([]any)
			for _, sub := range subs {
				if ss, ok := sub.(map[string]any); ok {
					walk(ss, path)
				}
			}
		}
	}
	walk(s, path)
	return declared
}

// storedEarlier returns spec as the API server stored it under an earlier release's CRD, which
// defaulted the fields of templateDefaults inside spec.template: each is filled in where its parent
// exists and it is absent.
func storedEarlier(t *testing.T, spec *routingv1alpha1.RoutingServiceSpec) *routingv1alpha1.RoutingServiceSpec {
	t.Helper()
	tmpl, err := toUnstructured(spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range templateDefaults {
		fillDefault(tmpl, d.segments, d.value)
	}
	out := spec.DeepCopy()
	out.Template = corev1.PodTemplateSpec{}
	if err := json.Unmarshal([]byte(mustJSON(t, tmpl)), &out.Template); err != nil {
		t.Fatal(err)
	}
	return out
}

// fillDefault sets, under node, the field at segments to value where its parent exists and it is
// absent (removeDefault's inverse).
func fillDefault(node any, segments []string, value any) {
	m, ok := node.(map[string]any)
	if !ok || len(segments) == 0 {
		return
	}
	key, each := strings.CutSuffix(segments[0], "[]")
	if len(segments) == 1 {
		if _, ok := m[key]; !ok && !each {
			m[key] = value
		}
		return
	}
	if !each {
		fillDefault(m[key], segments[1:], value)
		return
	}
	list, _ := m[key].([]any)
	for _, e := range list {
		fillDefault(e, segments[1:], value)
	}
}

// withPodDefaults returns tmpl as the API server stores it in a ReplicaSet: with the apps/v1 pod
// defaults filled in, read back through JSON.
func withPodDefaults(t testing.TB, tmpl corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	t.Helper()
	out := *tmpl.DeepCopy()
	s := &out.Spec
	s.RestartPolicy = corev1.RestartPolicyAlways
	s.DNSPolicy = corev1.DNSClusterFirst
	s.SchedulerName = corev1.DefaultSchedulerName
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To(int64(30))
	}
	s.EnableServiceLinks = ptr.To(true)
	probe := func(p *corev1.Probe) {
		if p == nil {
			return
		}
		p.TimeoutSeconds, p.SuccessThreshold = 1, 1
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		if p.HTTPGet != nil {
			p.HTTPGet.Scheme = corev1.URISchemeHTTP
		}
		if p.GRPC != nil && p.GRPC.Service == nil {
			p.GRPC.Service = ptr.To("")
		}
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			c := &cs[i]
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
			c.ImagePullPolicy = corev1.PullIfNotPresent
			for j := range c.Ports {
				if c.Ports[j].Protocol == "" {
					c.Ports[j].Protocol = corev1.ProtocolTCP
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					e.ValueFrom.FieldRef.APIVersion = "v1"
				}
			}
			probe(c.ReadinessProbe)
			probe(c.LivenessProbe)
			probe(c.StartupProbe)
		}
	}
	for i := range s.Volumes {
		v := &s.Volumes[i].VolumeSource
		if v.ConfigMap != nil {
			v.ConfigMap.DefaultMode = ptr.To(int32(0o644))
		}
		if v.Projected != nil {
			v.Projected.DefaultMode = ptr.To(int32(0o644))
		}
	}
	var back corev1.PodTemplateSpec
	if err := json.Unmarshal([]byte(mustJSON(t, out)), &back); err != nil {
		t.Fatal(err)
	}
	return back
}

func TestTemplateMatches(t *testing.T) {
	want := richSpec().Template
	want.Labels[LabelRevision] = "abcde12345"
	stored := withPodDefaults(t, want)
	if mustJSON(t, stored) == mustJSON(t, want) {
		t.Fatal("withPodDefaults changed nothing")
	}
	if ok, diff := TemplateMatches(want, stored); !ok {
		t.Fatalf("a template and its stored form do not match: %s", diff)
	}
	if ok, diff := TemplateMatches(want, want); !ok {
		t.Fatalf("a template does not match itself: %s", diff)
	}

	cases := map[string]struct {
		change func(h *corev1.PodTemplateSpec)
		diff   string
	}{
		"image": {func(h *corev1.PodTemplateSpec) { h.Spec.Containers[0].Image = "app:evil" },
			`spec.containers[0].image: want "registry.example/edge-router:v1", have "app:evil"`},
		"extra container": {func(h *corev1.PodTemplateSpec) {
			h.Spec.Containers = append(h.Spec.Containers, corev1.Container{Name: "sidecar", Image: "miner:latest"})
		}, `spec.containers: want 1 item, have 2 items`},
		"container removed": {func(h *corev1.PodTemplateSpec) { h.Spec.InitContainers = nil },
			`spec.initContainers: want [{"command":["sh","-c","until nc -z db 5432; do sleep 1; done"],"image":"busy..., have nothing`},
		"label changed": {func(h *corev1.PodTemplateSpec) { h.Labels[LabelRevision] = "0000000000" },
			`metadata.labels["schemagate.io/revision"]: want "abcde12345", have "0000000000"`},
		"env value": {func(h *corev1.PodTemplateSpec) { h.Spec.Containers[0].Env[0].Value = "debug" },
			`spec.containers[0].env[0].value: want "info", have "debug"`},
		"protocol": {func(h *corev1.PodTemplateSpec) { h.Spec.Containers[0].Ports[1].Protocol = corev1.ProtocolUDP },
			`spec.containers[0].ports[1].protocol: want "TCP", have "UDP"`},
		"emptyDir to hostPath": {func(h *corev1.PodTemplateSpec) {
			h.Spec.Volumes[1].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}, `spec.volumes[1].emptyDir: want {}, have nothing`},
		"nodeSelector": {func(h *corev1.PodTemplateSpec) { h.Spec.NodeSelector["kubernetes.io/os"] = "windows" },
			`spec.nodeSelector["kubernetes.io/os"]: want "linux", have "windows"`},
		"resources": {func(h *corev1.PodTemplateSpec) { h.Spec.Containers[0].Resources.Limits = nil },
			`spec.containers[0].resources.limits: want {"memory":"512Mi"}, have nothing`},
	}
	for name, c := range cases {
		have := withPodDefaults(t, want)
		c.change(&have)
		ok, diff := TemplateMatches(want, have)
		if ok {
			t.Errorf("%s: templates match", name)
			continue
		}
		if diff != c.diff {
			t.Errorf("%s: diff\n%s\nwant\n%s", name, diff, c.diff)
		}
	}

	// Zero and odd inputs: no panic, and a difference always has a message.
	odd := []corev1.PodTemplateSpec{
		{},
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{}}}},
		{Spec: corev1.PodSpec{Containers: []corev1.Container{}, Volumes: []corev1.Volume{{}}}},
		{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}},
		{Spec: corev1.PodSpec{Containers: []corev1.Container{{ReadinessProbe: &corev1.Probe{}, Env: []corev1.EnvVar{{ValueFrom: &corev1.EnvVarSource{}}}}}}},
		want, stored,
	}
	for i, a := range odd {
		for j, b := range odd {
			ok, diff := TemplateMatches(a, b)
			if !ok && diff == "" {
				t.Errorf("TemplateMatches(odd[%d], odd[%d]) = false without a diff", i, j)
			}
			if i == j && !ok {
				t.Errorf("odd[%d] does not match itself: %s", i, diff)
			}
		}
	}
	if ok, diff := TemplateMatches(corev1.PodTemplateSpec{}, stored); !ok {
		t.Errorf("an empty template requires nothing, got %s", diff)
	}
	if ok, diff := TemplateMatches(want, corev1.PodTemplateSpec{}); ok || diff == "" {
		t.Errorf("TemplateMatches(want, empty) = %v, %q", ok, diff)
	}
}

// FuzzTemplateMatches: TemplateMatches and the canonical form never panic, a template always
// matches itself, and a mismatch always says where. Run with
// `go test ./pkg/rollout/ -run '^$' -fuzz FuzzTemplateMatches`.
func FuzzTemplateMatches(f *testing.F) {
	rich := mustJSON(f, richSpec().Template)
	f.Add(rich, mustJSON(f, withPodDefaults(f, richSpec().Template)))
	f.Add(rich, strings.Replace(rich, "edge-router:v1", "evil", 1))
	f.Add(mustJSON(f, crdDefaultedSpec().Template), mustJSON(f, withPodDefaults(f, crdDefaultedSpec().Template)))
	f.Add(`{}`, `{}`)
	f.Add(``, `null`)
	f.Add(`null`, `{"spec":{"containers":null}}`)
	f.Add(`{"spec":{"containers":[{"name":"a","image":"x"}]}}`, `{"spec":{"containers":[{"name":"a","image":"x"},{}]}}`)
	f.Add(`{"spec":{"volumes":[{"name":"v","emptyDir":{}}]}}`, `{"spec":{"volumes":[{"name":"v","hostPath":{"path":"/"}}]}}`)
	f.Add(`{"metadata":{"labels":{"a.b/c":"d","":""}},"spec":{"nodeSelector":{"k":"v"}}}`, `{"metadata":{"labels":null}}`)
	f.Add(`{"spec":{"containers":[{"resources":{"limits":{"cpu":"1.5"}}}]}}`, `{"spec":{"containers":[{"resources":{"limits":{"cpu":"1500m"}}}]}}`)
	f.Add(`[1,2,{"a":[null,{},[]]}]`, `{"a":1e400}`)
	f.Add(`{"a":{"b":[1,"x",true,null]}}`, `{"a":{"b":[1,"x",true]}}`)

	f.Fuzz(func(t *testing.T, a, b string) {
		var want, have corev1.PodTemplateSpec
		_ = json.Unmarshal([]byte(a), &want)
		_ = json.Unmarshal([]byte(b), &have)
		for _, pair := range [][2]corev1.PodTemplateSpec{{want, have}, {have, want}, {want, want}, {have, have}} {
			ok, diff := TemplateMatches(pair[0], pair[1])
			if !ok && diff == "" {
				t.Errorf("a mismatch without a diff")
			}
			if _, err := json.Marshal(pair[0]); err == nil && !ok && reflect.DeepEqual(pair[0], pair[1]) {
				t.Errorf("a template does not match itself: %s", diff)
			}
		}
		if _, err := json.Marshal(want); err == nil {
			spec := &routingv1alpha1.RoutingServiceSpec{Template: want, Shards: []routingv1alpha1.ShardSpec{{Name: "s"}}}
			if r := Revision(spec); len(r) != 10 {
				t.Errorf("Revision = %q", r)
			}
		}

		// The same on arbitrary JSON, below the Go types.
		decode := func(s string) any {
			dec := json.NewDecoder(bytes.NewReader([]byte(s)))
			dec.UseNumber()
			var v any
			_ = dec.Decode(&v)
			return v
		}
		w, h := decode(a), decode(b)
		if ok, diff := matchJSON("", dropNullsAndEmptyLists(decode(a)), h); !ok && diff == "" {
			t.Errorf("a mismatch without a diff")
		}
		if ok, diff := matchJSON("", dropNullsAndEmptyLists(decode(a)), w); !ok {
			t.Errorf("%s does not match itself: %s", a, diff)
		}
		_ = shortHash(revisionDocument(w, &routingv1alpha1.RoutingServiceSpec{}))
	})
}
