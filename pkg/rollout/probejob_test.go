package rollout

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/schemadiff"
)

// The probe pod runs the team's migration container unchanged but for the database's address,
// after the copy step, which reads the database through the container's own environment.
func TestProbeJobRunsTheTeamsMigrationOnScratch(t *testing.T) {
	rsvc := fixture()
	secret := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "edge-db"}, Key: "url"}}
	m := &rsvc.Spec.Schema.Migration.Template.Spec
	m.Containers[0].Env = []corev1.EnvVar{{Name: "DATABASE_URL", ValueFrom: secret}, {Name: "MIGRATIONS", Value: "/migrations"},
		{Name: "GOOSE_DBSTRING", ValueFrom: secret.DeepCopy()}, {Name: "REPLICA_DSN", Value: "host=replica.db user=edge"},
		{Name: "PGHOST", Value: "primary.db"}, {Name: "PGSERVICE", Value: "edge"}, {Name: "OTHER_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "edge-db"}, Key: "token"}}}}
	m.Containers[0].Command = []string{"migrate", "-path", "/migrations", "up"}
	m.ServiceAccountName = "migrator"
	m.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: new(bool)}
	job := NewProbeJob(rsvc, ProbeImages{Tools: "schemagate:v1", Database: "postgres:16"}, "2", "1", 1)

	if job.Name != ProbeJobName("rs-a", "2", "1", migrationTemplateHash(rsvc), 1) || len(job.Name) > 63 {
		t.Fatalf("name %q", job.Name)
	}
	if *job.Spec.BackoffLimit != 0 || *job.Spec.ActiveDeadlineSeconds != routingv1alpha1.DefaultProbeActiveDeadlineSeconds {
		t.Fatalf("backoffLimit %d, activeDeadlineSeconds %d", *job.Spec.BackoffLimit, *job.Spec.ActiveDeadlineSeconds)
	}
	spec := job.Spec.Template.Spec
	var names []string
	for _, c := range spec.InitContainers {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "probe-tools,probe-scratch,probe-copy,migrate" {
		t.Fatalf("init containers %s", got)
	}
	if spec.InitContainers[1].RestartPolicy == nil || *spec.InitContainers[1].RestartPolicy != corev1.ContainerRestartPolicyAlways || spec.InitContainers[1].Image != "postgres:16" {
		t.Fatalf("the scratch database is not a sidecar of the database image: %+v", spec.InitContainers[1])
	}
	env := func(c corev1.Container, name string) *corev1.EnvVar {
		for i := range c.Env {
			if c.Env[i].Name == name {
				return &c.Env[i]
			}
		}
		return nil
	}
	copyStep, migrate := spec.InitContainers[2], spec.InitContainers[3]
	if e := env(copyStep, "DATABASE_URL"); e == nil || e.ValueFrom != secret && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "edge-db") {
		t.Fatalf("the copy step does not read the database through the migration's own variable: %+v", copyStep.Env)
	}
	if e := env(copyStep, envScratchURL); e == nil || e.Value != probeScratchURL || !strings.Contains(strings.Join(copyStep.Command, " "), "--source-url-env=DATABASE_URL") {
		t.Fatalf("copy step %v %+v", copyStep.Command, copyStep.Env)
	}
	if e := env(migrate, "DATABASE_URL"); e == nil || e.Value != probeScratchURL || e.ValueFrom != nil {
		t.Fatalf("the migration does not run on the scratch database: %+v", migrate.Env)
	}
	// Whatever else names the database is pointed at the scratch one too; libpq's file and
	// service variables are dropped; other variables are the team's.
	for _, name := range []string{"GOOSE_DBSTRING", "REPLICA_DSN"} {
		if e := env(migrate, name); e == nil || e.Value != probeScratchURL || e.ValueFrom != nil {
			t.Errorf("%s is not pointed at the scratch database: %+v", name, e)
		}
	}
	for name, want := range map[string]string{"PGHOST": "127.0.0.1", "PGPORT": probeScratchPort, "PGPASSWORD": "", "PGSSLMODE": "disable"} {
		if e := env(migrate, name); e == nil || e.Value != want || e.ValueFrom != nil {
			t.Errorf("%s: %+v, want %q", name, e, want)
		}
	}
	if e := env(migrate, "PGSERVICE"); e != nil {
		t.Errorf("PGSERVICE kept: %+v", e)
	}
	if e := env(migrate, "OTHER_SECRET"); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("OTHER_SECRET changed: %+v", e)
	}
	if e := env(migrate, "MIGRATIONS"); e == nil || strings.Join(migrate.Command, " ") != "migrate -path /migrations up" || migrate.Image != "migrate:ok" {
		t.Fatalf("the migration container changed beyond its database: %+v", migrate)
	}
	if spec.ServiceAccountName != "migrator" || spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("pod spec: sa %q securityContext %v restartPolicy %s", spec.ServiceAccountName, spec.SecurityContext, spec.RestartPolicy)
	}
	if len(spec.Containers) != 1 || spec.Containers[0].Name != ProbeContainerReport || spec.Containers[0].Image != "schemagate:v1" {
		t.Fatalf("containers %+v", spec.Containers)
	}
	// The probe's own containers run as restricted Pod Security admits; the team's as they are.
	for _, c := range append(spec.InitContainers[:3:3], spec.Containers[0]) {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser == 0 || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.SeccompProfile == nil {
			t.Errorf("container %s: security context %+v", c.Name, sc)
		}
	}
	if migrate.SecurityContext != nil {
		t.Errorf("the migration's security context changed: %+v", migrate.SecurityContext)
	}

	// spec.schema.probe.databaseImage and databaseEnv win.
	rsvc.Spec.Schema.Probe = &routingv1alpha1.ProbeSpec{DatabaseImage: "postgres:17", DatabaseEnv: "PG_URL"}
	job = NewProbeJob(rsvc, ProbeImages{Tools: "schemagate:v1", Database: "postgres:16"}, "2", "1", 1)
	migrate = job.Spec.Template.Spec.InitContainers[3]
	if job.Spec.Template.Spec.InitContainers[1].Image != "postgres:17" || env(migrate, "PG_URL") == nil || env(migrate, "DATABASE_URL").ValueFrom == nil {
		t.Fatalf("databaseImage or databaseEnv ignored: %+v", job.Spec.Template.Spec.InitContainers)
	}
}

