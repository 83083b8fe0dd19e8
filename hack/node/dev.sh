#!/usr/bin/env bash
# make dev NODE=real: the development loop on real pods. Brings the test node up (as make
# test-node does), installs Switchboard with its Helm chart from the images built here, applies
# config/samples with the sample server's image, prints how to reach it, and runs until Ctrl-C,
# which tears the node down and checks that the host is as before.
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/node/lib.sh
HELM=${HELM:?HELM: the helm binary (make sets it)}
t0=$(now)
prepare
sleeper=
finish() {
	rc=$?
	[[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null
	hack/node/down.sh
	hack/node/check-clean.sh || rc=1
	exit $rc
}
trap finish EXIT
trap "exit 0" INT # Ctrl-C is how it ends
trap "exit 143" TERM HUP
IMAGES_DIR=$IMAGES_DIR hack/node/up.sh
export KUBECONFIG=$KUBECONFIG_ADMIN
R=localhost/switchboard
"$HELM" install switchboard charts/switchboard --namespace switchboard-system --create-namespace \
	--set image.repository=$R/manager --set image.tag=node --set sidecar.image.repository=$R/sidecar --set sidecar.image.tag=node >/dev/null
"$KUBECTL" -n switchboard-system rollout status deployment/switchboard-manager --timeout=3m >/dev/null
samples=$("$KUBECTL" kustomize config/samples | sed "s|image: switchboard-sample-server:dev|image: $R/sample-server:node|")
# The webhook (failurePolicy Fail) answers once the manager has issued its certificate: retry.
for i in $(seq 60); do
	"$KUBECTL" apply -f - <<<"$samples" >/dev/null 2>&1 && break
	((i < 60)) || die "kubectl apply config/samples failed for a minute"
	sleep 1
done
"$KUBECTL" wait mcpserver/weather --for=condition=Ready --timeout=3m >/dev/null
ip=$("$KUBECTL" get service weather -o jsonpath='{.spec.clusterIP}')
cat <<MSG

MCPServer default/weather is Ready on real pods ($(since "$t0") s). In another shell:

  export KUBECONFIG=$KUBECONFIG_ADMIN PATH=$PWD/bin:$(dirname "$KUBECTL"):\$PATH
  kubectl get mcp,pods -o wide
  kubectl mcp tools weather                       # through a port-forward to a pod, as in a cluster
  curl -s http://$ip/mcp -H 'Host: weather.default.svc' -H 'Content-Type: application/json' \\
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \\
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
                                                  # the Service (kube-proxy), with the Host clients in the cluster send

Component logs: $NODE_DIR/logs. Ctrl-C tears the node down.
MSG
sleep infinity &
sleeper=$!
wait $sleeper
