#!/usr/bin/env bash
# Brings up the real single-node test cluster: pod bridge and guard rules, etcd + kube-apiserver +
# kube-controller-manager + kube-scheduler (the test control plane's binaries), containerd + runc +
# CNI (apt), the images in IMAGES_DIR imported, kubelet, kube-proxy and kube-router (NetworkPolicy,
# firewall only) (bins.sh); waits for a Ready node. Every step has a bound: a part that does not come up stops the script with the reason and
# the fix, and down.sh puts the host back. Usage: IMAGES_DIR=<dir of OCI archives> hack/node/up.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
IMAGES_DIR=${IMAGES_DIR:?IMAGES_DIR: the folder of the image archives (hack/node/images)}
CP_BIN=${CP_BIN:-$(cp_bin)}
t0=$(now)

# 0. Preflight: say what is missing and how to get it, before touching the host.
[[ $(id -u) == 0 ]] || die "run as root: the node creates a bridge, iptables rules, mounts and cgroups"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do
	[[ -x $CP_BIN/$b ]] || die "no $b in '$CP_BIN': build the test control plane first (make test-control-plane)"
done
for b in kubelet kube-proxy; do
	[[ -x $NODE_BINS/$b ]] || die "no $b in $NODE_BINS: run hack/node/bins.sh (builds it once from Go modules)"
done
[[ -x $KUBE_ROUTER_BINS/kube-router ]] || die "no kube-router in $KUBE_ROUTER_BINS: run hack/node/bins.sh (builds it once from its Go module)"
for c in containerd runc ctr nft iptables iptables-save iptables-restore conntrack ipset openssl jq curl bc; do
	command -v "$c" >/dev/null || die "$c not found: apt-get install $APT_PACKAGES jq curl openssl bc (hack/node/bins.sh installs them)"
done
for p in bridge host-local portmap loopback; do
	[[ -x $CNI_BIN/$p ]] || die "CNI plugin $CNI_BIN/$p missing: apt-get install containernetworking-plugins"
done
grep -qw overlay /proc/filesystems || die "the kernel has no overlayfs (containerd's snapshotter): modprobe overlay, or a kernel with CONFIG_OVERLAY_FS"
[[ -d /proc/sys/net/bridge ]] || die "no br_netfilter (/proc/sys/net/bridge): modprobe br_netfilter (kube-proxy's Service rules need it for bridged traffic)"
if [[ ! -d /sys/fs/cgroup/memory && ! -f /sys/fs/cgroup/cgroup.controllers ]]; then
	die "no cgroup v1 memory controller and no cgroup v2 at /sys/fs/cgroup: mount the cgroup hierarchies (the kubelet needs cpu, memory, pids)"
fi
if alive kubelet || ip link show "$BRIDGE" >/dev/null 2>&1; then
	die "a test node is already up (bridge $BRIDGE or kubelet running): hack/node/down.sh first"
