package rollout

import (
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

func controllerRef(rsvc *routingv1alpha1.RoutingService) metav1.OwnerReference {
	return *metav1.NewControllerRef(rsvc, routingv1alpha1.GroupVersion.WithKind("RoutingService"))
}

// ReplicaSetLabels are the labels and selector of a shard's ReplicaSet of a revision.
func ReplicaSetLabels(rsvcName, shard, revision string) map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedByValue,
		LabelComponent: ComponentRouting,
		LabelName:      rsvcName,
		LabelShard:     shard,
		LabelRevision:  revision,
	}
}

// NewReplicaSet builds the ReplicaSet of revision in shard: spec.template with the shard's
// nodeSelector merged in (the shard's entries win), schemagate's labels, minReadySeconds from the
// strategy, the schema version it requires and the range it runs on as annotations (ranges.go),
// and a controller reference to rsvc.
func NewReplicaSet(rsvc *routingv1alpha1.RoutingService, shard routingv1alpha1.ShardSpec, revision string, replicas int32) *appsv1.ReplicaSet {
	labels := ReplicaSetLabels(rsvc.Name, shard.Name, revision)
	annotations := rangeAnnotations(&rsvc.Spec.Schema)
	annotations[annotationSchemaVersion] = rsvc.Spec.Schema.Version
	if shard.Autoscaling != nil {
		annotations[AnnotationPromotionReplicas] = strconv.Itoa(int(shard.Replicas))
	}
	tmpl := *rsvc.Spec.Template.DeepCopy()
	tmpl.Labels = mergeLabels(tmpl.Labels, labels)
	if rsvc.Spec.Strategy.PodReadyCheck() != nil && !hasPodCheckGate(&tmpl.Spec) {
		// The check at PodReady decides when a pod is Ready (podcheck.go).
		tmpl.Spec.ReadinessGates = append(tmpl.Spec.ReadinessGates, corev1.PodReadinessGate{ConditionType: routingv1alpha1.PodCheckGate})
	}
	if len(shard.NodeSelector) > 0 {
		if tmpl.Spec.NodeSelector == nil {
			tmpl.Spec.NodeSelector = map[string]string{}
		}
		maps.Copy(tmpl.Spec.NodeSelector, shard.NodeSelector)
	}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ReplicaSetName(rsvc.Name, shard.Name, revision),
			Namespace:       rsvc.Namespace,
			Labels:          maps.Clone(labels),
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        ptr.To(replicas),
			MinReadySeconds: rsvc.Spec.Strategy.MinReadySecondsOrDefault(),
			Selector:        &metav1.LabelSelector{MatchLabels: labels},
			Template:        tmpl,
		},
	}
}

// annotationSchemaVersion records, on each ReplicaSet, the schema version its revision requires;
// the invariant checker reads it (I1).
const annotationSchemaVersion = "schemagate.io/requires-schema"

// RequiredSchema returns the schema version a schemagate ReplicaSet's revision requires.
func RequiredSchema(rs *appsv1.ReplicaSet) string { return rs.Annotations[annotationSchemaVersion] }

// NewMigrationJob builds the migration Job for (version, attempt): spec.schema.migration.jobMetadata
// on the Job (schemagate's own keys win), the migration pod template with schemagate's labels, SCHEMAGATE_SCHEMA_VERSION in every container, backoffLimit and
// activeDeadlineSeconds from the spec, no TTL (the Job is kept for its logs and as the evidence
// that confirms the version), and a controller reference to rsvc.
func NewMigrationJob(rsvc *routingv1alpha1.RoutingService, version string, attempt int32) *batchv1.Job {
	m := rsvc.Spec.Schema.Migration
	j := newSchemaJob(rsvc, ComponentMigration, MigrationJobName(rsvc.Name, version, attempt), version, attempt,
		m.Template, m.BackoffLimitOrDefault(), migrationDeadlineSeconds(rsvc))
	meta := jobMetadata(rsvc)
	j.Labels = mergeMetadata(meta.Labels, j.Labels)
	j.Annotations = mergeMetadata(meta.Annotations, map[string]string{annotationMigrationTemplate: migrationTemplateHash(rsvc)})
	return j
}

// NewCheckJob builds the n-th check Job for a required version from spec.schema.check, which the
// caller ensures is set: like a migration Job, with component "check" and the check's backoffLimit
// and activeDeadlineSeconds.
func NewCheckJob(rsvc *routingv1alpha1.RoutingService, version string, n int32) *batchv1.Job {
	c := rsvc.Spec.Schema.Check
	return newSchemaJob(rsvc, ComponentCheck, CheckJobName(rsvc.Name, version, n), version, n,
		c.Template, c.BackoffLimitOrDefault(), c.ActiveDeadlineSecondsOrDefault())
}

