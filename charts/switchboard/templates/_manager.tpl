{{- /*
One manager Deployment: the default one (shard ""), which serves the injection webhook, or one
shard's (values shards: docs/sharding.md). The default one reconciles every object
without the label sharding.switchboard.dev/key when shards are listed, and every object when not.
*/ -}}
{{- define "switchboard.managerDeployment" -}}
{{- $r := .root }}
{{- $shard := .shard }}
{{- $webhook := and $r.Values.webhook.enabled (not $shard) }}
{{- $component := ternary (printf "manager-%s" $shard) "manager" (ne $shard "") }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: switchboard-manager{{ if $shard }}-{{ $shard }}{{ end }}
  namespace: {{ $r.Release.Namespace }}
  labels: {{- include "switchboard.labels" $r | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}
spec:
  replicas: {{ $r.Values.replicaCount }}
  selector:
    matchLabels: {{- include "switchboard.managerSelector" . | nindent 6 }}
  template:
    metadata:
      labels: {{- include "switchboard.managerSelector" . | nindent 8 }}
      {{- with $r.Values.podAnnotations }}
      annotations: {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: switchboard-manager
      terminationGracePeriodSeconds: 10
      securityContext: {{- toYaml $r.Values.podSecurityContext | nindent 8 }}
      {{- with $r.Values.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: manager
          image: {{ include "switchboard.image" $r }}
          imagePullPolicy: {{ $r.Values.image.pullPolicy }}
          args:
            - --leader-elect={{ $r.Values.leaderElection.enabled }}
            - --leader-elect-lease-duration={{ $r.Values.leaderElection.leaseDuration }}
            - --leader-elect-renew-deadline={{ $r.Values.leaderElection.renewDeadline }}
            - --leader-elect-retry-period={{ $r.Values.leaderElection.retryPeriod }}
            - --health-probe-bind-address=:8081
            - --metrics-bind-address={{ if $r.Values.metrics.enabled }}:{{ $r.Values.metrics.port }}{{ else }}0{{ end }}
            - --sidecar-image={{ include "switchboard.sidecarImage" $r }}
            - --kube-api-qps={{ $r.Values.controller.kubeAPIQPS }}
            - --kube-api-burst={{ $r.Values.controller.kubeAPIBurst }}
            - --max-concurrent-reconciles={{ $r.Values.controller.maxConcurrentReconciles }}
            - --trust-domain={{ $r.Values.controller.trustDomain }}
            {{- if $shard }}
            - --watch-label-selector=sharding.switchboard.dev/key={{ $shard }}
            {{- else if $r.Values.shards }}
            - --watch-label-selector=!sharding.switchboard.dev/key
            {{- end }}
            {{- with $r.Values.watchNamespaces }}
            - --watch-namespaces={{ join "," . }}
            {{- end }}
            {{- if $webhook }}
            - --webhook-cert-mode={{ $r.Values.webhook.certMode }}
            - --webhook-port={{ $r.Values.webhook.port }}
            - --webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs
            {{- else }}
            - --webhook-cert-mode=none
            {{- end }}
          env:
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
            - name: GOMEMLIMIT
              valueFrom: {resourceFieldRef: {resource: limits.memory}}
          ports:
            - {name: health, containerPort: 8081}
            {{- if $r.Values.metrics.enabled }}
            - {name: metrics, containerPort: {{ $r.Values.metrics.port }}}
            {{- end }}
            {{- if $webhook }}
            - {name: webhook, containerPort: {{ $r.Values.webhook.port }}}
            {{- end }}
          livenessProbe:
            httpGet: {path: /healthz, port: health}
            initialDelaySeconds: 15
            periodSeconds: 20
          readinessProbe:
            httpGet: {path: /readyz, port: health}
            initialDelaySeconds: 5
            periodSeconds: 10
          resources: {{- toYaml $r.Values.resources | nindent 12 }}
          securityContext: {{- toYaml $r.Values.securityContext | nindent 12 }}
          {{- if $webhook }}
          volumeMounts:
            - {name: webhook-cert, mountPath: /tmp/k8s-webhook-server/serving-certs, readOnly: true}
          {{- end }}
      {{- if $webhook }}
      volumes:
        - name: webhook-cert
          secret: {secretName: switchboard-webhook-cert}
      {{- end }}
      {{- with $r.Values.nodeSelector }}
      nodeSelector: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $r.Values.tolerations }}
      tolerations: {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $r.Values.affinity }}
      affinity: {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}

{{- define "switchboard.managerSelector" -}}
app.kubernetes.io/name: switchboard
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ if .shard }}manager-{{ .shard }}{{ else }}manager{{ end }}
{{- end }}