fi
for port in $API_PORT $ETCD_PORT $ETCD_PEER_PORT $KUBELET_PORT $KUBELET_HEALTHZ_PORT $KCM_PORT $SCHEDULER_PORT $PROXY_HEALTHZ_PORT; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then die "port $port is in use on 127.0.0.1: another cluster runs here; stop it or change the port in hack/node/lib.sh"; fi
done
[[ -n $(ls "$IMAGES_DIR"/*.tar 2>/dev/null) ]] || die "no image archives in $IMAGES_DIR (go run ./hack/node/images -out $IMAGES_DIR)"

mkdir -p "$NODE_DIR"/{etc/cni,pki,var,run,logs,baseline}
# 1. What teardown restores: sysctls the kubelet and the bridge plugin change, paths they create.
B=$NODE_DIR/baseline
if [[ ! -s $B/sysctl.txt ]]; then
	for s in net.ipv4.ip_forward kernel.panic kernel.panic_on_oops vm.overcommit_memory vm.panic_on_oom \
		net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables; do
		echo "$s=$(sysctl -n $s)"
	done >"$B/sysctl.txt"
	for p in /var/log/containers /var/lib/cni /var/lib/kubelet /run/containerd; do
		[[ -e $p ]] && echo "$p present" || echo "$p absent"
	done >"$B/paths.txt"
	for x in iptables ip6tables; do iptables_rules $x >"$B/$x.txt" || true; done
fi

# 2. Configuration files and a throwaway PKI (openssl).
render() {
	sed -e "s|@NODE_DIR@|$NODE_DIR|g" -e "s|@BRIDGE@|$BRIDGE|g" -e "s|@NODE_IP@|$NODE_IP|g" -e "s|@NODE_NAME@|$NODE_NAME|g" \
		-e "s|@POD_SUBNET@|$POD_SUBNET|g" -e "s|@SERVICE_CIDR@|$SERVICE_CIDR|g" -e "s|@CNI_BIN@|$CNI_BIN|g" \
		-e "s|@RUNC@|$(command -v runc)|g" -e "s|@PAUSE_IMAGE@|$PAUSE_IMAGE|g" -e "s|@KUBELET_PORT@|$KUBELET_PORT|g" \
		-e "s|@KUBELET_HEALTHZ_PORT@|$KUBELET_HEALTHZ_PORT|g" -e "s|@PROXY_HEALTHZ_PORT@|$PROXY_HEALTHZ_PORT|g" \
		-e "s|@PROXY_METRICS_PORT@|$PROXY_METRICS_PORT|g" "$HERE/etc/$1" >"$NODE_DIR/etc/$2"
}
PAUSE_IMAGE=${PAUSE_IMAGE:-localhost/switchboard/pause:node}
render containerd.toml containerd.toml
render cni.conflist cni/10-switchboard-node.conflist
render kubelet-config.yaml kubelet-config.yaml
render kube-proxy-config.yaml kube-proxy-config.yaml
echo "nameserver 127.0.0.1" >"$NODE_DIR/etc/resolv.conf" # no cluster DNS: names fail fast, inside the pod
"$HERE/pki.sh" >/dev/null

start() { # name command... (logs in $NODE_DIR/logs, pid in $NODE_DIR/run)
	local n=$1
	shift
	setsid nohup "$@" >"$NODE_DIR/logs/$n.log" 2>&1 </dev/null &
	echo $! >"$NODE_DIR/run/$n.pid"
}
wait_for() { # name seconds hint check...
	local n=$1 secs=$2 hint=$3 t=$(now)
	shift 3
	until "$@" >/dev/null 2>&1; do
		if ! alive "$n"; then
			tail -n 15 "$NODE_DIR/logs/$n.log" >&2
			die "$n exited (log above, whole in $NODE_DIR/logs/$n.log): $hint"
		fi
		if (($(echo "$(now) - $t > $secs" | bc))); then
			tail -n 15 "$NODE_DIR/logs/$n.log" >&2
			die "$n not ready after ${secs}s (log above, whole in $NODE_DIR/logs/$n.log): $hint"
		fi
		sleep 0.2
	done
}
P=$NODE_DIR/pki
api() { curl -sf --cacert "$P/ca.crt" --cert "$P/admin.crt" --key "$P/admin.key" "https://$NODE_IP:$API_PORT$1"; }

# 3. Network: the bridge (node IP) and the guard. The guard sits in the mangle table, before any
#    ACCEPT of kube-proxy's: pods may open no connection to the host but the API server's, and
#    nothing from the pod network leaves through another interface (pods have no default route).
ip link add "$BRIDGE" type bridge || die "cannot create a bridge: the kernel needs CONFIG_BRIDGE (modprobe bridge)"
ip addr add "$NODE_IP/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
iptables -t mangle -N "$GUARD-IN"
iptables -t mangle -A "$GUARD-IN" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
iptables -t mangle -A "$GUARD-IN" -d "$NODE_IP" -p tcp --dport "$API_PORT" -j RETURN
iptables -t mangle -A "$GUARD-IN" -j DROP
iptables -t mangle -I INPUT -i "$BRIDGE" -j "$GUARD-IN"
iptables -t mangle -N "$GUARD-FWD"
iptables -t mangle -A "$GUARD-FWD" -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
iptables -t mangle -A "$GUARD-FWD" -s 10.244.0.0/16 ! -o "$BRIDGE" -j DROP
iptables -t mangle -I FORWARD -j "$GUARD-FWD"
log "network $(since "$t0") s"

# 4. Control plane on the bridge address (API server) and 127.0.0.1 (the rest).
start etcd "$CP_BIN/etcd" --name node --data-dir "$NODE_DIR/var/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
	--initial-cluster "node=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync --quota-backend-bytes 2147483648
start kube-apiserver "$CP_BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
	--bind-address="$NODE_IP" --secure-port="$API_PORT" --advertise-address="$NODE_IP" \
	--tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" --client-ca-file="$P/ca.crt" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
	--service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types=InternalIP --allow-privileged=true --profiling=false
wait_for kube-apiserver 120 "see the log; etcd's is $NODE_DIR/logs/etcd.log" api /readyz
log "control plane API ready $(since "$t0") s"
start kube-controller-manager "$CP_BIN/kube-controller-manager" --kubeconfig="$P/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$P/controller-manager.kubeconfig" --authorization-kubeconfig="$P/controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
	--use-service-account-credentials=true --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
	--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key" \
	--allocate-node-cidrs=false --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false
start kube-scheduler "$CP_BIN/kube-scheduler" --kubeconfig="$P/scheduler.kubeconfig" \
	--authentication-kubeconfig="$P/scheduler.kubeconfig" --authorization-kubeconfig="$P/scheduler.kubeconfig" \
	--bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false --profiling=false

# 5. containerd, the images, the kubelet.
start containerd containerd --config "$NODE_DIR/etc/containerd.toml"
# (ctr against a missing socket waits ~10 s for it: test the socket first.)
ctr_ready() { [[ -S $NODE_DIR/run/containerd/containerd.sock ]] && $CTR version; }
wait_for containerd 30 "containerd did not start with $NODE_DIR/etc/containerd.toml" ctr_ready
for f in "$IMAGES_DIR"/*.tar; do
	$CTR images import "$f" >/dev/null || die "ctr images import $f failed (an OCI archive from hack/node/images)"
done
# (The list is read whole first: with pipefail, grep -q's early exit could SIGPIPE ctr and fail.)
images=$($CTR images ls -q)
grep -qx "$PAUSE_IMAGE" <<<"$images" || die "the pause image $PAUSE_IMAGE is not among the imported images ($(tr '\n' ' ' <<<"$images"))"
log "containerd up, images imported $(since "$t0") s"
start kubelet "$NODE_BINS/kubelet" --config="$NODE_DIR/etc/kubelet-config.yaml" --kubeconfig="$P/kubelet.kubeconfig" \
	--root-dir="$NODE_DIR/var/kubelet" --cert-dir="$NODE_DIR/var/kubelet/pki" --hostname-override="$NODE_NAME" \
	--node-ip="$NODE_IP" --v="${KUBELET_V:-1}"
node_ready() { [[ $(api "/api/v1/nodes/$NODE_NAME" | jq -r '.status.conditions[] | select(.type=="Ready") | .status') == True ]]; }
wait_for kubelet 90 "common causes: cgroup layout (failCgroupV1, cgroupDriver in $NODE_DIR/etc/kubelet-config.yaml), swap, the container runtime (see $NODE_DIR/logs/containerd.log)" node_ready
log "node Ready $(since "$t0") s"
start kube-proxy "$NODE_BINS/kube-proxy" --config="$NODE_DIR/etc/kube-proxy-config.yaml"
wait_for kube-proxy 30 "kube-proxy needs iptables and conntrack (apt-get install iptables conntrack)" \
	curl -sf "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz"
# NetworkPolicy: kube-router's firewall controller only (no routing, no service proxy, no CNI),
# as a host process with iptables + ipset. With --health-port=0 nothing of it listens; it is
# up once its chains hook the filter table.
start kube-router "$KUBE_ROUTER_BINS/kube-router" --kubeconfig="$KUBECONFIG_ADMIN" --hostname-override="$NODE_NAME" \
	--run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false --enable-cni=false \
	--enable-ipv6=false --health-port=0 --metrics-port=0 --service-cluster-ip-range="$SERVICE_CIDR"
wait_for kube-router 60 "kube-router needs iptables and ipset (apt-get install iptables ipset)" \
	sh -c 'iptables -S FORWARD | grep -q KUBE-ROUTER-FORWARD'
# Pods need the default ServiceAccount of a namespace before they can be created.
wait_for kube-controller-manager 60 "the controller-manager did not create the default ServiceAccount" api /api/v1/namespaces/default/serviceaccounts/default
log "up $(since "$t0") s; KUBECONFIG=$KUBECONFIG_ADMIN"
echo "up_seconds=$(since "$t0")" >"$NODE_DIR/logs/up.times"
