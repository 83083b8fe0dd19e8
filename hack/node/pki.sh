#!/usr/bin/env bash
# A throwaway PKI for the test node (openssl only): CA, serving and client certificates, the
# ServiceAccount signing key and a kubeconfig per component. Kept while it exists.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
D=$NODE_DIR/pki
mkdir -p "$D" && cd "$D"
[[ -s admin.kubeconfig ]] && exit 0
openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -nodes -key ca.key -subj "/CN=switchboard-node-ca" -days 365 -out ca.crt
sign() { # name subject [subjectAltName]
	local n=$1 subj=$2 san=${3:-}
	openssl genrsa -out "$n.key" 2048 2>/dev/null
	openssl req -new -key "$n.key" -subj "$subj" -out "$n.csr"
	if [[ -n $san ]]; then
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" >"$n.ext"
	else
		printf 'extendedKeyUsage=clientAuth\n' >"$n.ext"
	fi
	openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
	rm -f "$n.csr" "$n.ext"
}
sign apiserver "/CN=kube-apiserver" "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1,IP:$NODE_IP"
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
sign admin "/O=system:masters/CN=switchboard-node-admin"
sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
sign kubelet-serving "/CN=$NODE_NAME" "DNS:$NODE_NAME,IP:$NODE_IP"
sign controller-manager "/CN=system:kube-controller-manager"
sign scheduler "/CN=system:kube-scheduler"
sign kube-proxy "/CN=system:kube-proxy"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
for n in kubelet controller-manager scheduler kube-proxy admin; do
	cat >"$n.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: switchboard-node
  cluster: {server: "https://$NODE_IP:$API_PORT", certificate-authority: "$D/ca.crt"}
users:
- name: $n
  user: {client-certificate: "$D/$n.crt", client-key: "$D/$n.key"}
contexts:
- name: switchboard-node
  context: {cluster: switchboard-node, user: $n}
current-context: switchboard-node
KC
done
