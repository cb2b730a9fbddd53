{{/*
schemagate-spoke.namespace: the namespace everything is rendered into: .Values.namespace, else
the release's.
*/}}
{{- define "schemagate-spoke.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{- define "schemagate-spoke.labels" -}}
app.kubernetes.io/name: schemagate-spoke
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}
