#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine, for kda's cluster tests (CI) and for trying
# `kda cluster` without a cluster: munge, slurmctld and slurmd from Debian's packages, this host as
# the one node, 4 fake GPUs (GRES backed by character devices that alias /dev/null), no cgroups, no
# accounting. Needs root (or sudo).
#
#   scripts/slurm-single-node.sh install     apt-get install slurmctld slurmd slurm-client munge
#   scripts/slurm-single-node.sh up [DIR]    configure in DIR (default /tmp/kda-slurm), start the
#                                            daemons, wait until the node is idle; prints
#                                            SLURM_CONF=DIR/slurm.conf for the clients
#   scripts/slurm-single-node.sh down [DIR]  stop the daemons (munged keeps running)
set -euo pipefail

cmd=${1:-up}
dir=${2:-/tmp/kda-slurm}
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

install() {
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge
}

start_munge() {
  if munge -n 2> /dev/null | unmunge > /dev/null 2>&1; then return; fi
  "${sudo_cmd[@]}" mkdir -p /run/munge /var/log/munge /var/lib/munge
  "${sudo_cmd[@]}" chown munge:munge /run/munge /var/log/munge /var/lib/munge
  "${sudo_cmd[@]}" chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    "${sudo_cmd[@]}" sh -c 'dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2> /dev/null'
    "${sudo_cmd[@]}" chown munge:munge /etc/munge/munge.key
    "${sudo_cmd[@]}" chmod 0400 /etc/munge/munge.key
  fi
  "${sudo_cmd[@]}" su -s /bin/sh munge -c /usr/sbin/munged
  for _ in $(seq 50); do
    if munge -n 2> /dev/null | unmunge > /dev/null 2>&1; then return; fi
    sleep 0.1
  done
  echo "slurm-single-node: munged did not start" >&2
  exit 1
}

configure() {
  local node cpus mem
  node=$(hostname -s)
  cpus=$(nproc)
  mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))
  "${sudo_cmd[@]}" mkdir -p "$dir/state" "$dir/spool" "$dir/dev"
  for i in 0 1 2 3; do
    [ -c "$dir/dev/gpu$i" ] || "${sudo_cmd[@]}" mknod "$dir/dev/gpu$i" c 1 3
  done
  "${sudo_cmd[@]}" tee "$dir/gres.conf" > /dev/null << EOF
AutoDetect=off
NodeName=$node Name=gpu File=$dir/dev/gpu[0-3]
EOF
  "${sudo_cmd[@]}" tee "$dir/slurm.conf" > /dev/null << EOF
ClusterName=kda
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
JobRequeue=1
MpiDefault=none
KillWait=5
NodeName=$node CPUs=$cpus RealMemory=$mem Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

up() {
  start_munge
  configure
  export SLURM_CONF=$dir/slurm.conf
  "${sudo_cmd[@]}" env SLURM_CONF="$SLURM_CONF" slurmctld -f "$SLURM_CONF"
  "${sudo_cmd[@]}" env SLURM_CONF="$SLURM_CONF" slurmd -f "$SLURM_CONF"
  for _ in $(seq 100); do
    state=$(sinfo -h -o %T 2> /dev/null || true)
    if [ "$state" = idle ]; then
      echo "SLURM_CONF=$SLURM_CONF"
      return
    fi
    if [ "$state" = inval ] || [ "$state" = drained ] || [ "$state" = "drained*" ]; then
      scontrol update nodename="$(hostname -s)" state=resume 2> /dev/null || true
    fi
    sleep 0.2
  done
  echo "slurm-single-node: the node did not become idle (state: ${state:-none}); see $dir/slurmctld.log" >&2
  exit 1
}

down() {
  export SLURM_CONF=$dir/slurm.conf
  scontrol shutdown > /dev/null 2>&1 || true
  for f in "$dir/slurmd.pid" "$dir/slurmctld.pid"; do
    [ -f "$f" ] && "${sudo_cmd[@]}" kill "$(cat "$f")" 2> /dev/null || true
  done
}

case "$cmd" in
  install) install ;;
  up) up ;;
  down) down ;;
  *)
    echo "usage: $0 install | up [DIR] | down [DIR]" >&2
    exit 2
    ;;
esac