// A probe's report is untrusted: what cannot be read, or a pod another Job controls, is never a
// verdict that lets a migration through as expand.
func TestReadProbeTrustsOnlyItsOwnReport(t *testing.T) {
	rsvc := fixture()
	w := newWorld(t)
	job := NewProbeJob(rsvc, ProbeImages{Tools: "t", Database: "d"}, "2", "1", 1)
	job.UID = "probe-uid"
	job.Status.Conditions = completeConditions()
	pod := func(owner types.UID, message string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: owner, Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: ProbeContainerReport,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: message}}}}}}
	}
	expand, _ := schemadiff.NewReport(nil).Encode()
	for name, tc := range map[string]struct {
		pods []*corev1.Pod
		want string
	}{
		"its own report":        {[]*corev1.Pod{pod("probe-uid", string(expand))}, "expand"},
		"no pod":                {nil, ProbeUnreadable},
		"another Job's pod":     {[]*corev1.Pod{pod("other", string(expand))}, ProbeUnreadable},
		"not a report":          {[]*corev1.Pod{pod("probe-uid", "all good")}, ProbeUnreadable},
		"over 4096 bytes":       {[]*corev1.Pod{pod("probe-uid", string(expand[:len(expand)-1])+`,"x":"`+strings.Repeat("x", 5000)+`"}`)}, ProbeUnreadable},
		"a verdict too lenient": {[]*corev1.Pod{pod("probe-uid", `{"schemagate":"probe-report/v1","verdict":"expand","changes":[{"class":"breaking","kind":"column-dropped"}]}`)}, ProbeUnreadable},
	} {
		if got := readProbe(job, tc.pods, w.now).verdict; got != tc.want {
			t.Errorf("%s: verdict %q, want %q", name, got, tc.want)
		}
	}
	// What was recorded on the Job speaks once the pod is gone, and only then.
	breaking, _ := schemadiff.NewReport([]schemadiff.Change{{Class: schemadiff.Breaking, Kind: schemadiff.ColumnDropped, Table: "routes", Column: "upstream"}}).Encode()
	job.Annotations[annotationProbeReport] = string(breaking)
	if got := readProbe(job, nil, w.now).verdict; got != "breaking" {
		t.Errorf("the recorded report with the pod gone: %q, want breaking", got)
	}
	if got := readProbe(job, []*corev1.Pod{pod("probe-uid", string(expand))}, w.now).verdict; got != "expand" {
		t.Errorf("the pod's report and a recorded one: %q, want the pod's", got)
	}
}
