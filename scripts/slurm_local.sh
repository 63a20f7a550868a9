#!/usr/bin/env bash
# A one-node SLURM cluster on this Debian (or Ubuntu) machine, from the distribution's packages, so the
# workflow's cluster route (profiles/slurm) can be tried without a cluster. Needs root: run it as root, or
# as a user with sudo (start and stop then run themselves again through sudo).
#
#   scripts/slurm_local.sh start [--replace-conf]
#       install slurmctld, slurmd, munge, slurm-client if missing; write a minimal slurm.conf sized from
#       nproc and /proc/meminfo; start munged (unless one answers already), slurmctld and slurmd; wait for
#       sinfo. A slurm.conf this script did not write is refused; with --replace-conf (and no controller
#       answering) it is moved aside to slurm.conf.before-slurm-local, and `stop` moves it back
#   scripts/slurm_local.sh status   sinfo, and the PID of every daemon this script started
#   scripts/slurm_local.sh stop     stop the daemons this script started, by the PIDs it recorded; put back
#                                   a slurm.conf that start --replace-conf moved aside
#
# The cluster: one node (this host, `hostname -s`) with all its CPUs and 90 % of its memory, one default
# partition "local", no accounting (no slurmdbd: `sacct` has nothing to show, so snakemake's SLURM plugin
# must ask `squeue`: --slurm-status-command squeue), and MinJobAge=3600 so squeue/scontrol still show a
# finished job for an hour (the plugin reads a job's end state that way). Processes are tracked with
# proctrack/linuxproc (works in containers without systemd or cgroup delegation).
# Files: $SLURM_LOCAL_CONF (default /etc/slurm/slurm.conf; every SLURM command here reads it through
# SLURM_CONF) and $SLURM_LOCAL_DIR (default /var/lib/slurm-local: state, spool, logs, pid files). The munge
# key is the one Debian's munge package creates (/etc/munge/munge.key); one is created if it is missing.
set -euo pipefail

DIR="${SLURM_LOCAL_DIR:-/var/lib/slurm-local}"
CONF="${SLURM_LOCAL_CONF:-/etc/slurm/slurm.conf}"
SAVED="$CONF.before-slurm-local" # where start --replace-conf moves a slurm.conf it did not write
MARK="# written by niels_gpt scripts/slurm_local.sh"
PACKAGES=(slurmctld slurmd munge slurm-client)
SELF="$(readlink -f "${BASH_SOURCE[0]}")"
USAGE="usage: $0 start [--replace-conf] | status | stop"
export SLURM_CONF="$CONF"

die() { echo "slurm_local: $*" >&2; exit 1; }
pid_alive() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
ours() { grep -qF "$MARK" "$1"; }
controller_answers() { command -v sinfo >/dev/null && timeout 20 sinfo -h >/dev/null 2>&1; }

# Root, or this same command again through sudo (with this run's file locations), or how to get root.
need_root() {
  [[ "$(id -u)" -eq 0 ]] && return
  if command -v sudo >/dev/null; then
    echo "slurm_local: $1 needs root: running it through sudo" >&2
    exec sudo -- env SLURM_LOCAL_DIR="$DIR" SLURM_LOCAL_CONF="$CONF" "$SELF" "$@"
  fi
  die "$1 needs root (it installs packages and starts daemons) and there is no sudo here: run it as root, e.g. su -c '$SELF $*'"
}

# Refuse a slurm.conf this script did not write, before anything is installed or changed.
check_conf() {
  local replace="$1"
  [[ -e "$CONF" ]] && ! ours "$CONF" || return 0
  if controller_answers; then
    die "$CONF was not written by this script and a SLURM controller answers (sinfo): this machine has a cluster already; use it (README: Running on a cluster) instead of starting this one"
  fi
  [[ "$replace" == 1 ]] || die "$CONF was not written by this script, and no SLURM controller answers. To start the one-node cluster anyway: $0 start --replace-conf (moves it to $SAVED; $0 stop moves it back)"
  [[ ! -e "$SAVED" ]] || die "$SAVED exists already (moved aside earlier?): move it back or away (mv $SAVED $CONF) first"
}

