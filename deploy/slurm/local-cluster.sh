#!/usr/bin/env bash
# A one-node Slurm cluster on this machine: munged, slurmctld and slurmd from Debian's `munge` and
# `slurm-wlm` packages, run as root, every file but munge's in DIR. `stop` stops what `start` started
# (munged too, unless it was already running). For trying nqueens.sbatch before a
# real cluster, and what the test suite runs it on.
#
#   deploy/slurm/local-cluster.sh start DIR [SLURMCTLD_PORT SLURMD_PORT]
#   SLURM_CONF=DIR/slurm.conf NQUEENS_N=12 sbatch --wait --nodes=1 deploy/slurm/nqueens.sbatch
#   deploy/slurm/local-cluster.sh stop DIR
set -euo pipefail
usage() { echo "usage: $0 start|stop DIR [SLURMCTLD_PORT SLURMD_PORT]" >&2; exit 2; }
[ $# -ge 2 ] || usage
dir="$(realpath -m "$2")"
export PATH="$PATH:/usr/sbin:/sbin"
export SLURM_CONF="$dir/slurm.conf"

case "$1" in
start)
  ctld_port="${3:-6817}"
  slurmd_port="${4:-6818}"
  node="$(hostname -s)"
  mkdir -p "$dir/state" "$dir/spool"
  cat >"$SLURM_CONF" <<EOF
ClusterName=nqueens-local
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
KillWait=10
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  # One munged serves every Slurm daemon of the machine; the package made its key.
  if ! munge -n </dev/null >/dev/null 2>&1; then
    [ -f /etc/munge/munge.key ] || mungekey --create
    mkdir -p /run/munge
    chown munge:munge /run/munge
    runuser -u munge -- munged
    # Started here, so `stop` stops it too.
    touch "$dir/munged.started"
  fi
  slurmctld
  slurmd
  for _ in $(seq 60); do
    [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && exit 0
    sleep 0.5
  done
  echo "the local Slurm cluster did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
  sinfo >&2 || true
  exit 1
  ;;
stop)
  # Jobs first, so that none of their processes outlives the cluster.
  jobs="$(squeue -h -o %i 2>/dev/null || true)"
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    scancel $jobs || true
    for _ in $(seq 60); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
  fi
  for daemon in slurmd slurmctld; do
    pid="$(cat "$dir/$daemon.pid" 2>/dev/null || true)"
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  # munged only if `start` started it (one already running serves others too).
  if [ -f "$dir/munged.started" ]; then
    munged --stop >/dev/null 2>&1 || true
    rm -f "$dir/munged.started"
  fi
  ;;
*) usage ;;
esac
