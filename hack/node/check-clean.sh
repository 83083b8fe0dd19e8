#!/usr/bin/env bash
# Checks that down.sh left nothing of the test node behind: processes, mounts, network namespaces,
# cgroups, iptables rules (and the tables equal to the baseline up.sh saved), ipsets, the bridge,
# veths, routes, sysctls, paths. Prints what is left and exits 1, or prints "clean".
set -uo pipefail
source "$(dirname "$0")/lib.sh"
B=$NODE_DIR.last/baseline
left=()
for c in /proc/[0-9]*/cmdline; do
	if grep -qaF "$NODE_DIR/" "$c" 2>/dev/null; then
		p=${c#/proc/}
		left+=("process ${p%/cmdline}: $(tr '\0' ' ' <"$c" | cut -c1-120)")
	fi
done
[[ -d $NODE_DIR ]] && left+=("folder $NODE_DIR")
m=$(findmnt -rn -o TARGET | grep -c "^$NODE_DIR/")
((m == 0)) || left+=("$m mounts under $NODE_DIR")
for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/kubepods* /sys/fs/cgroup/k8s.io; do
	[[ -d $c ]] && left+=("cgroup $c")
done
r=$( (iptables-save; ip6tables-save) 2>/dev/null | grep -cE "KUBE-|CNI-|$GUARD")
((r == 0)) || left+=("$r iptables lines with KUBE-/CNI-/$GUARD")
for x in iptables ip6tables; do
	if [[ -f $B/$x.txt ]] && ! diff <(iptables_rules $x) "$B/$x.txt" >/dev/null; then
		left+=("$x differ from before the node: $(diff <(iptables_rules $x) "$B/$x.txt" | head -5 | tr '\n' ' ')")
	fi
done
if command -v ipset >/dev/null; then
	s=$(ipset list -n 2>/dev/null | grep -cE '^(KUBE-|kube-router)')
	((s == 0)) || left+=("$s ipsets of kube-router: $(ipset list -n | grep -E '^(KUBE-|kube-router)' | head -5 | tr '\n' ' ')")
fi
ip link show "$BRIDGE" >/dev/null 2>&1 && left+=("bridge $BRIDGE")
v=$(ip -br link | grep -c '^veth')
((v == 0)) || left+=("$v veth interfaces")
routes=$(ip route | grep -E '^10\.96\.|^10\.244\.')
[[ -n $routes ]] && left+=("routes: $(tr '\n' ' ' <<<"$routes")")
if [[ -s $B/sysctl.txt ]]; then
	while IFS== read -r k val; do
		[[ "$(sysctl -n "$k")" == "$val" ]] || left+=("sysctl $k=$(sysctl -n "$k") (was $val)")
	done <"$B/sysctl.txt"
else
	left+=("no baseline in $B: cannot check sysctls and iptables")
fi
for p in /var/log/containers /var/lib/cni /var/lib/kubelet /run/containerd; do
	grep -q "^$p absent" "$B/paths.txt" 2>/dev/null && [[ -e $p ]] && left+=("path $p")
done
if ((${#left[@]})); then
	printf 'node: LEFT %s\n' "${left[@]}" >&2
	exit 1
fi
echo "node: clean (processes, mounts, cgroups, iptables == before, ipsets, bridge, veths, routes, sysctls, paths)"
