#!/usr/bin/env bash
# make kube-up: a real single-node Kubernetes on this machine, as root: etcd and
# kube-apiserver (envtest's cached binaries), kube-controller-manager, kube-scheduler,
# kubelet and kube-proxy (hack/kube/build.sh, cached), containerd with the CNI bridge
# plugin, the pause image and the product's image built here and imported. Then it waits
# for the node to be Ready and for a pod to run, and prints how to use the cluster.
#
# Everything runs in the network namespace $KUBE_NETNS (hack/kube/env.sh) and in the cgroup
# $KUBE_CGROUP; `make kube-down` (hack/kube/down.sh) stops it and removes every trace.
# The host runs cgroup v1 without systemd, so the kubelet has failCgroupV1: false and
# cgroupDriver: cgroupfs, and containerd SystemdCgroup = false (docs/reliability.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kube/env.sh
. "$here/env.sh"

# Generous ceilings for a busy 2-core machine.
readyTimeout=180 # seconds for each daemon, the node and the smoke pod

if [ "$(id -u)" != 0 ]; then kube_log "a node needs root (network namespace, cgroups, mounts)"; exit 1; fi
if [ -e "/run/netns/$KUBE_NETNS" ]; then
  kube_log "the node is already up (network namespace $KUBE_NETNS exists); run 'make kube-down' first"
  exit 1
fi
start=$SECONDS

