{{/*
schemagate.fullname: the prefix of every object's name: the release name when it already
contains "schemagate", else "<release>-schemagate"; at most 63 characters.
*/}}
{{- define "schemagate.fullname" -}}
{{- if contains "schemagate" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-schemagate" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "schemagate.selectorLabels" -}}
app.kubernetes.io/name: schemagate
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "schemagate.labels" -}}
{{ include "schemagate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
schemagate.metricsCertDir: where the Secret metrics.certSecret is mounted, the manager's
--metrics-cert-dir.
*/}}
{{- define "schemagate.metricsCertDir" -}}
/etc/schemagate/metrics-cert
{{- end -}}

{{- define "schemagate.serviceAccountName" -}}
{{ include "schemagate.fullname" . }}-manager
{{- end -}}

{{/*
schemagate.namespacedRules: what the manager does in a namespace it watches. The same rules as
config/rbac/role.yaml, which controller-gen generates from the markers beside the reconciler;
test/install fails when this list grants less. routingservices get reads a RoutingService past
the cache while schema evidence waits and the cache lacks the manager's own last status write
(controllers/cachesync.go). routingservices patch adds and removes the finalizer of a RoutingService with shards in other
clusters. Secrets get and pods delete are in schemagate.perNamespaceRules: granted in each
watched namespace, and cluster-wide only where rbac.clusterWide says so. routingservices/finalizers update: the owner
references the manager sets block their owner's deletion, which the
OwnerReferencesPermissionEnforcement admission plugin allows only with this verb. routingshards and
horizontalpodautoscalers: the scale targets of autoscaled shards and the autoscalers schemagate
owns (controllers/scaling.go); routingshards are never patched, since an autoscaler owns their size.
*/}}
{{- define "schemagate.namespacedRules" -}}
- apiGroups: ["routing.schemagate.io"]
  resources: ["routingservices"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["routing.schemagate.io"]
  resources: ["routingservices/status"]
  verbs: ["update"]
- apiGroups: ["routing.schemagate.io"]
  resources: ["routingservices/finalizers"]
  verbs: ["update"]
- apiGroups: ["routing.schemagate.io"]
  resources: ["routingshards"]
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["routing.schemagate.io"]
  resources: ["routingshards/status"]
  verbs: ["update"]
- apiGroups: ["autoscaling"]
  resources: ["horizontalpodautoscalers"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["controllerrevisions"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end -}}

{{/*
schemagate.perNamespaceRules: what the manager may do only where it is bound per namespace
(rbac.namespaces), or everywhere with rbac.clusterWide: read a Secret by name and delete the pods
of a ReplicaSet it scaled to 0 (config/rbac/namespaced_role.yaml).
*/}}
{{- define "schemagate.perNamespaceRules" -}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["delete"]
{{- end -}}

{{/*
schemagate.metricsAuthRules: cluster-scoped, so always in a ClusterRole: the metrics endpoint
asks the API server who a scraper is (TokenReview) and whether it may GET /metrics
(SubjectAccessReview).
*/}}
{{- define "schemagate.metricsAuthRules" -}}
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
{{- end -}}

{{/* The manager's image: repository:tag, and @digest when set. */}}
{{- define "schemagate.image" -}}
{{ required "set image.repository (and image.tag) to the image you built: see docs/image.md" .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}