install_packages() {
  local missing=()
  for cmd in slurmctld slurmd munged sinfo; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
  [[ ${#missing[@]} -eq 0 ]] && return
  echo "installing ${PACKAGES[*]} (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null; } \
    || die "could not install ${PACKAGES[*]} with apt-get"
}

write_conf() {
  local host="$1" cpus mem_mb
  if [[ -e "$CONF" ]] && ! ours "$CONF"; then
    mv "$CONF" "$SAVED"
    echo "moved $CONF to $SAVED ($0 stop moves it back)"
  fi
  cpus="$(nproc --all)"
  mem_mb="$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
  mkdir -p "$DIR/state" "$DIR/spool" "$(dirname "$CONF")"
  cat > "$CONF" <<EOF
$MARK: one node, no accounting
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
# Finished jobs stay in squeue/scontrol for an hour: the snakemake plugin's squeue status needs it (>= 120 s)
MinJobAge=3600
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  echo "wrote $CONF: node $host, $cpus CPUs, $mem_mb MB"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "munged answers already: using it"
    return
  fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- "$(command -v munged)"
  for _ in $(seq 20); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.25; done
  munge -n | unmunge >/dev/null || die "munged did not start (see /var/log/munge/munged.log)"
  cp /run/munge/munged.pid "$DIR/munged.pid"  # ours to stop
}

start_daemon() {
  local name="$1"
  if pid_alive "$DIR/$name.pid"; then
    echo "$name already running (pid $(cat "$DIR/$name.pid"))"
    return
  fi
  "$(command -v "$name")" || die "$name did not start (see $DIR/$name.log)"
}

wait_for_node() {
  local host="$1" state
  for _ in $(seq 60); do
    state="$(sinfo -h -N -n "$host" -o %t 2>/dev/null || true)"
    case "$state" in
      idle* | mix* | alloc*) sinfo; return ;;
      drain* | down*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  die "node $host did not become idle; see $DIR/slurmctld.log and $DIR/slurmd.log"
}

start() {
  local replace=0 host
  case "${1:-}" in
    "") ;;
    --replace-conf) replace=1 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
  esac
  need_root start "$@"
  check_conf "$replace"
  install_packages
  host="$(hostname -s)"
  write_conf "$host"
  chmod 700 "$DIR/state" "$DIR/spool"
  start_munge
  start_daemon slurmctld
  start_daemon slurmd
  wait_for_node "$host"
  echo "SLURM is up. Try: snakemake --profile profiles/slurm --slurm-status-command squeue ... (README: Running on a cluster)"
}

stop() {
  local pidfile pid
  need_root stop
  for name in slurmd slurmctld munged; do
    pidfile="$DIR/$name.pid"
    pid_alive "$pidfile" || continue
    pid="$(cat "$pidfile")"
    kill "$pid"
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && die "$name (pid $pid) did not stop"
    rm -f "$pidfile"
    echo "stopped $name (pid $pid)"
  done
  if [[ -e "$SAVED" ]] && { [[ ! -e "$CONF" ]] || ours "$CONF"; }; then
    mv "$SAVED" "$CONF"
    echo "moved $SAVED back to $CONF"
  fi
}

status() {
  sinfo 2>/dev/null || echo "no SLURM controller answers"
  for name in munged slurmctld slurmd; do
    if pid_alive "$DIR/$name.pid"; then echo "$name: pid $(cat "$DIR/$name.pid")"; else echo "$name: not started by this script"; fi
  done
}

case "${1:-}" in
  start) shift; [[ $# -le 1 ]] || { echo "$USAGE" >&2; exit 2; }; start "$@" ;;
  stop) [[ $# -eq 1 ]] || { echo "$USAGE" >&2; exit 2; }; stop ;;
  status) [[ $# -eq 1 ]] || { echo "$USAGE" >&2; exit 2; }; status ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac
