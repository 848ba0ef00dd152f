{{/* Chart name, overridable with nameOverride. */}}
{{- define "kafka-mirror-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects. The release name is used as it is when it
already contains the chart name, so `helm install kafka-mirror-operator` does not produce
"kafka-mirror-operator-kafka-mirror-operator". Truncated to 63 characters (DNS label limit).
*/}}
{{- define "kafka-mirror-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Chart label value: name-version. */}}
{{- define "kafka-mirror-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object of the release. */}}
{{- define "kafka-mirror-operator.labels" -}}
helm.sh/chart: {{ include "kafka-mirror-operator.chart" . }}
{{ include "kafka-mirror-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ include "kafka-mirror-operator.imageTag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kafka-mirror
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the operator's pods; never change them after a release (immutable selector). */}}
{{- define "kafka-mirror-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kafka-mirror-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* ServiceAccount the operator runs as. */}}
{{- define "kafka-mirror-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kafka-mirror-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Operator image reference; a digest wins over a tag. */}}
{{- define "kafka-mirror-operator.image" -}}
{{- $tag := include "kafka-mirror-operator.imageTag" . }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Image of the mirror engine pods the operator creates: the operator's own image unless overridden. */}}
{{- define "kafka-mirror-operator.engineImage" -}}
{{- if .Values.engineImage }}
{{- .Values.engineImage }}
{{- else }}
{{- include "kafka-mirror-operator.image" . }}
{{- end }}
{{- end }}

{{/*
The operator image tag: image.tag, or the chart's appVersion. `--set image.tag=7195534` (an
all-digit short hash or date tag) arrives as a number; print it as the digits it was, never
in exponent form.
*/}}
{{- define "kafka-mirror-operator.imageTag" -}}
{{- $tag := .Values.image.tag -}}
{{- if kindIs "string" $tag -}}
{{- $tag | default .Chart.AppVersion -}}
{{- else -}}
{{- int64 $tag | toString -}}
{{- end -}}
{{- end }}

{{/*
The namespaces where the operator may get Secrets, comma-separated: "*" for every namespace
(rbac.secretNamespaces: ["*"], the opt-in), else the release namespace followed by
rbac.secretNamespaces, or by watchNamespace's namespaces when that list is empty.
*/}}
{{- define "kafka-mirror-operator.secretNamespaces" -}}
{{- $namespaces := .Values.rbac.secretNamespaces }}
{{- if has "*" $namespaces }}
{{- if gt (len $namespaces) 1 }}
{{- fail "rbac.secretNamespaces: \"*\" (Secrets in every namespace) cannot be combined with namespace names; list the namespaces, or set [\"*\"] alone" }}
{{- end }}
{{- "*" }}
{{- else }}
{{- if and (not $namespaces) .Values.watchNamespace }}
{{- $namespaces = splitList "," .Values.watchNamespace }}
{{- end }}
{{- prepend $namespaces .Release.Namespace | uniq | join "," }}
{{- end }}
{{- end }}
