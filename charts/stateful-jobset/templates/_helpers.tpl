{{/*
Labels of every object: the ones manifests/ gives (name, part-of) and helm's. Selectors use only
stateful-jobset.selectorLabels, the same as manifests/, so a Deployment applied with kustomize can
be taken over by this chart (a selector never changes).
*/}}
{{- define "stateful-jobset.labels" -}}
app.kubernetes.io/name: stateful-jobset
app.kubernetes.io/part-of: stateful-jobset
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "stateful-jobset.controllerLabels" -}}
{{ include "stateful-jobset.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "stateful-jobset.selectorLabels" -}}
app.kubernetes.io/name: stateful-jobset
app.kubernetes.io/component: controller
{{- end }}

{{/* Any feature gate on. */}}
{{- define "stateful-jobset.anyGate" -}}
{{- range $name, $on := .Values.featureGates }}{{ if $on }}true{{ end }}{{ end }}
{{- end }}

{{/* The --feature-gates value naming every gate, sorted: ElasticJobSet=false,RestartJob=true. */}}
{{- define "stateful-jobset.featureGates" -}}
{{- $gates := list }}
{{- range $name := keys .Values.featureGates | sortAlpha }}
{{- $gates = append $gates (printf "%s=%t" $name (get $.Values.featureGates $name)) }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/* /metrics port name: service meshes and tools read an http-* name as plain HTTP. */}}
{{- define "stateful-jobset.metricsPort" -}}
{{ if .Values.metrics.secure.enabled }}https-metrics{{ else }}http-metrics{{ end }}
{{- end }}

{{/* /metrics port number: 8443 for HTTPS (upstream's), 8080 for plain HTTP. */}}
{{- define "stateful-jobset.metricsPortNumber" -}}
{{ if .Values.metrics.secure.enabled }}8443{{ else }}8080{{ end }}
{{- end }}

{{/* The metrics certificate comes from a Secret (HTTPS and a secretName). */}}
{{- define "stateful-jobset.metricsSecret" -}}
{{ if and .Values.metrics.secure.enabled .Values.metrics.secure.secretName }}true{{ end }}
{{- end }}

{{/*
A generated manifest copied into files/ (python -m controller.api.chartgen), with labels (and
annotations) added under its top-level metadata. The text is kept as generated (CEL as literal
blocks, key order) rather than parsed and re-serialised.
Arguments: list of root context, file path, extra annotations (a dict, may be empty).
*/}}
{{- define "stateful-jobset.generated" -}}
{{- $root := index . 0 }}
{{- $text := $root.Files.Get (index . 1) }}
{{- $annotations := index . 2 }}
{{- if not (contains "\nmetadata:\n" $text) }}
{{- fail (printf "%s: no top-level metadata (regenerate with python -m controller.api.chartgen)" (index . 1)) }}
{{- end }}
{{- $meta := printf "\nmetadata:\n  labels:\n%s\n" (include "stateful-jobset.labels" $root | indent 4) }}
{{- if $annotations }}
{{- $meta = printf "%s  annotations:\n%s\n" $meta (toYaml $annotations | indent 4) }}
{{- if contains "\nmetadata:\n  annotations:\n" $text }}
{{- $text = replace "\nmetadata:\n  annotations:\n" $meta $text }}
{{- else }}
{{- $text = replace "\nmetadata:\n" $meta $text }}
{{- end }}
{{- else }}
{{- $text = replace "\nmetadata:\n" $meta $text }}
{{- end }}
{{- $text }}
{{- end }}
