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
prepare
log "binaries and images ready $(since "$t0") s"

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
