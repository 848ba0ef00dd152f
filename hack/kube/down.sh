#!/usr/bin/env bash
# make kube-down: stops the node that make kube-up started and removes every trace of it,
# then checks that none is left:
#   processes  every PID in the node's cgroup ($KUBE_CGROUP, every hierarchy): the daemons,
#              containerd's shims and every container; each killed by its PID, never by name;
#   mounts     everything mounted under $KUBE_STATE and $KUBE_RUN (container root file
#              systems, pod volumes, sandbox /dev/shm, the pods' network namespaces);
#   network    the node's network namespace, which holds the pod bridge, the veths, the
#              node's address and kube-proxy's iptables rules, so deleting it removes them;
#              the host's own interfaces are compared with those it had before kube-up;
#   cgroups    the node's cgroups, in every hierarchy, removed;
#   files      $KUBE_STATE and $KUBE_RUN removed (the binary cache stays).
# Safe to run when nothing or only part of the node is up.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=hack/kube/env.sh
. "$here/env.sh"
if [ "$(id -u)" != 0 ]; then kube_log "kube-down needs root"; exit 1; fi
start=$SECONDS

# pids_in_cgroups: every PID in the node's cgroup trees.
pids_in_cgroups() {
  local h
  for h in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts); do
    [ -d "$h/$KUBE_CGROUP" ] && find "$h/$KUBE_CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -un
}

alive() { kill -0 "$1" 2>/dev/null; }

# stop <name>: SIGTERM the daemon by its recorded PID, SIGKILL after 15 s.
stop() {
  local f="$KUBE_PIDS/$1" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 150; i++)); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then kube_log "$1 ($pid) still running 15 s after SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null; fi
  fi
  rm -f "$f"
}

# The kubelet and kube-proxy first, so nothing restarts containers or rewrites rules; then
# every container and shim (in the cgroup); then containerd and the control plane.
stop kubelet
stop kube-proxy
for ((i = 0; i < 50; i++)); do
  others=$(for p in $(pids_in_cgroups); do
    [ -f "$KUBE_PIDS/containerd" ] && [ "$p" = "$(cat "$KUBE_PIDS/containerd")" ] && continue
    for d in etcd kube-apiserver kube-controller-manager kube-scheduler; do
      [ -f "$KUBE_PIDS/$d" ] && [ "$p" = "$(cat "$KUBE_PIDS/$d")" ] && continue 2
    done
    echo "$p"
  done)
  [ -n "$others" ] || break
  # shellcheck disable=SC2086
  kill -KILL $others 2>/dev/null
  sleep 0.2
done
for d in containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$d"; done
for ((i = 0; i < 50; i++)); do
  left=$(pids_in_cgroups)
  [ -n "$left" ] || break
  # shellcheck disable=SC2086
  kill -KILL $left 2>/dev/null
  sleep 0.2
done

# Mounts under the node's directories, deepest first.
for ((i = 0; i < 5; i++)); do
  mapfile -t mounts < <(awk -v a="$KUBE_STATE" -v b="$KUBE_RUN" 'index($5, a) == 1 || index($5, b) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  [ ${#mounts[@]} -gt 0 ] || break
  for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

[ -e "/run/netns/$KUBE_NETNS" ] && ip netns delete "$KUBE_NETNS"

# cgroups, deepest first.
for h in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts); do
  [ -d "$h/$KUBE_CGROUP" ] && find "$h/$KUBE_CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
done

before=""
[ -f "$KUBE_RUN/host-links.before" ] && before=$(cat "$KUBE_RUN/host-links.before")
# The kubelet's links in /var/log/containers to our pod logs; the directory too if it made it.
if [ -d /var/log/containers ]; then
  for l in /var/log/containers/*; do
    [ -L "$l" ] && [[ $(readlink "$l") == "$KUBE_STATE"/* ]] && rm -f "$l"
  done
  [ -f "$KUBE_RUN/created-var-log-containers" ] && rmdir /var/log/containers 2>/dev/null
fi
# /run/containerd, if kube-up's containerd made it: only its empty directories.
if [ -f "$KUBE_RUN/created-run-containerd" ] && [ -d /run/containerd ]; then
  find /run/containerd -depth -type d -empty -delete 2>/dev/null
fi
rm -rf "$KUBE_RUN" "$KUBE_STATE"

# The checks.
fail=0
left=$(pids_in_cgroups)
if [ -n "$left" ]; then kube_log "LEFT: processes $left"; fail=1; fi
mounts=$(awk -v a="$KUBE_STATE" -v b="$KUBE_RUN" 'index($5, a) == 1 || index($5, b) == 1 {print $5}' /proc/self/mountinfo)
if [ -n "$mounts" ]; then kube_log "LEFT: mounts $mounts"; fail=1; fi
if ip netns list | grep -qw "$KUBE_NETNS"; then kube_log "LEFT: network namespace $KUBE_NETNS"; fail=1; fi
cg=$(for h in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/mounts); do [ -d "$h/$KUBE_CGROUP" ] && echo "$h/$KUBE_CGROUP"; done)
if [ -n "$cg" ]; then kube_log "LEFT: cgroups $cg"; fail=1; fi
if [ -n "$before" ]; then
  new=$(comm -13 <(echo "$before") <(ip -o link show | awk -F': ' '{print $2}' | sort))
  if [ -n "$new" ]; then kube_log "LEFT: host interfaces not there before kube-up: $new"; fail=1; fi
fi
if [ -e "$KUBE_STATE" ] || [ -e "$KUBE_RUN" ]; then kube_log "LEFT: $KUBE_STATE or $KUBE_RUN"; fail=1; fi
links=$(find /var/log/containers -maxdepth 1 -lname "$KUBE_STATE/*" 2>/dev/null)
if [ -n "$links" ]; then kube_log "LEFT: log links $links"; fail=1; fi
if [ $fail = 0 ]; then
  kube_log "down in $((SECONDS - start))s: no processes in the node's cgroups, no mounts under $KUBE_STATE or $KUBE_RUN, no network namespace $KUBE_NETNS, no new host interfaces, no cgroups, no log links left"
fi
exit $fail
