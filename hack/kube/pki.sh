#!/usr/bin/env bash
# Writes the single-node cluster's PKI and kubeconfigs into $KUBE_PKI (hack/kube/env.sh):
# a CA, the API server's serving certificate (loopback, the node's address, the kubernetes
# Service IP and names), client certificates for admin (system:masters), the kubelet
# (system:node:<node>), kube-controller-manager, kube-scheduler, kube-proxy and the API
# server's kubelet client, and the service-account signing key. Kept between kube-up runs
# (kube-down removes them with the rest of the state).
set -euo pipefail
# shellcheck source=hack/kube/env.sh
. "$(dirname "$0")/env.sh"
mkdir -p "$KUBE_PKI"
cd "$KUBE_PKI"
[ -f done ] && exit 0

days=3650
openssl genrsa -out ca.key 2048 2>/dev/null
openssl req -x509 -new -key ca.key -sha256 -days $days -subj "/CN=kafka-mirror-kube-ca" -out ca.crt 2>/dev/null

cert() { # cert <name> <subject> <extendedKeyUsage> [subjectAltName]
  local name=$1 subj=$2 eku=$3 san=${4:-}
  openssl genrsa -out "$name.key" 2048 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -z "$san" ] || echo "subjectAltName=$san"
  } > "$name.ext"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days $days -sha256 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:$KUBE_NODE_IP,IP:$KUBE_APISERVER_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert kubelet-serving "/CN=$KUBE_NODE" serverAuth "IP:127.0.0.1,IP:$KUBE_NODE_IP,DNS:$KUBE_NODE"
cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$KUBE_NODE" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

kubeconfig() { # kubeconfig <file> <cert name> <server>
  local file=$1 name=$2 server=$3
  cat > "$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: kafka-mirror-kube
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 < ca.crt)
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 < "$name.crt")
    client-key-data: $(base64 -w0 < "$name.key")
contexts:
- name: kafka-mirror-kube
  context: {cluster: kafka-mirror-kube, user: $name}
current-context: kafka-mirror-kube
KC
  chmod 600 "$file"
}
kubeconfig admin.kubeconfig admin https://127.0.0.1:6443
kubeconfig kubelet.kubeconfig kubelet https://127.0.0.1:6443
kubeconfig controller-manager.kubeconfig controller-manager https://127.0.0.1:6443
kubeconfig scheduler.kubeconfig scheduler https://127.0.0.1:6443
kubeconfig kube-proxy.kubeconfig kube-proxy https://127.0.0.1:6443
chmod 600 ./*.key
touch done
