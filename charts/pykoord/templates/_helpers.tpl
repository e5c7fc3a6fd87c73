{{/* The install namespace (Koordinator's installation.namespace). */}}
{{- define "pykoord.namespace" -}}
{{- .Values.installation.namespace -}}
{{- end -}}

{{/* The image both workloads run: [imageRepositoryHost/]image.repository:tag. */}}
{{- define "pykoord.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.imageRepositoryHost -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .Values.imageRepositoryHost) .Values.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Standard labels; call with (dict "ctx" $ "component" "koord-scheduler"). */}}
{{- define "pykoord.labels" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: pykoord
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* koordlet's feature gates: koordlet.featureGates, then koordlet.features ("A=true,B=false") over them. */}}
{{- define "pykoord.koordletFeatureGates" -}}
{{- $gates := deepCopy .Values.koordlet.featureGates -}}
{{- range $pair := splitList "," (.Values.koordlet.features | toString) -}}
{{- $pair = trim $pair -}}
{{- if $pair -}}
{{- $kv := splitList "=" $pair -}}
{{- if ne (len $kv) 2 -}}
{{- fail (printf "koordlet.features: %q is not Name=true|false" $pair) -}}
{{- end -}}
{{- $value := lower (trim (index $kv 1)) -}}
{{- if not (has $value (list "true" "false")) -}}
{{- fail (printf "koordlet.features: %q: the value must be true or false" $pair) -}}
{{- end -}}
{{- $_ := set $gates (trim (index $kv 0)) (eq $value "true") -}}
{{- end -}}
{{- end -}}
{{- $known := include "pykoord.koordletGateNames" . | replace "\n" " " | splitList " " -}}
{{- range $name, $_ := $gates -}}
{{- if not (has $name $known) -}}
{{- fail (printf "koordlet.features / koordlet.featureGates: %q is not a koordlet feature gate (known: %s)" $name (join ", " $known)) -}}
{{- end -}}
{{- end -}}
{{- toYaml $gates -}}
{{- end -}}

{{/* koordlet's feature gates (koordlet/qosmanager; tests/unit/deploy/test_chart.py keeps this list equal). */}}
{{- define "pykoord.koordletGateNames" -}}
Accelerators AuditEvents AuditEventsHTTPHandler BECPUEvict BECPUManager BECPUSuppress BECPUThrottleReporter
BEMemoryEvict BatchResource BlkIOReconcile CPICollector CPUAllocatableEvict CPUBurst CPUEvict CPUNormalization
CPUSetAllocator CgroupReconcile ColdPageCollector CoreSched GPUEnvInject GroupIdentity HamiCoreVGPUMonitor
HugePageReport Libpfm4 MemoryAllocatableEvict MemoryEvict NodeMetricPromMetrics NodeTopologyReport OOMScoreAdj
PSICollector PerCPUMetric PodResourcesProxy RDMADeviceInject RDMADevices RdtResctrl Resctrl ResctrlCollector
SystemConfig TCNetworkQoS TerwayQoS
{{- end -}}

{{/*
The values keys pykoord uses. Any other key with a non-empty value (Koordinator's keys for components
pykoord does not have, such as deviceDaemon or manager.replicas) is reported by "pykoord.unsupported".
*/}}
{{- define "pykoord.supportedKeys" -}}
installation.namespace installation.createNamespace imageRepositoryHost image imagePullSecrets
serviceAccount.annotations commonLabels crds
scheduler.log.level scheduler.replicas scheduler.port scheduler.enableJobPreemption scheduler.deviceShare
scheduler.resources scheduler.hostNetwork scheduler.nodeAffinity scheduler.nodeSelector scheduler.tolerations
scheduler.monitorEnabled scheduler.podDisruptionBudget
manager.controllers manager.webhook.port
descheduler.enabled descheduler.log.level descheduler.replicas descheduler.port descheduler.resources
descheduler.hostNetwork descheduler.nodeAffinity descheduler.nodeSelector descheduler.tolerations descheduler.config
webhookConfiguration.failurePolicy.pods webhookConfiguration.failurePolicy.elasticquotas
webhookConfiguration.timeoutSeconds
koordlet.log.level koordlet.features koordlet.featureGates koordlet.hostDirs.kubeletLibDir koordlet.hostDirs.varRunDir
koordlet.hostDirs.predictionCheckpointDir koordlet.nri koordlet.cgroupKubepodsDir koordlet.resources
koordlet.runtimeClassName koordlet.nodeAffinity koordlet.metrics.port koordlet.enableServiceMonitor
sloControllerConfig networkPolicy tests strictValues grafanaDashboards
{{- end -}}

{{/* Walks (dict "path" "" "value" .Values "supported" list "acc" dict): sets acc[path] for each unused key. */}}
{{- define "pykoord.walk" -}}
{{- $path := .path -}}
{{- if not (has $path .supported) -}}
{{- $inner := false -}}
{{- range $.supported -}}
{{- if or (eq $path "") (hasPrefix (printf "%s." $path) .) -}}
{{- $inner = true -}}
{{- end -}}
{{- end -}}
{{- if and $inner (kindIs "map" .value) -}}
{{- range $key, $value := .value -}}
{{- $child := ternary $key (printf "%s.%s" $path $key) (eq $path "") -}}
{{- include "pykoord.walk" (dict "path" $child "value" $value "supported" $.supported "acc" $.acc) -}}
{{- end -}}
{{- else if not (empty .value) -}}
{{- $_ := set .acc $path true -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The unused values keys, sorted, one per line ("" when there are none). */}}
{{- define "pykoord.unsupported" -}}
{{- $acc := dict -}}
{{- $_ := include "pykoord.walk" (dict "path" "" "value" .Values "supported" (include "pykoord.supportedKeys" . | splitList "\n" | join " " | splitList " " | compact) "acc" $acc) -}}
{{- keys $acc | sortAlpha | join "\n" -}}
{{- end -}}
