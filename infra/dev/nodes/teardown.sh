#!/usr/bin/env bash
# Removes everything a node-mode slot made (infra/dev/local/nodes): its containers, every process it started,
# its network namespaces and bridge, and its state folder. Safe to run twice, and on a slot whose owner
# was SIGKILLed (the harness runs it on stop, its watchdog when the owner dies, and the next owner of a
# stale slot before reuse).
#   teardown.sh STATE_DIR        e.g. /var/tmp/dvm-nodes/slot0
# Mounts need no step of their own: every mount a node makes (pod volumes, container root file systems,
# pod network namespace handles, its private /tmp) lives in the node's private mount namespace, which
# goes away with its last process.
set -u
state="${1:?usage: teardown.sh STATE_DIR}"
case "$state" in /*/dvm-nodes/slot[0-9]) ;; *) echo "teardown.sh: refusing unexpected path $state" >&2; exit 2 ;; esac
[ -d "$state" ] || exit 0
BRIDGE="" NETNS=""
# shellcheck disable=SC1091
[ -f "$state/plan.env" ] && . "$state/plan.env"

# 1. Containers, through the runc root each node's containerd was told to use.
for runc_root in "$state"/nodes/*/runc; do
  [ -d "$runc_root" ] || continue
  for id in $(runc --root "$runc_root" list -q 2>/dev/null); do
    runc --root "$runc_root" kill "$id" KILL >/dev/null 2>&1
    runc --root "$runc_root" delete --force "$id" >/dev/null 2>&1
  done
done

# 2. Every process started for the slot (each names the state folder on its command line: configs,
#    sockets, kubeconfigs), and the process groups recorded in pids.
ours() { # pids whose command line names the state folder (this script excepted)
  local dir pid
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ "$pid" = "$$" ] && continue
    case "$({ tr '\0' ' ' < "$dir/cmdline"; } 2>/dev/null)" in *teardown.sh*) ;; *"$state"*) echo "$pid" ;; esac
  done
}
kill_all() {
  local signal=$1 pid
  for pid in $(ours); do kill "-$signal" "$pid" 2>/dev/null; done
  while read -r pid; do
    case $pid in '' | *[!0-9]*) ;; *) [ "$pid" -gt 1 ] && kill "-$signal" -- "-$pid" 2>/dev/null ;; esac
  done < <(cat "$state/pids" 2>/dev/null)
}
kill_all TERM
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ -z "$(ours)" ] && break
  sleep 0.3
done
kill_all KILL

# 3. The network: node namespaces (their veths, pod bridges and iptables rules go with them), the bridge.
for ns in $NETNS; do ip netns delete "$ns" 2>/dev/null; done
[ -n "$BRIDGE" ] && ip link delete "$BRIDGE" 2>/dev/null
# iproute2 bind-mounts /run/netns onto itself on first use; leave no mount once no namespace is left.
if [ -d /run/netns ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ] && mountpoint -q /run/netns; then umount /run/netns 2>/dev/null; fi

# 4. The cgroups containerd made for the containers ("k8s.io" in each hierarchy): only empty ones go,
#    so another slot's running containers keep theirs.
for hierarchy in /sys/fs/cgroup/*/k8s.io; do
  [ -d "$hierarchy" ] && find "$hierarchy" -depth -type d -exec rmdir {} \; 2>/dev/null
done

# 5. Loop devices over files of the slot: the block-volume tests' disks and the kubelet's locks on the
#    devices it mapped into pods (both name a file under the state folder).
losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null | while read -r device file _; do
  case "$file" in "$state"/*) losetup --detach "$device" 2>/dev/null ;; esac
done

# 6. Anything still mounted under the state folder (nothing should be), then the folder.
grep -F " $state" /proc/self/mountinfo 2>/dev/null | awk '{print $5}' | sort -r | while read -r mnt; do umount -l "$mnt" 2>/dev/null; done
rm -rf "$state"
exit 0
