{{/* Names, labels and the checks that make a bad combination of values fail with a clear message. */}}

{{- define "apns-worker.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "apns-worker.fullname" -}}
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

{{- define "apns-worker.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "apns-worker.selectorLabels" -}}
app.kubernetes.io/name: {{ include "apns-worker.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "apns-worker.labels" -}}
helm.sh/chart: {{ include "apns-worker.chart" . }}
{{ include "apns-worker.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "apns-worker.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "apns-worker.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "apns-worker.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Text as the body of a literal block scalar indented by 4: no trailing newline, and no trailing spaces on
blank lines (indent would pad them, and linters reject trailing spaces).
*/}}
{{- define "apns-worker.blockScalar" -}}
{{- regexReplaceAll "(?m)[ \t]+$" (. | trimSuffix "\n" | nindent 4) "" }}
{{- end }}

{{/* Seconds a preStop sleep (lifecycle.preStop.sleep) takes out of the grace period before SIGTERM. */}}
{{- define "apns-worker.preStopSeconds" -}}
{{- (((.Values.lifecycle | default dict).preStop | default dict).sleep | default dict).seconds | default 0 | int }}
{{- end }}

{{/* The grace period: given, or a preStop sleep plus the drain timeout plus time to commit offsets and exit. */}}
{{- define "apns-worker.terminationGracePeriodSeconds" -}}
{{- $drain := int .Values.drainTimeoutSeconds }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $drain 15 (include "apns-worker.preStopSeconds" . | int) }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* worker.yaml: the user's config plus the keys the chart owns. */}}
{{- define "apns-worker.workerConfig" -}}
{{- $config := deepCopy .Values.config }}
{{- $_ := set $config "rules" (dict "file" "/etc/apns-worker/rules/rules.yaml") }}
{{- $_ = set $config "metrics" (dict "listen" (printf "0.0.0.0:%d" (int .Values.metrics.port))) }}
{{- $_ = set $config "shutdown" (dict "drain_timeout" (printf "%ds" (int .Values.drainTimeoutSeconds))) }}
{{- toYaml $config }}
{{- end }}

{{/* Every check of values that the schema cannot express; included by the workload template. */}}
{{- define "apns-worker.validate" -}}
{{- $autoscaling := .Values.autoscaling }}
{{- if and $autoscaling.hpa.enabled $autoscaling.keda.enabled }}
{{- fail (print "autoscaling.hpa.enabled and autoscaling.keda.enabled are both true: KEDA manages its own "
  "HorizontalPodAutoscaler for the ScaledObject, and two autoscalers would fight over the replica count. "
  "Enable only one.") }}
{{- end }}
{{- $drain := int .Values.drainTimeoutSeconds }}
{{- $grace := int (include "apns-worker.terminationGracePeriodSeconds" .) }}
{{- $preStop := int (include "apns-worker.preStopSeconds" .) }}
{{- if le $grace (add $drain $preStop) }}
{{- if $preStop }}
{{- fail (printf (print "terminationGracePeriodSeconds (%d) must be longer than lifecycle.preStop.sleep.seconds (%d) "
  "plus drainTimeoutSeconds (%d): the preStop sleep runs first and counts against the grace period; leave it null "
  "to get both plus 15") $grace $preStop $drain) }}
{{- end }}
{{- fail (printf (print "terminationGracePeriodSeconds (%d) must be longer than drainTimeoutSeconds (%d), or the "
  "kubelet kills the worker before it has drained; leave it null to get drainTimeoutSeconds + 15") $grace $drain) }}
{{- end }}
{{- $rules := .Values.rules | fromYaml }}
{{- if hasKey $rules "Error" }}
{{- fail (printf (print "rules is not a YAML mapping: %s; the worker would refuse it. Check the file with "
  "`apns-worker rules check FILE` before putting it in values") (get $rules "Error")) }}
{{- end }}
{{- range $key := list "rules" "metrics" "shutdown" }}
{{- if hasKey $.Values.config $key }}
{{- fail (printf (print "config.%s is set by the chart (from rules, metrics.port and drainTimeoutSeconds); "
  "remove config.%s from your values") $key $key) }}
{{- end }}
{{- end }}
{{- if and .Values.staticMembership.enabled (hasKey (.Values.config.kafka | default dict) "group_instance_id") }}
{{- fail (print "staticMembership.enabled sets kafka.group_instance_id to the pod name; "
  "remove config.kafka.group_instance_id") }}
{{- end }}
{{- with .Values.partitionCount }}
{{- $partitions := int . }}
{{- $checks := dict "replicaCount" $.Values.replicaCount }}
{{- if $autoscaling.hpa.enabled }}
{{- $_ := set $checks "autoscaling.hpa.maxReplicas" $autoscaling.hpa.maxReplicas }}
{{- end }}
{{- if $autoscaling.keda.enabled }}
{{- $_ := set $checks "autoscaling.keda.maxReplicas" $autoscaling.keda.maxReplicas }}
{{- end }}
{{- range $name, $value := $checks }}
{{- if gt (int $value) $partitions }}
{{- fail (printf (print "%s (%d) is more than partitionCount (%d): a consumer beyond the partition count gets no "
  "partition and sits idle") $name (int $value) $partitions) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* Annotations for a resource's metadata: commonAnnotations with the resource's own (list root ownAnnotations). */}}
{{- define "apns-worker.annotations" -}}
{{- $root := index . 0 }}
{{- $all := merge (deepCopy (index . 1 | default dict)) (deepCopy ($root.Values.commonAnnotations | default dict)) }}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The worker's environment: the pod's identity, static membership, extraEnv (for every container that runs it). */}}
{{- define "apns-worker.workerEnv" -}}
env:
  {{- if .Values.staticMembership.enabled }}
  - name: APNS_WORKER_KAFKA__GROUP_INSTANCE_ID
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  {{- end }}
  - name: POD_NAME
    valueFrom:
      fieldRef:
        fieldPath: metadata.name
  - name: POD_NAMESPACE
    valueFrom:
      fieldRef:
        fieldPath: metadata.namespace
  {{- with .Values.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .Values.envFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Where the worker finds worker.yaml, the rules and its secrets (every container that runs it). */}}
{{- define "apns-worker.workerVolumeMounts" -}}
volumeMounts:
  - name: config
    mountPath: /etc/apns-worker/config
    readOnly: true
  # The whole rules ConfigMap as a directory (never subPath): the kubelet then swaps in a new version, and the
  # worker's rules watcher sees it within seconds, without a restart.
  - name: rules
    mountPath: /etc/apns-worker/rules
    readOnly: true
  - name: credentials
    mountPath: /etc/apns-worker/credentials
    readOnly: true
  {{- if .Values.kafkaSecret.existingSecret }}
  - name: kafka-secret
    mountPath: /etc/apns-worker/kafka
    readOnly: true
  {{- end }}
  - name: tmp
    mountPath: /tmp
  {{- with .Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/* The volumes behind those mounts: (dict "root" . "config" configMapSource "rules" configMapSource). */}}
{{- define "apns-worker.workerVolumes" -}}
{{- $root := .root -}}
volumes:
  - name: config
    configMap:
      {{- toYaml .config | nindent 6 }}
  - name: rules
    configMap:
      {{- toYaml .rules | nindent 6 }}
  - name: credentials
    secret:
      secretName: {{ $root.Values.credentials.existingSecret }}
      # Group-readable for the pod's fsGroup; never world-readable.
      defaultMode: 0440
  {{- if $root.Values.kafkaSecret.existingSecret }}
  - name: kafka-secret
    secret:
      secretName: {{ $root.Values.kafkaSecret.existingSecret }}
      defaultMode: 0440
  {{- end }}
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
  {{- with $root.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/* `apns-worker run --check` with the worker's config, rules, secrets and environment: the preflight hook's
container and the optional init container. */}}
{{- define "apns-worker.checkContainer" -}}
- name: check
  image: {{ include "apns-worker.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["--config", "/etc/apns-worker/config/worker.yaml", "--check"]
  {{- include "apns-worker.workerEnv" . | nindent 2 }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  {{- include "apns-worker.workerVolumeMounts" . | nindent 2 }}
{{- end }}

{{/* Scheduling shared by the worker's pods and the preflight hook's (the image may be pullable only there). */}}
{{- define "apns-worker.placement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The pod template shared by the Deployment and the StatefulSet. */}}
{{- define "apns-worker.podTemplate" -}}
metadata:
  labels:
    {{- include "apns-worker.selectorLabels" . | nindent 4 }}
    {{- with .Values.commonLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # Rolls the pods when worker.yaml changes. The rules are not in it: the worker reloads them itself.
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "apns-worker.serviceAccountName" . }}
  # Service links would put APNS_WORKER_METRICS_PORT and friends in the environment, where the worker
  # reads APNS_WORKER_* as configuration.
  enableServiceLinks: false
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: {{ include "apns-worker.terminationGracePeriodSeconds" . }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- if or .Values.preflight.initContainer.enabled .Values.initContainers }}
  initContainers:
    {{- if .Values.preflight.initContainer.enabled }}
    {{- include "apns-worker.checkContainer" . | nindent 4 }}
    {{- end }}
    {{- with .Values.initContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
  containers:
    - name: apns-worker
      image: {{ include "apns-worker.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["--config", "/etc/apns-worker/config/worker.yaml"]
      ports:
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
      {{- include "apns-worker.workerEnv" . | nindent 6 }}
      startupProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: {{ .Values.probes.startup.periodSeconds }}
        failureThreshold: {{ .Values.probes.startup.failureThreshold }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: metrics
        periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
        failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
      readinessProbe:
        httpGet:
          path: /readyz
          port: metrics
        periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
        failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
      {{- with .Values.lifecycle }}
      lifecycle:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      {{- include "apns-worker.workerVolumeMounts" . | nindent 6 }}
    {{- with .Values.extraContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- $fullname := include "apns-worker.fullname" . }}
  {{- include "apns-worker.workerVolumes" (dict "root" . "config" (dict "name" $fullname)
    "rules" (dict "name" (printf "%s-rules" $fullname))) | nindent 2 }}
  {{- if .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml .Values.topologySpreadConstraints | nindent 4 }}
  {{- else if .Values.topologySpread.enabled }}
  topologySpreadConstraints:
    {{- range .Values.topologySpread.topologyKeys }}
    - maxSkew: {{ $.Values.topologySpread.maxSkew }}
      topologyKey: {{ . }}
      whenUnsatisfiable: {{ $.Values.topologySpread.whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "apns-worker.selectorLabels" $ | nindent 10 }}
    {{- end }}
  {{- end }}
  {{- with include "apns-worker.placement" . | trim }}{{ . | nindent 2 }}{{ end }}
{{- end }}

{{/*
How KEDA reaches Kafka, derived from the worker's own settings (config.kafka.properties and property_files, files
from kafkaSecret mounted at /etc/apns-worker/kafka), as YAML: metadata (sasl, tls for the trigger), secretTargetRef
and configMapTargetRef (for the generated TriggerAuthentication). Empty lists: nothing to authenticate,
or autoscaling.keda.authenticationRef is given.
Fails for what KEDA's parameters cannot express, pointing at autoscaling.keda.authenticationRef.
*/}}
{{- define "apns-worker.kedaKafkaAuth" -}}
{{- $kafka := .Values.config.kafka | default dict }}
{{- $properties := $kafka.properties | default dict }}
{{- $files := $kafka.property_files | default dict }}
{{- $protocol := upper (get $properties "security.protocol" | default "PLAINTEXT" | toString) }}
{{- $mount := "/etc/apns-worker/kafka/" }}
{{- $secret := .Values.kafkaSecret.existingSecret }}
{{- $fullname := include "apns-worker.fullname" . }}
{{- $metadata := dict }}
{{- $secretRefs := list }}
{{- $configMapRefs := list }}
{{- $escape := "give autoscaling.keda.authenticationRef (a TriggerAuthentication of your own) instead" }}
{{- /* Each KEDA parameter and the librdkafka properties (file or path) it can come from, in order. */}}
{{- $sources := list }}
{{- if .Values.autoscaling.keda.authenticationRef }}
{{- $protocol = "PLAINTEXT" }}
{{- end }}
{{- if hasPrefix "SASL" $protocol }}
{{- $mechanism := get $properties "sasl.mechanism" | default (get $properties "sasl.mechanisms") }}
{{- $mechanism = $mechanism | default "GSSAPI" | toString | upper }}
{{- $modes := dict "PLAIN" "plaintext" "SCRAM-SHA-256" "scram_sha256" "SCRAM-SHA-512" "scram_sha512" }}
{{- if not (hasKey $modes $mechanism) }}
{{- fail (printf (print "KEDA: the chart generates a TriggerAuthentication for sasl.mechanism PLAIN, SCRAM-SHA-256 "
  "and SCRAM-SHA-512, not %s; %s") $mechanism $escape) }}
{{- end }}
{{- $_ := set $metadata "sasl" (get $modes $mechanism) }}
{{- if hasKey $properties "sasl.username" }}
{{- $username := dict "parameter" "username" "name" (printf "%s-keda" $fullname) "key" "username" }}
{{- $configMapRefs = append $configMapRefs $username }}
{{- else }}
{{- $sources = append $sources (list "username" "sasl.username") }}
{{- end }}
{{- $sources = append $sources (list "password" "sasl.password") }}
{{- if not (or (hasKey $properties "sasl.username") (hasKey $files "sasl.username")) }}
{{- fail (printf (print "KEDA: config.kafka.properties sets sasl.mechanism %s but neither properties nor "
  "property_files give sasl.username; %s") $mechanism $escape) }}
{{- end }}
{{- if not (hasKey $files "sasl.password") }}
{{- fail (printf "KEDA: config.kafka.property_files has no sasl.password for sasl.mechanism %s; %s"
  $mechanism $escape) }}
{{- end }}
{{- end }}
{{- if hasSuffix "SSL" $protocol }}
{{- $_ := set $metadata "tls" "enable" }}
{{- $sources = concat $sources (list (list "ca" "ssl.ca.location" "ssl.ca.pem") (list "cert" "ssl.certificate.location"
  "ssl.certificate.pem") (list "key" "ssl.key.pem") (list "keyPassword" "ssl.key.password")) }}
{{- end }}
{{- range $source := $sources }}
{{- $parameter := first $source }}
{{- $path := "" }}
{{- $from := "" }}
{{- range $property := rest $source }}
{{- if and (not $path) (hasKey $files $property) }}
{{- $path = get $files $property | toString }}
{{- $from = printf "config.kafka.property_files[%s]" $property }}
{{- else if and (not $path) (hasKey $properties $property) (hasSuffix ".location" $property) }}
{{- $path = get $properties $property | toString }}
{{- $from = printf "config.kafka.properties[%s]" $property }}
{{- end }}
{{- end }}
{{- if and $path (ne $path "probe") }}
{{- $key := trimPrefix $mount $path }}
{{- if or (not $secret) (not (hasPrefix $mount $path)) (contains "/" $key) }}
{{- fail (printf (print "KEDA: %s is %s, which KEDA cannot read; the chart can pass KEDA only files of kafkaSecret "
  "(kafkaSecret.existingSecret, mounted at %s<key>); %s") $from $path $mount $escape) }}
{{- end }}
{{- $secretRefs = append $secretRefs (dict "parameter" $parameter "name" $secret "key" $key) }}
{{- end }}
{{- end }}
{{- toYaml (dict "metadata" $metadata "secretTargetRef" $secretRefs "configMapTargetRef" $configMapRefs) }}
{{- end }}

{{/* The trigger's offsetResetPolicy: where the worker starts a partition without a committed offset. */}}
{{- define "apns-worker.kedaOffsetResetPolicy" -}}
{{- $properties := (.Values.config.kafka | default dict).properties | default dict }}
{{- $reset := lower (get $properties "auto.offset.reset" | default "earliest" | toString) }}
{{- $policies := dict "earliest" "earliest" "smallest" "earliest" "beginning" "earliest"
  "latest" "latest" "largest" "latest" "end" "latest" }}
{{- if not (hasKey $policies $reset) }}
{{- fail (printf (print "KEDA: config.kafka.properties sets auto.offset.reset %s; KEDA's offsetResetPolicy knows only "
  "earliest and latest (librdkafka's smallest/beginning and largest/end mean the same)") $reset) }}
{{- end }}
{{- get $policies $reset }}
{{- end }}

{{/* The ports of host:port addresses (a list), as a sorted list of unique integers. */}}
{{- define "apns-worker.ports" -}}
{{- $ports := list }}
{{- range $address := . }}
{{- $port := regexFind "[0-9]+$" (toString $address) }}
{{- if $port }}
{{- $ports = append $ports (int $port) }}
{{- end }}
{{- end }}
{{- toYaml (dict "ports" ($ports | uniq | sortAlpha)) }}
{{- end }}
