#!/usr/bin/env bash
# Installs what the real test node needs: Debian packages (apt), kubelet + kube-proxy built
# from Go modules into a versioned cache folder outside the work tree (NODE_BINS), the way
# hack/k8s-test-bins.sh builds the control plane, and kube-router (NetworkPolicy, firewall
# only) built from its Go module into KUBE_ROUTER_BINS. Each part is skipped when present:
# warm, ~0 s. Cold, see docs/real-node.md ("Cold build") for the measured times.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

missing=()
for c in containerd runc ctr nft iptables conntrack ipset; do command -v "$c" >/dev/null || missing+=("$c"); done
for p in bridge host-local portmap loopback; do [[ -x $CNI_BIN/$p ]] || missing+=("$CNI_BIN/$p"); done
if ((${#missing[@]})); then
	log "installing Debian packages ($APT_PACKAGES): missing ${missing[*]}"
	{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $APT_PACKAGES >/dev/null; } ||
		die "apt-get install $APT_PACKAGES failed (the node needs root and Debian's package repositories)"
fi

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
mkdir -p "$NODE_BINS"
works=()
trap 'rm -rf "${works[@]}"' EXIT
bins=()
for b in kubelet kube-proxy; do [[ -x $NODE_BINS/$b ]] || bins+=("$b"); done
if ((${#bins[@]})); then
	log "building ${bins[*]} v$K8S_VERSION from k8s.io/kubernetes into $NODE_BINS (minutes, once)"
	work=$(mktemp -d)
	works+=("$work")
	cd "$work"
	{
		printf 'module local/k8snodebins\n\ngo 1.26.0\n\ntool (\n'
		for b in "${bins[@]}"; do printf '\tk8s.io/kubernetes/cmd/%s\n' "$b"; done
		printf ')\n\nrequire k8s.io/kubernetes v%s\n' "$K8S_VERSION"
	} >go.mod
	# The same staging replaces as hack/k8s-test-bins.sh (k8s.io/kubernetes requires them at v0.0.0).
	modfile=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
	for m in $(awk '/^\t*k8s\.io\/[^ ]+ v0\.0\.0$/ {print $1}' "$modfile"); do
		go mod edit -replace="$m=$m@v0.${K8S_VERSION#*.}"
	done
	go mod tidy
	ldf="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=${K8S_VERSION%%.*} -X $p.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION")"
	done
	for b in "${bins[@]}"; do
		go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ldf" -o "$NODE_BINS/$b.tmp" "k8s.io/kubernetes/cmd/$b"
		mv "$NODE_BINS/$b.tmp" "$NODE_BINS/$b"
	done
fi
if [[ ! -x $KUBE_ROUTER_BINS/kube-router ]]; then
	log "building kube-router v$KUBE_ROUTER_VERSION from its Go module into $KUBE_ROUTER_BINS (minutes, once)"
	mkdir -p "$KUBE_ROUTER_BINS"
	work=$(mktemp -d)
	works+=("$work")
	cd "$work"
	printf 'module local/kuberouter\n\ngo 1.26.0\n\ntool github.com/cloudnativelabs/kube-router/v2/cmd/kube-router\n\nrequire github.com/cloudnativelabs/kube-router/v2 v%s\n' \
		"$KUBE_ROUTER_VERSION" >go.mod
	go mod tidy
	go build -trimpath -ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=v$KUBE_ROUTER_VERSION" -o "$KUBE_ROUTER_BINS/kube-router.tmp" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
	mv "$KUBE_ROUTER_BINS/kube-router.tmp" "$KUBE_ROUTER_BINS/kube-router"
fi
echo "$NODE_BINS"