# Debian packages: the container runtime, the CNI plugins, and what kube-proxy runs.
need=()
for p in containerd:containerd containernetworking-plugins:/usr/lib/cni/bridge iptables:iptables conntrack:conntrack runc:runc; do
  pkg=${p%%:*} what=${p#*:}
  if [[ $what == /* ]]; then [ -e "$what" ] || need+=("$pkg"); else command -v "$what" >/dev/null || need+=("$pkg"); fi
done
if [ ${#need[@]} -gt 0 ]; then
  kube_log "installing ${need[*]} (apt-get)"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi

# Binaries, built once and cached by version.
envtest_dir=$(bash "$kube_root/hack/envtest.sh")
kube_dir=$(bash "$here/build.sh")
[ -f "$kube_root/bin/image/kafka-mirror.tar" ] || { kube_log "no product image: run 'make image' (make kube-up does)"; exit 1; }
(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$kube_root/bin/image/pause" ./pause)
(cd "$kube_root/hack/image" && go run . pause --binary "$kube_root/bin/image/pause" --out "$kube_root/bin/image/pause.tar" --ref "$KUBE_PAUSE_IMAGE" >/dev/null)
kube_log "binaries ready ($((SECONDS - start))s): $envtest_dir, $kube_dir"

mkdir -p "$KUBE_STATE" "$KUBE_RUN" "$KUBE_LOGS" "$KUBE_PIDS"
# A failed start leaves what runs for a look at the logs; kube-down removes it.
trap 'rc=$?; [ $rc = 0 ] || kube_log "kube-up failed (exit $rc); logs in $KUBE_LOGS; run make kube-down to remove what started"' EXIT
# What the host has before we start, so that kube-down can show nothing of ours is left.
ip -o link show | awk -F': ' '{print $2}' | sort > "$KUBE_RUN/host-links.before"
# The kubelet links every container's log into /var/log/containers (a fixed path).
[ -d /var/log/containers ] || touch "$KUBE_RUN/created-var-log-containers"
# containerd 1.6 puts its shims' sockets in /run/containerd/s whatever its state directory.
[ -d /run/containerd ] || touch "$KUBE_RUN/created-run-containerd"

# The network namespace: loopback, with the node's address on it too (the kernel here has
# no dummy interfaces: CONFIG_DUMMY is not set), forwarding for the pod bridge. It has no
# link to the host and no default route, so nothing in it can reach beyond the machine.
ip netns add "$KUBE_NETNS"
kube_in_ns ip link set lo up
kube_in_ns ip addr add "$KUBE_NODE_IP/32" dev lo
kube_in_ns sysctl -qw net.ipv4.ip_forward=1
kube_in_ns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true

# cgroups: $KUBE_CGROUP in every v1 hierarchy; the daemons in its daemons child, the
# kubelet's kubepods next to it (cgroupRoot). cpuset children start empty, so copy the root's.
mapfile -t hierarchies < <(awk '$3 == "cgroup" {print $2}' /proc/mounts)
for h in "${hierarchies[@]}"; do
  mkdir -p "$h/$KUBE_CGROUP/daemons"
  if [ -f "$h/cpuset.cpus" ]; then
    for d in "$h/$KUBE_CGROUP" "$h/$KUBE_CGROUP/daemons"; do
      cat "$h/cpuset.cpus" > "$d/cpuset.cpus"
      cat "$h/cpuset.mems" > "$d/cpuset.mems"
    done
  fi
done

# spawn <name> <command...>: start a daemon in the namespace and the daemons cgroup, its
# output in $KUBE_LOGS/<name>.log and its PID in $KUBE_PIDS/<name>.
spawn() {
  local name=$1
  shift
  # shellcheck disable=SC2016
  setsid bash -c 'for h in $CGROUPS; do echo $$ > "$h/cgroup.procs"; done; exec nsenter --net="$NETNS" -- "$@"' _ "$@" \
    > "$KUBE_LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$KUBE_PIDS/$name"
}
export NETNS="/run/netns/$KUBE_NETNS"
CGROUPS=$(for h in "${hierarchies[@]}"; do printf '%s ' "$h/$KUBE_CGROUP/daemons"; done)
export CGROUPS

# wait_for <what> <command...>: retry the command every second until it succeeds.
wait_for() {
  local what=$1 t0=$SECONDS
  shift
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - t0 > readyTimeout)); then
      kube_log "$what not ready after ${readyTimeout}s; logs in $KUBE_LOGS"
      exit 1
    fi
    sleep 1
  done
  kube_log "$what ready ($((SECONDS - start))s)"
}

bash "$here/pki.sh"
pki=$KUBE_PKI

# containerd: its own root, state and socket (not the system's), runc with cgroupfs, the
# CNI bridge from Debian's plugins, our pause image as the sandbox image.
mkdir -p "$KUBE_STATE/containerd" "$KUBE_RUN/containerd" "$KUBE_STATE/cni/net.d"
cat > "$KUBE_STATE/containerd/config.toml" <<EOF
version = 2
root = "$KUBE_STATE/containerd"
state = "$KUBE_RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$KUBE_CONTAINERD_SOCK"
[ttrpc]
  address = "$KUBE_RUN/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$KUBE_STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$KUBE_PAUSE_IMAGE"
  netns_mounts_under_state_dir = true
  # This machine's root lacks CAP_SYS_RESOURCE (CapEff 000001fffeffffff, bit 24 clear), so
  # no process may lower its oom_score_adj: the kubelet asks -998 for every sandbox and runc
  # failed with "failed to update /proc/self/oom_score_adj: Permission denied". Clamp the
  # values to containerd's own instead.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$KUBE_RUN/runc"
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$KUBE_STATE/cni/net.d"
EOF
cat > "$KUBE_STATE/cni/net.d/10-kafka-mirror.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kafka-mirror-kube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "kmcni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$KUBE_POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$KUBE_STATE/cni/ipam"
      }
    }
  ]
}
EOF
spawn containerd containerd --config "$KUBE_STATE/containerd/config.toml"
ctr() { command ctr --address "$KUBE_CONTAINERD_SOCK" -n k8s.io "$@"; }
wait_for containerd ctr version
ctr images import "$kube_root/bin/image/pause.tar" >/dev/null
ctr images import "$kube_root/bin/image/kafka-mirror.tar" >/dev/null
kube_log "images imported: $(ctr images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

# etcd and the API server.
spawn etcd "$envtest_dir/etcd" --data-dir "$KUBE_STATE/etcd" --name kafka-mirror-kube \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster kafka-mirror-kube=http://127.0.0.1:2380 --unsafe-no-fsync
spawn kube-apiserver "$envtest_dir/kube-apiserver" \
  --etcd-servers http://127.0.0.1:2379 \
  --advertise-address "$KUBE_NODE_IP" --bind-address 0.0.0.0 --secure-port 6443 \
  --service-cluster-ip-range "$KUBE_SERVICE_CIDR" \
  --client-ca-file "$pki/ca.crt" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --kubelet-preferred-address-types InternalIP \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true
wait_for kube-apiserver kube_in_ns curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" https://127.0.0.1:6443/readyz
kubectl() { kube_in_ns "$kube_dir/kubectl" --kubeconfig "$KUBE_ADMIN_KUBECONFIG" "$@"; }

spawn kube-controller-manager "$kube_dir/kube-controller-manager" \
  --kubeconfig "$pki/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$pki/controller-manager.kubeconfig" --authorization-kubeconfig "$pki/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --allocate-node-cidrs=false --service-cluster-ip-range "$KUBE_SERVICE_CIDR"
spawn kube-scheduler "$kube_dir/kube-scheduler" --kubeconfig "$pki/scheduler.kubeconfig" \
  --authentication-kubeconfig "$pki/scheduler.kubeconfig" --authorization-kubeconfig "$pki/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false

# The kubelet. cgroup v1 without systemd: failCgroupV1 false, cgroupfs. Eviction thresholds
# low: the disk is shared with other work and an eviction would only confuse a test.
mkdir -p "$KUBE_STATE/kubelet"
cat > "$KUBE_STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$KUBE_CGROUP
containerRuntimeEndpoint: unix://$KUBE_CONTAINERD_SOCK
address: $KUBE_NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization:
  mode: Webhook
failSwapOn: false
resolvConf: /etc/resolv.conf
podLogsDir: $KUBE_STATE/pod-logs
podCIDR: $KUBE_POD_CIDR
maxPods: 30
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
serializeImagePulls: false
EOF
spawn kubelet "$kube_dir/kubelet" --config "$KUBE_STATE/kubelet/config.yaml" \
  --kubeconfig "$pki/kubelet.kubeconfig" --root-dir "$KUBE_STATE/kubelet" \
  --hostname-override "$KUBE_NODE" --node-ip "$KUBE_NODE_IP" --v 1

# kube-proxy, iptables mode, so that pods reach the API server at the kubernetes Service's
# IP (in-cluster config); conntrack limits left as the kernel has them (they are global).
cat > "$KUBE_STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $pki/kube-proxy.kubeconfig
hostnameOverride: $KUBE_NODE
clusterCIDR: 10.244.0.0/16
bindAddress: $KUBE_NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
spawn kube-proxy "$kube_dir/kube-proxy" --config "$KUBE_STATE/kube-proxy.yaml"

wait_for "node $KUBE_NODE" kubectl wait --for=condition=Ready "node/$KUBE_NODE" --timeout=5s
wait_for "default service account" kubectl get serviceaccount default -n default

# A pod that really runs, through the scheduler, the kubelet, containerd, runc and CNI.
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: kube-up-smoke, namespace: default}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: version
    image: $(ctr images ls -q | grep -m1 'kafka-mirror:')
    imagePullPolicy: Never
    args: [version]
    securityContext:
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
      seccompProfile: {type: RuntimeDefault}
EOF
wait_for "smoke pod (kafka-mirror version in a pod)" kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/kube-up-smoke --timeout=5s
kube_log "smoke pod printed: $(kubectl logs kube-up-smoke | head -1)"
kubectl delete pod kube-up-smoke --wait=false >/dev/null

cat >&2 <<EOF
kube: node $KUBE_NODE Ready in $((SECONDS - start))s. The cluster lives in network namespace $KUBE_NETNS:
  bash hack/kube/kubectl.sh get nodes,pods -A
  nsenter --net=/run/netns/$KUBE_NETNS -- <command>   (e.g. helm with KUBECONFIG=$KUBE_ADMIN_KUBECONFIG)
  make kube-down
EOF
