package rollout

import (
	"fmt"
	"maps"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// ComponentProbe labels migration probe Jobs and their pods (spec.schema.probe).
const ComponentProbe = "probe"

// annotationProbeFrom records, on a probe Job, the schema version the database was confirmed at
// when the probe started: the version its scratch copy starts from. It is part of the Job's name
// (ProbeJobName), so an edited annotation makes the Job count for nothing.
const annotationProbeFrom = "schemagate.io/probe-from"

// ProbeImages are the images a manager runs migration probes with (its --probe-image and
// --probe-database-image flags). A nil *ProbeImages runs no probe.
type ProbeImages struct {
	// Tools is an image holding /schemagate-schema (schemagate's own image does).
	Tools string
	// Database is the scratch PostgreSQL's image (the official postgres image's entrypoint and
	// its pg_dump, psql and pg_isready); spec.schema.probe.databaseImage overrides it.
	Database string
}

// The probe pod's containers, in the order they run (docs/schema-lifecycle.md, "The probe in the
// cluster"). ProbeContainerMigrate is the team's migration container, renamed.
const (
	ProbeContainerTools   = "probe-tools"
	ProbeContainerScratch = "probe-scratch"
	ProbeContainerCopy    = "probe-copy"
	ProbeContainerMigrate = "migrate"
	ProbeContainerReport  = "probe-report"
)

// probeScratchURL is the scratch database as every container of the probe pod reaches it: the
// sidecar listens on the pod's loopback only, with trust authentication, and lives as long as
// the pod.
const probeScratchURL = "postgres://postgres@127.0.0.1:" + probeScratchPort + "/postgres?sslmode=disable"

// probeScratchPort is the scratch database's port: not PostgreSQL's default, which a proxy
// sidecar of the migration template (or a database the template reaches on the pod's loopback)
// may hold.
const probeScratchPort = "55432"

// envScratchURL holds probeScratchURL in the copy step, whose databaseEnv is the database's.
const envScratchURL = "SCHEMAGATE_SCRATCH_DATABASE_URL"

// probeDir is the emptyDir the tools container copies schemagate-schema into, and where the copy
// step leaves the catalog the report step compares with.
const probeDir = "/schemagate-probe"

// ProbeJobName is <routingservice>-probe-<hash of version, from and migration template>-<n>, at
// most 40+7+10+1+5 = 63 characters: one probe per target version, starting version and template
// (a probe runs once for each), and n counts the attempts a retry starts.
func ProbeJobName(rsvcName, version, from, templateHash string, n int32) string {
	return fmt.Sprintf("%s-probe-%s-%d", rsvcName, shortHash([]string{version, from, templateHash}), n)
}

// NewProbeJob builds attempt n of the probe of the migration to version from the database's
// version from. Its pod:
//
//  1. probe-tools copies schemagate-schema into an emptyDir (the images run next have no
//     schemagate-schema of their own);
//  2. probe-scratch, a sidecar (an init container with restartPolicy Always), runs PostgreSQL on
//     the pod's loopback; its startup probe (pg_isready) holds the next steps until it answers;
//  3. probe-copy, in the database image (for its pg_dump and psql), copies the database's schema
//     and the migration tools' own tables into the scratch database and captures its catalog,
//     reading the database through the migration container's spec.schema.probe.databaseEnv;
//  4. the migration template's own init containers, then its first container, renamed migrate,
//     with databaseEnv pointed at the scratch database: the team's migration, unchanged otherwise;
//  5. probe-report captures the catalog again and writes the probe report (pkg/schemadiff) as its
//     termination message.
//
// The pod keeps the migration template's service account, pull secrets, placement and DNS, and
// its pod's fsGroup and supplemental groups, never the rest of its pod-level security context
// (the scratch database's entrypoint starts as root, then drops to the postgres user). backoffLimit is 0: a probe that fails is read, not retried.
func NewProbeJob(rsvc *routingv1alpha1.RoutingService, images ProbeImages, version, from string, n int32) *batchv1.Job {
	probe := rsvc.Spec.Schema.Probe
	hash := migrationTemplateHash(rsvc)
	labels := map[string]string{
		LabelManagedBy:     ManagedByValue,
		LabelComponent:     ComponentProbe,
		LabelName:          rsvc.Name,
		LabelSchemaVersion: version,
		LabelAttempt:       strconv.Itoa(int(n)),
	}
	src := rsvc.Spec.Schema.Migration.Template
	dbImage := images.Database
	if probe != nil && probe.DatabaseImage != "" {
		dbImage = probe.DatabaseImage
	}
	envName := probe.DatabaseEnvOrDefault()
	mount := []corev1.VolumeMount{{Name: "schemagate-probe", MountPath: probeDir}}
	scratchEnv := corev1.EnvVar{Name: "DATABASE_URL", Value: probeScratchURL}
	tool := probeDir + "/schemagate-schema"
	catalog := "--catalog=" + probeDir + "/before.json"

	var migrate corev1.Container
	if len(src.Spec.Containers) > 0 {
		migrate = *src.Spec.Containers[0].DeepCopy()
	}
	migrate.Name = ProbeContainerMigrate
	migrate.Env = withEnv(migrate.Env, corev1.EnvVar{Name: envName, Value: probeScratchURL})
	migrate.Env = withEnv(migrate.Env, corev1.EnvVar{Name: EnvSchemaVersion, Value: version})
	// What an init container may not have (the API server would refuse the Job).
	migrate.Ports, migrate.ReadinessProbe, migrate.LivenessProbe, migrate.StartupProbe = nil, nil, nil, nil
	migrate.Lifecycle, migrate.ResizePolicy, migrate.RestartPolicy = nil, nil, nil

	// The copy step reads the database as the migration container would: with its environment
	// (env and envFrom), through databaseEnv; the scratch database comes in its own variable.
	var copyEnv []corev1.EnvVar
	var copyFrom []corev1.EnvFromSource
	if len(src.Spec.Containers) > 0 {
		copyEnv, copyFrom = src.Spec.Containers[0].DeepCopy().Env, src.Spec.Containers[0].DeepCopy().EnvFrom
	}
	copyEnv = withEnv(copyEnv, corev1.EnvVar{Name: envScratchURL, Value: probeScratchURL})

	init := []corev1.Container{
		{Name: ProbeContainerTools, Image: images.Tools, Command: []string{"/schemagate-schema", "probe", "install", "--to=" + tool}, VolumeMounts: mount},
		{Name: ProbeContainerScratch, Image: dbImage, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Args: []string{"-c", "listen_addresses=127.0.0.1", "-c", "port=" + probeScratchPort, "-c", "fsync=off"},
			Env:  []corev1.EnvVar{{Name: "POSTGRES_HOST_AUTH_METHOD", Value: "trust"}},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"pg_isready", "-h", "127.0.0.1", "-p", probeScratchPort, "-U", "postgres"}}},
				PeriodSeconds: 1, FailureThreshold: 120}},
		{Name: ProbeContainerCopy, Image: dbImage, Command: []string{tool, "probe", "copy", catalog, "--database-url-env=" + envScratchURL, "--source-url-env=" + envName},
			VolumeMounts: mount, Env: copyEnv, EnvFrom: copyFrom},
	}
	for _, c := range src.Spec.InitContainers {
		c := *c.DeepCopy()
		c.Env = withEnv(c.Env, corev1.EnvVar{Name: envName, Value: probeScratchURL})
		init = append(init, c)
	}
	init = append(init, migrate)

	// The kubelet shares 12 KiB of termination messages among a pod's containers: the report is
	// bounded to its share (at least 1 KiB; the verdict always fits).
	maxReport := min(max(12288/(len(init)+1), 1024), 4096)
	spec := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		ServiceAccountName:           src.Spec.ServiceAccountName,
		AutomountServiceAccountToken: src.Spec.AutomountServiceAccountToken,
		ImagePullSecrets:             src.Spec.ImagePullSecrets,
		NodeSelector:                 src.Spec.NodeSelector,
		Tolerations:                  src.Spec.Tolerations,
		Affinity:                     src.Spec.Affinity,
		HostAliases:                  src.Spec.HostAliases,
		DNSPolicy:                    src.Spec.DNSPolicy,
		DNSConfig:                    src.Spec.DNSConfig,
		InitContainers:               init,
		Containers: []corev1.Container{{Name: ProbeContainerReport, Image: images.Tools,
			Command:      []string{"/schemagate-schema", "probe", "report", catalog, fmt.Sprintf("--max-bytes=%d", maxReport)},
			VolumeMounts: mount, Env: []corev1.EnvVar{scratchEnv}, TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
		Volumes: append(src.Spec.DeepCopy().Volumes, corev1.Volume{Name: "schemagate-probe", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
	}
	if sc := src.Spec.SecurityContext; sc != nil && (sc.FSGroup != nil || len(sc.SupplementalGroups) > 0) {
		// The groups the team's container reads its mounted secrets with; never the user (the
		// scratch database's entrypoint starts as root).
		spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: sc.FSGroup, SupplementalGroups: sc.SupplementalGroups}
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: mergeLabels(src.Labels, labels), Annotations: maps.Clone(src.Annotations)}, Spec: spec}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ProbeJobName(rsvc.Name, version, from, hash, n),
			Namespace:       rsvc.Namespace,
			Labels:          maps.Clone(labels),
			Annotations:     map[string]string{annotationMigrationTemplate: hash, annotationProbeFrom: from},
			OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To(probe.ActiveDeadlineSecondsOrDefault()),
			Template:              tmpl,
		},
	}
}

// withEnv is env with v in place of any variable of its name (or appended).
func withEnv(env []corev1.EnvVar, v corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env)+1)
	for _, e := range env {
		if e.Name != v.Name {
			out = append(out, e)
		}
	}
	return append(out, v)
}
