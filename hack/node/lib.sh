# Shared settings of the real-node scripts (sourced). Every address, port and name of the test
# node is here; docs/real-node.md explains the layout.
K8S_VERSION=${K8S_VERSION:-1.37.2}
# Cluster state: certificates, etcd, containerd, kubelet, logs. Wiped by down.sh.
NODE_DIR=${NODE_DIR:-/var/tmp/switchboard-node}
# kubelet and kube-proxy, built once from Go modules (bins.sh), like the control plane's cache.
NODE_BINS=${NODE_BINS:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-node-bins/k8s-v$K8S_VERSION}
# kube-router (NetworkPolicy enforcement, firewall controller only), built once from its Go
# module (bins.sh); v2.1.0 is the newest version the Go module proxy lists.
KUBE_ROUTER_VERSION=${KUBE_ROUTER_VERSION:-2.1.0}
KUBE_ROUTER_BINS=${KUBE_ROUTER_BINS:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-node-bins/kube-router-v$KUBE_ROUTER_VERSION}
NODE_NAME=switchboard-node
# The pod bridge: its address is the node IP and the API server's, since the API server may not
# advertise a loopback address and this kernel has no dummy interfaces.
BRIDGE=sbnode0
NODE_IP=10.244.0.1
POD_SUBNET=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_PORT=16443
# Ports away from the defaults, so that a cluster elsewhere on the machine does not collide.
ETCD_PORT=23790 ETCD_PEER_PORT=23800 KUBELET_PORT=20250 KUBELET_HEALTHZ_PORT=20248
KCM_PORT=20257 SCHEDULER_PORT=20259 PROXY_METRICS_PORT=20249 PROXY_HEALTHZ_PORT=20256
GUARD=SBNODE-GUARD
# Debian packages (bookworm): containerd 1.6, runc, CNI bridge/host-local/portmap, iptables, ipset (kube-router),
# nftables (nft: teardown drops the empty tables iptables-nft created, which no iptables command can).
APT_PACKAGES="containerd runc containernetworking-plugins iptables conntrack ipset nftables"
CNI_BIN=/usr/lib/cni
KUBECONFIG_ADMIN=$NODE_DIR/pki/admin.kubeconfig
CTR="ctr -a $NODE_DIR/run/containerd/containerd.sock -n k8s.io"

log() { echo "node: $*" >&2; }
# A rule set (iptables_rules iptables|ip6tables) without comments and packet counters: what the
# baseline and the clean-host check compare (counters move with any traffic; they are not part of
# what the node left).
iptables_rules() { "$1-save" 2>/dev/null | grep -v '^#' | sed -E 's/ \[[0-9]+:[0-9]+\]$//'; }
die() { echo "node: FAILED: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { printf '%.1f' "$(echo "$(now) - $1" | bc)"; }
# The control plane's cache folder (hack/k8s-test-bins.sh), without building it.
cp_bin() { ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/k8s-test-bins/k8s-v"$K8S_VERSION"-*/ 2>/dev/null | head -n 1; }
alive() { [[ -s $NODE_DIR/run/$1.pid ]] && kill -0 "$(cat "$NODE_DIR/run/$1.pid")" 2>/dev/null; }
# prepare (test.sh, dev.sh; from the repository's root): the node's binaries (bins.sh, cached),
# the control plane's (hack/k8s-test-bins.sh, cached), and the images from the binaries of
# `make build` (and the pause program) in IMAGES_DIR. Sets CP_BIN, KUBECTL and IMAGES_DIR.
prepare() {
	hack/node/bins.sh >/dev/null
	CP_BIN=${CP_BIN:-$(WHAT="etcd kube-apiserver kube-controller-manager kube-scheduler kubectl" hack/k8s-test-bins.sh | tail -n 1)}
	KUBECTL=${KUBECTL:-$CP_BIN/kubectl}
	export CP_BIN KUBECTL
	IMAGES_DIR=${IMAGES_DIR:-$PWD/bin/node-images}
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/pause ./hack/node/pause
	CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o bin/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
	go run ./hack/node/images -bin bin -out "$IMAGES_DIR" >&2
}
