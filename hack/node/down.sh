#!/usr/bin/env bash
# Tears the test node down and puts the host back as up.sh found it: workloads deleted while the
# kubelet still runs (so CNI releases every sandbox), then kube-router and kube-proxy and their
# rules and ipsets, kubelet,
# containerd and its shims, mounts, control plane, cgroups, iptables rules, the bridge, paths the
# kubelet and containerd hard-code, sysctls; then the node folder (KEEP_STATE=1 keeps it).
# Safe to run twice, and on a node that came up only halfway.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
[[ -d $NODE_DIR ]] || exit 0
t0=$(now)
CP_BIN=${CP_BIN:-$(cp_bin)}
stop() { # name [seconds before SIGKILL]
	local n=$1 t=${2:-20} p
	[[ -s $NODE_DIR/run/$n.pid ]] || return 0
	p=$(cat "$NODE_DIR/run/$n.pid")
	if kill -0 "$p" 2>/dev/null; then
		kill -TERM "$p"
		for _ in $(seq 1 $((t * 10))); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && kill -KILL "$p"
	fi
	rm -f "$NODE_DIR/run/$n.pid"
}
# 1. Workloads.
KUBECTL=${KUBECTL:-$CP_BIN/kubectl}
if alive kube-apiserver && alive kubelet && [[ -x $KUBECTL ]]; then
	K="$KUBECTL --kubeconfig=$KUBECONFIG_ADMIN --request-timeout=10s"
	$K delete mutatingwebhookconfigurations,validatingwebhookconfigurations --all --wait=false >/dev/null 2>&1
	for ns in $($K get ns -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
		$K -n "$ns" delete deploy,rs,ds,sts,job --all --wait=false >/dev/null 2>&1
	done
	$K delete pods --all -A --grace-period=2 --wait=true --timeout=60s >/dev/null 2>&1
fi
# 2. kube-router (NetworkPolicy) and its rules and ipsets, kube-proxy and its rules.
stop kube-router
if [[ -x $KUBE_ROUTER_BINS/kube-router ]]; then
	"$KUBE_ROUTER_BINS/kube-router" --cleanup-config >"$NODE_DIR/logs/kube-router-cleanup.log" 2>&1
fi
stop kube-proxy
"$NODE_BINS/kube-proxy" --cleanup --config="$NODE_DIR/etc/kube-proxy-config.yaml" >/dev/null 2>&1
# 3. kubelet, leftover sandboxes, containerd and its shims (found by their socket path).
stop kubelet
if alive containerd; then
	for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
	sleep 1
	for t in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks rm -f "$t" >/dev/null 2>&1; done
fi
stop containerd
for p in $(pgrep -x containerd-shim 2>/dev/null); do # comm is truncated from containerd-shim-runc-v2
	grep -qa "$NODE_DIR/run/containerd" "/proc/$p/cmdline" 2>/dev/null && kill -KILL "$p"
done
sleep 0.5
# 4. Mounts under the node folder (netns, shm, overlay rootfs, volumes), deepest first.
for m in $(findmnt -rn -o TARGET | grep "^$NODE_DIR/" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m"; done
# 5. Control plane.
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd
# 6. cgroups the kubelet (kubepods) and containerd (k8s.io) made.
for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
	for c in kubepods kubepods.slice k8s.io; do
		[[ -d $h$c ]] && find "$h$c" -depth -type d -exec rmdir {} \; 2>/dev/null
	done
done
# 7. iptables: every KUBE-*, CNI-* and guard chain and the rules that jump to them.
# (The rules are read whole first: `iptables-save | grep -q` would let grep's early exit kill
# iptables-save with SIGPIPE on a long rule set, and pipefail would then skip the restore.)
for x in iptables ip6tables; do
	rules=$($x-save 2>/dev/null)
	if grep -qE -- "(KUBE-|CNI-|$GUARD)" <<<"$rules"; then
		grep -vE -- "(KUBE-|CNI-|$GUARD)" <<<"$rules" | $x-restore || log "$x-restore failed: rules of the node are left (check-clean.sh lists them)"
	fi
done
# kube-router's ipsets, once no rule refers to them (any left by --cleanup-config).
if command -v ipset >/dev/null; then
	for n in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-|kube-router)'); do ipset destroy "$n" || log "ipset destroy $n failed"; done
fi
# iptables-nft creates (empty) tables on first use: drop those the host did not have before the
# node (baseline), and only while they are empty, so that nobody else's rules go with them.
if command -v nft >/dev/null; then
	for f in ip ip6; do
		x=iptables
		[[ $f == ip6 ]] && x=ip6tables
		for t in mangle filter nat raw security; do
			grep -qx "\*$t" "$NODE_DIR/baseline/$x.txt" 2>/dev/null && continue
			rules=$($x-save -t $t 2>/dev/null)
			if ! grep -qE '^(-A |:[^ ]+ - )' <<<"$rules"; then nft delete table $f $t 2>/dev/null; fi
		done
	done
fi
# 8. The bridge (its routes go with it).
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
# 9. Paths outside the node folder that the kubelet and containerd 1.6 hard-code.
find /var/log/containers -maxdepth 1 -lname "$NODE_DIR/*" -delete 2>/dev/null
for p in /var/log/containers /var/lib/cni /var/lib/kubelet /run/containerd; do
	grep -q "^$p absent" "$NODE_DIR/baseline/paths.txt" 2>/dev/null && rm -rf "$p"
done
# 10. sysctls (the kubelet: kernel.panic*, vm.overcommit_memory; the bridge plugin: ip_forward).
if [[ -s $NODE_DIR/baseline/sysctl.txt ]]; then
	while IFS== read -r k v; do [[ "$(sysctl -n "$k")" == "$v" ]] || sysctl -qw "$k=$v"; done <"$NODE_DIR/baseline/sysctl.txt"
fi
if [[ ${KEEP_STATE:-0} != 1 ]]; then
	mkdir -p "$NODE_DIR.last"
	cp -r "$NODE_DIR/logs" "$NODE_DIR/baseline" "$NODE_DIR.last/" 2>/dev/null
	rm -rf "$NODE_DIR"
fi
log "down $(since "$t0") s"
