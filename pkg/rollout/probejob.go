package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

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
// The pod keeps the migration template's service account, pull secrets, placement, DNS and pod
// security context; the probe's own containers run as restricted Pod Security admits
// (restrictedAs). backoffLimit is 0: a probe that fails is read, not retried.
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
	migrate.Env = toScratch(migrate.Env, envName)
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
		{Name: ProbeContainerTools, Image: images.Tools, Command: []string{"/schemagate-schema", "probe", "install", "--to=" + tool}, VolumeMounts: mount,
			SecurityContext: restrictedAs(toolsUser)},
		{Name: ProbeContainerScratch, Image: dbImage, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), SecurityContext: restrictedAs(postgresUser),
			Args: []string{"-c", "listen_addresses=127.0.0.1", "-c", "port=" + probeScratchPort, "-c", "fsync=off"},
			Env:  []corev1.EnvVar{{Name: "POSTGRES_HOST_AUTH_METHOD", Value: "trust"}},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"pg_isready", "-h", "127.0.0.1", "-p", probeScratchPort, "-U", "postgres"}}},
				PeriodSeconds: 1, FailureThreshold: 120}},
		{Name: ProbeContainerCopy, Image: dbImage, Command: []string{tool, "probe", "copy", catalog, "--database-url-env=" + envScratchURL, "--source-url-env=" + envName},
			VolumeMounts: mount, Env: copyEnv, EnvFrom: copyFrom, SecurityContext: restrictedAs(postgresUser)},
	}
	for _, c := range src.Spec.InitContainers {
		c := *c.DeepCopy()
		c.Env = toScratch(c.Env, envName)
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
			VolumeMounts: mount, Env: []corev1.EnvVar{scratchEnv}, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext: restrictedAs(toolsUser)}},
		Volumes: append(src.Spec.DeepCopy().Volumes, corev1.Volume{Name: "schemagate-probe", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
	}
	// The team's pod security context, whole: its user and groups are the team's containers'
	// (the probe's own set their users), its fsGroup what they read mounted secrets with.
	spec.SecurityContext = src.Spec.SecurityContext.DeepCopy()
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

// The users the probe's own containers run as: schemagate's image's nonroot user (docs/image.md),
// and the postgres user of the official postgres image (its Debian images; the image's data and
// socket folders are writable by any user, so another image's user works as well).
const (
	toolsUser    int64 = 65532
	postgresUser int64 = 999
)

// restrictedAs is a container security context the Pod Security Standards' restricted profile
// admits: user uid (never root), no privilege escalation, no capabilities, the runtime's default
// seccomp profile. The probe's own containers run so, and a probe pod in a restricted namespace
// is admitted when the team's migration containers are.
func restrictedAs(uid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsUser: ptr.To(uid), RunAsGroup: ptr.To(uid), RunAsNonRoot: ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// libpqScratch are the variables libpq (psql, pg_dump, and the tools built on it) reads when a
// connection string leaves a part out, set to the scratch database's: a migration that connects
// with them rather than with databaseEnv reaches the scratch database too. The password is
// emptied (the scratch database trusts every local connection).
var libpqScratch = []corev1.EnvVar{
	{Name: "PGHOST", Value: "127.0.0.1"}, {Name: "PGHOSTADDR", Value: "127.0.0.1"}, {Name: "PGPORT", Value: probeScratchPort},
	{Name: "PGUSER", Value: "postgres"}, {Name: "PGDATABASE", Value: "postgres"}, {Name: "PGPASSWORD", Value: ""},
	{Name: "PGSSLMODE", Value: "disable"},
}

// libpqDropped are libpq's variables that name a file or a service to read a database's
// address from: dropped from a team's container's env (a value from envFrom cannot be).
var libpqDropped = []string{"PGSERVICE", "PGSERVICEFILE", "PGPASSFILE", "PGSYSCONFDIR"}

// toScratch is a team container's env pointed at the probe's scratch database: envName, every
// variable whose value comes from where envName's does (the same literal, Secret key or
// ConfigMap key: GOOSE_DBSTRING beside DATABASE_URL), every literal that names a database
// (namesDatabase), and libpq's
// own variables (libpqScratch, libpqDropped). What it cannot redirect, a probe refuses to run
// (probeUnsafe).
func toScratch(env []corev1.EnvVar, envName string) []corev1.EnvVar {
	var source *corev1.EnvVar
	for i := range env {
		if env[i].Name == envName {
			source = &env[i]
		}
	}
	out := make([]corev1.EnvVar, 0, len(env)+len(libpqScratch)+1)
	for _, e := range env {
		switch {
		case slices.Contains(libpqDropped, e.Name):
		case e.Name == envName, source != nil && sameSource(e, *source), namesDatabase(e.Value):
			out = append(out, corev1.EnvVar{Name: e.Name, Value: probeScratchURL})
		default:
			out = append(out, e)
		}
	}
	out = withEnv(out, corev1.EnvVar{Name: envName, Value: probeScratchURL})
	for _, v := range libpqScratch {
		out = withEnv(out, v)
	}
	return out
}

// sameSource reports whether a and b take their value from the same place: one literal, or one
// key of one Secret or ConfigMap.
func sameSource(a, b corev1.EnvVar) bool {
	switch {
	case a.ValueFrom == nil && b.ValueFrom == nil:
		return a.Value != "" && a.Value == b.Value
	case a.ValueFrom == nil || b.ValueFrom == nil:
		return false
	case a.ValueFrom.SecretKeyRef != nil && b.ValueFrom.SecretKeyRef != nil:
		return a.ValueFrom.SecretKeyRef.Name == b.ValueFrom.SecretKeyRef.Name && a.ValueFrom.SecretKeyRef.Key == b.ValueFrom.SecretKeyRef.Key
	case a.ValueFrom.ConfigMapKeyRef != nil && b.ValueFrom.ConfigMapKeyRef != nil:
		return a.ValueFrom.ConfigMapKeyRef.Name == b.ValueFrom.ConfigMapKeyRef.Name && a.ValueFrom.ConfigMapKeyRef.Key == b.ValueFrom.ConfigMapKeyRef.Key
	}
	return false
}

// namesDatabase reports whether s names a PostgreSQL database: it holds a postgres:// or
// postgresql:// URL, or a libpq connection string's host or hostaddr keyword.
func namesDatabase(s string) bool {
	s = strings.ToLower(s)
	if strings.Contains(s, "postgres://") || strings.Contains(s, "postgresql://") {
		return true
	}
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "host=") || strings.HasPrefix(f, "hostaddr=") {
			return true
		}
	}
	return false
}

// probeUnsafe says why the probe cannot point the migration template at its scratch database
// (and so never runs it: it would migrate the database it names), or "": a container of the
// template whose command or args name a database (namesDatabase).
func probeUnsafe(rsvc *routingv1alpha1.RoutingService) string {
	spec := rsvc.Spec.Schema.Migration.Template.Spec
	containers := slices.Concat(spec.InitContainers, spec.Containers[:min(1, len(spec.Containers))])
	for _, c := range containers {
		for _, arg := range slices.Concat(c.Command, c.Args) {
			if namesDatabase(arg) {
				return fmt.Sprintf("container %s of spec.schema.migration.template names its database in its command or args, which the probe cannot point at its scratch database; pass the address in %s (spec.schema.probe.databaseEnv), as $(%s) in args if the tool takes it there",
					c.Name, rsvc.Spec.Schema.Probe.DatabaseEnvOrDefault(), rsvc.Spec.Schema.Probe.DatabaseEnvOrDefault())
			}
		}
	}
	return ""
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