// NewShardCheckJob builds the Job of check for shard, revision, moment and attempt (from 1): its
// pod template with schemagate's labels (component "shard-check", the shard, the revision, the
// check, when, the attempt),
// SCHEMAGATE_SHARD, SCHEMAGATE_REVISION, SCHEMAGATE_SCHEMA_VERSION and SCHEMAGATE_CHECK in every
// container, the check's backoffLimit and activeDeadlineSeconds, and a controller reference to
// rsvc.
func NewShardCheckJob(rsvc *routingv1alpha1.RoutingService, shard string, check routingv1alpha1.ShardCheck, revision string, when routingv1alpha1.CheckWhen, attempt int32) *batchv1.Job {
	labels := map[string]string{
		LabelManagedBy:    ManagedByValue,
		LabelComponent:    ComponentShardCheck,
		LabelName:         rsvc.Name,
		LabelShard:        shard,
		LabelRevision:     revision,
		LabelCheck:        check.Name,
		LabelCheckWhen:    string(when),
		LabelCheckAttempt: strconv.Itoa(int(attempt)),
	}
	tmpl := *check.Job.Template.DeepCopy()
	tmpl.Labels = mergeLabels(tmpl.Labels, labels)
	env := []corev1.EnvVar{{Name: "SCHEMAGATE_SHARD", Value: shard}, {Name: "SCHEMAGATE_REVISION", Value: revision},
		{Name: EnvSchemaVersion, Value: rsvc.Spec.Schema.Version}, {Name: "SCHEMAGATE_CHECK", Value: check.Name}}
	for i := range tmpl.Spec.Containers {
		tmpl.Spec.Containers[i].Env = append(tmpl.Spec.Containers[i].Env, env...)
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            ShardCheckJobName(rsvc.Name, shard, check.Name, revision, when, attempt),
			Namespace:       rsvc.Namespace,
			Labels:          maps.Clone(labels),
			OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(check.Job.BackoffLimitOrDefault()),
			ActiveDeadlineSeconds: ptr.To(check.Job.ActiveDeadlineSecondsOrDefault()),
			Template:              tmpl,
		},
	}
}

// newSchemaJob builds a migration or check Job: template with schemagate's labels (the component,
// the version and the attempt n) and SCHEMAGATE_SCHEMA_VERSION in every container.
func newSchemaJob(rsvc *routingv1alpha1.RoutingService, component, name, version string, n int32,
	template corev1.PodTemplateSpec, backoff int32, deadline int64) *batchv1.Job {
	labels := map[string]string{
		LabelManagedBy:     ManagedByValue,
		LabelComponent:     component,
		LabelName:          rsvc.Name,
		LabelSchemaVersion: version,
		LabelAttempt:       strconv.Itoa(int(n)),
	}
	tmpl := *template.DeepCopy()
	tmpl.Labels = mergeLabels(tmpl.Labels, labels)
	for i := range tmpl.Spec.InitContainers {
		tmpl.Spec.InitContainers[i].Env = append(tmpl.Spec.InitContainers[i].Env, corev1.EnvVar{Name: EnvSchemaVersion, Value: version})
	}
	for i := range tmpl.Spec.Containers {
		tmpl.Spec.Containers[i].Env = append(tmpl.Spec.Containers[i].Env, corev1.EnvVar{Name: EnvSchemaVersion, Value: version})
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       rsvc.Namespace,
			Labels:          maps.Clone(labels),
			OwnerReferences: []metav1.OwnerReference{controllerRef(rsvc)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To(backoff),
			ActiveDeadlineSeconds: ptr.To(deadline),
			Template:              tmpl,
		},
	}
}

// annotationMigrationTemplate records, on each migration Job, a hash of the
// spec.schema.migration.template it was created from, so that a fixed template applied through Git
// starts the next attempt by itself (a GitOps user has no annotation to set).
const annotationMigrationTemplate = "schemagate.io/migration-template-hash"

func migrationTemplateHash(rsvc *routingv1alpha1.RoutingService) string {
	return shortHash(rsvc.Spec.Schema.Migration.Template)
}

func migrationDeadlineSeconds(rsvc *routingv1alpha1.RoutingService) int64 {
	return rsvc.Spec.Schema.Migration.ActiveDeadlineSecondsOrDefault()
}

func mergeLabels(user, ours map[string]string) map[string]string {
	out := maps.Clone(user)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, ours)
	return out
}
