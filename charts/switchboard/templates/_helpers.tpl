{{- define "switchboard.labels" -}}
app.kubernetes.io/name: switchboard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "switchboard.selector" -}}
app.kubernetes.io/name: switchboard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "switchboard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "switchboard.sidecarImage" -}}
{{ .Values.sidecar.image.repository }}:{{ .Values.sidecar.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The generated RBAC (config/rbac/role.yaml, copied by `make manifests`): document i's rules. */}}
{{- define "switchboard.generatedRules" -}}
{{- $docs := splitList "---" (.root.Files.Get "files/role.yaml") -}}
{{- $found := dict -}}
{{- range $docs -}}
{{- $doc := fromYaml . -}}
{{- if and $doc (eq (get $doc "kind") $.kind) -}}
{{- $_ := set $found "rules" (get $doc "rules") -}}
{{- end -}}
{{- end -}}
{{- toYaml (get $found "rules") -}}
{{- end }}
