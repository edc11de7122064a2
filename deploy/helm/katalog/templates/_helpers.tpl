{{/*
The name of every object: the release name when it contains the chart's name
(`helm install katalog ...` gives `katalog`, the kustomize base's names),
else <release>-katalog.
*/}}
{{- define "katalog.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "katalog.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of the kustomize base, and Helm's. */}}
{{- define "katalog.labels" -}}
{{ include "katalog.selectorLabels" . }}
app.kubernetes.io/part-of: katalog
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "katalog.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "katalog.fullname" .) -}}
{{- end -}}

{{/* The Secret holding the serving certificate, in both modes. */}}
{{- define "katalog.tlsSecret" -}}
{{- printf "%s-tls" (include "katalog.fullname" .) -}}
{{- end -}}

{{- define "katalog.configMapName" -}}
{{- .Values.katalog.existingConfigMap | default (include "katalog.fullname" .) -}}
{{- end -}}

{{- define "katalog.selfSigned" -}}
{{- if eq .Values.certificates.mode "self-signed" -}}true{{- end -}}
{{- end -}}

{{/*
The rules of a kind (ClusterRole or Role) in deploy/base/rbac.yaml
(files/rbac.yaml links to it), so the chart grants what the kustomize base
grants, no more: the object names there that start with `katalog-` (the
Secret, the Lease, the webhook configurations) are renamed after this
release, and the CRD rule names `rbac.crds` when set (the CRDs the Katalog
converts). Usage: include "katalog.baseRules" (list . "ClusterRole")
*/}}
{{- define "katalog.baseRules" -}}
{{- $root := index . 0 -}}
{{- $kind := index . 1 -}}
{{- $fullname := include "katalog.fullname" $root -}}
{{- $rules := list -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" ($root.Files.Get "files/rbac.yaml") -1 -}}
{{- $object := fromYaml $doc -}}
{{- if eq (get $object "kind" | default "") $kind -}}
{{- range $rule := $object.rules -}}
{{- if and (has "customresourcedefinitions" $rule.resources) $root.Values.rbac.crds -}}
{{- $_ := set $rule "resourceNames" $root.Values.rbac.crds -}}
{{- else if hasKey $rule "resourceNames" -}}
{{- $names := list -}}
{{- range $name := $rule.resourceNames -}}
{{- if hasPrefix "katalog-" $name -}}
{{- $names = append $names (printf "%s-%s" $fullname (trimPrefix "katalog-" $name)) -}}
{{- else -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- $_ := set $rule "resourceNames" $names -}}
{{- end -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $rules -}}
{{- fail (printf "files/rbac.yaml (deploy/base/rbac.yaml) has no %s rules" $kind) -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}
