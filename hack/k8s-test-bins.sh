#!/usr/bin/env bash
# Builds the test control plane from Go modules only (no binary downloads):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok
# (plus the kwok Stage objects it needs), into a versioned cache folder outside
# the work tree. Each binary is skipped when already present, so a warm run costs ~0 s.
#
# Usage: hack/k8s-test-bins.sh            # prints the assets folder on its last line
#        WHAT="etcd kube-apiserver" hack/k8s-test-bins.sh
# Then:  export KUBEBUILDER_ASSETS=<that folder>
#
# The k8s.io/kubernetes module is built in a throwaway module of its own and never enters the
# operator's go.mod.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}   # k8s.io/kubernetes vX.Y.Z (staging modules: v0.Y.Z)
ETCD_VERSION=${ETCD_VERSION:-3.7.3}  # go.etcd.io/etcd/server/v3
KWOK_VERSION=${KWOK_VERSION:-0.8.0}  # sigs.k8s.io/kwok
WHAT=${WHAT:-"etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok"}
OUT=${OUT:-${XDG_CACHE_HOME:-$HOME/.cache}/k8s-test-bins/k8s-v$K8S_VERSION-etcd-v$ETCD_VERSION-kwok-v$KWOK_VERSION}
STAGING_VERSION=v0.${K8S_VERSION#*.}

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

log() { echo "k8s-test-bins: $*" >&2; }
wanted() { [[ " $WHAT " == *" $1 "* ]]; }
missing() { wanted "$1" && [[ ! -x "$OUT/$1" ]]; }

if missing etcd; then
	log "building etcd v$ETCD_VERSION (about 1 min cold)"
	mkdir -p "$work/etcd" && cd "$work/etcd"
	printf 'module local/etcdbin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" >go.mod
	printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >main.go
	go mod tidy
	go build -trimpath -ldflags='-s -w' -o "$OUT/etcd.tmp" . && mv "$OUT/etcd.tmp" "$OUT/etcd"
fi

k8s_bins=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	if missing "$b"; then k8s_bins+=("$b"); fi
done
if ((${#k8s_bins[@]})); then
	log "building ${k8s_bins[*]} v$K8S_VERSION (about 7 min cold)"
	mkdir -p "$work/k8s" && cd "$work/k8s"
	{
		printf 'module local/k8sbins\n\ngo 1.26.0\n\ntool (\n'
		for b in "${k8s_bins[@]}"; do printf '\tk8s.io/kubernetes/cmd/%s\n' "$b"; done
		printf ')\n\nrequire k8s.io/kubernetes v%s\n' "$K8S_VERSION"
	} >go.mod
	# k8s.io/kubernetes requires each staging module at v0.0.0 through ./staging replaces that do
	# not apply to dependents: point every one of them at the published v0.Y.Z tag.
	modfile=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
	for m in $(awk '/^\t*k8s\.io\/[^ ]+ v0\.0\.0$/ {print $1}' "$modfile"); do
		go mod edit -replace="$m=$m@$STAGING_VERSION"
	done
	go mod tidy
	ldf="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=${K8S_VERSION%%.*} -X $p.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION")"
	done
	for b in "${k8s_bins[@]}"; do
		go build -trimpath -tags=selinux,notest,grpcnotrace -ldflags="$ldf" -o "$OUT/$b.tmp" "k8s.io/kubernetes/cmd/$b"
		mv "$OUT/$b.tmp" "$OUT/$b"
	done
fi

if missing kwok; then
	log "building kwok v$KWOK_VERSION (about 1.5 min cold)"
	mkdir -p "$work/kwok"
	GOBIN="$work/kwok" go install -trimpath -ldflags='-s -w' "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
	mv "$work/kwok/kwok" "$OUT/kwok"
fi
if wanted kwok && [[ ! -s "$OUT/kwok-stages.yaml" ]]; then
	# The standalone kwok binary has no built-in stages: take the upstream "fast" ones.
	kdir=$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		echo '---'
		cat "$kdir/kustomize/stage/$f"
	done >"$OUT/kwok-stages.yaml.tmp"
	mv "$OUT/kwok-stages.yaml.tmp" "$OUT/kwok-stages.yaml"
fi
if wanted kwok && [[ ! -s "$OUT/kwok-portforward-crd.yaml" ]]; then
	# kwok serves pods' port-forwards as their kubelet, configured by PortForward objects.
	kdir=$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
	cp "$kdir/kustomize/crd/bases/kwok.x-k8s.io_portforwards.yaml" "$OUT/kwok-portforward-crd.yaml.tmp"
	mv "$OUT/kwok-portforward-crd.yaml.tmp" "$OUT/kwok-portforward-crd.yaml"
fi
echo "$OUT"
