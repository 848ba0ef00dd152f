# Sourced by hack/kube/*.sh: the names, paths and addresses of the single-node cluster that
# `make kube-up` starts. Everything it starts lives in one network namespace (KUBE_NETNS) that
# has no link to the host's network: the node's address, the pod bridge, the service IPs,
# kube-proxy's iptables rules and the pods' veths exist only there, so nothing leaves the
# machine and nothing the node does can disturb the host's or other users' networking.
# shellcheck shell=bash
kube_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
KUBE_NETNS=${KUBE_NETNS:-kafka-mirror-kube}
KUBE_STATE=${KUBE_STATE:-/var/lib/kafka-mirror-kube}   # disk: PKI, etcd, containerd root, kubelet root
KUBE_RUN=${KUBE_RUN:-/run/kafka-mirror-kube}           # sockets, containerd state, PIDs, logs
KUBE_NODE=${KUBE_NODE:-kafka-mirror-node}
# The node's address, on the loopback interface inside the namespace; kfake clusters that pods
# should reach listen on it (the e2e tests run inside the namespace too).
KUBE_NODE_IP=10.250.0.1
KUBE_POD_CIDR=10.244.0.0/24
KUBE_SERVICE_CIDR=10.96.0.0/24
KUBE_APISERVER_SERVICE_IP=10.96.0.1
# The cgroup (in every v1 hierarchy) the daemons and, under it, the kubelet's kubepods live in,
# so that kube-down finds every process the node started (shims and containers too) by PID.
KUBE_CGROUP=kafka-mirror-kube
# Images the node runs; both are built here (no registry is reachable) and imported.
KUBE_PAUSE_IMAGE=${KUBE_PAUSE_IMAGE:-localhost/kafka-mirror/pause:3.10}
KUBE_PKI="$KUBE_STATE/pki"
KUBE_ADMIN_KUBECONFIG="$KUBE_PKI/admin.kubeconfig"
KUBE_CONTAINERD_SOCK="$KUBE_RUN/containerd/containerd.sock"
KUBE_LOGS="$KUBE_RUN/logs"
KUBE_PIDS="$KUBE_RUN/pids"

# kube_in_ns runs a command in the node's network namespace (only the network: the mount
# namespace stays the host's, so the kubelet's and containerd's mounts see each other).
kube_in_ns() { nsenter --net="/run/netns/$KUBE_NETNS" -- "$@"; }

kube_log() { echo "kube: $*" >&2; }
