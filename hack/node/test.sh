#!/usr/bin/env bash
# make test-node: installs and builds what the real node needs (cached), writes the images,
# brings the node up, runs test/node against it, and always tears it down and checks that the
# host is as before. Exit status: the tests', or 1 if anything was left behind.
#   NODE_KEEP=1   leave the node up after the tests (hack/node/down.sh to remove it)
#   NODE_TEST_RUN=<regexp>   go test -run
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/node/lib.sh
t0=$(now)
hack/node/bins.sh >/dev/null
export CP_BIN KUBECTL
CP_BIN=${CP_BIN:-$(WHAT="etcd kube-apiserver kube-controller-manager kube-scheduler kubectl" hack/k8s-test-bins.sh | tail -n 1)}
KUBECTL=${KUBECTL:-$CP_BIN/kubectl}
log "binaries ready $(since "$t0") s"

# Images from the static binaries of `make build` (and the pause program).
IMAGES_DIR=${IMAGES_DIR:-$PWD/bin/node-images}
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/pause ./hack/node/pause
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
go run ./hack/node/images -bin bin -out "$IMAGES_DIR" >&2
log "images written $(since "$t0") s"

finish() {
	rc=$?
	if [[ ${NODE_KEEP:-0} == 1 ]]; then
		log "left up (NODE_KEEP=1): KUBECONFIG=$KUBECONFIG_ADMIN; hack/node/down.sh removes it"
		exit $rc
	fi
	hack/node/down.sh
	hack/node/check-clean.sh || rc=1
	log "total $(since "$t0") s"
	exit $rc
}
trap finish EXIT
trap "exit 143" TERM INT HUP # so that the EXIT trap tears the node down on a signal too
IMAGES_DIR=$IMAGES_DIR hack/node/up.sh
log "cold/warm start of the node: $(cat "$NODE_DIR/logs/up.times")"

SWITCHBOARD_NODE_KUBECONFIG=$KUBECONFIG_ADMIN SWITCHBOARD_NODE_DIR=$NODE_DIR KUBECTL=$KUBECTL \
	HELM=${HELM:?HELM: the helm binary (make sets it)} \
	go test -tags node -count=1 -timeout=25m -v ${NODE_TEST_RUN:+-run "$NODE_TEST_RUN"} ./test/node/
