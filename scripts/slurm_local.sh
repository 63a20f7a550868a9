#!/usr/bin/env bash
# A one-node SLURM cluster on this Debian (or Ubuntu) machine, from the distribution's packages, so the
# workflow's cluster route (profiles/slurm) can be tried without a cluster. Run as root:
#
#   sudo scripts/slurm_local.sh start    install slurmctld, slurmd, munge, slurm-client if missing; write a
#                                        minimal slurm.conf sized from nproc and /proc/meminfo; start munged
#                                        (unless one answers already), slurmctld and slurmd; wait for sinfo
#   sudo scripts/slurm_local.sh status   sinfo, and the PID of every daemon this script started
#   sudo scripts/slurm_local.sh stop     stop the daemons this script started, by the PIDs it recorded
#
# The cluster: one node (this host, `hostname -s`) with all its CPUs and 90 % of its memory, one default
# partition "local", no accounting (no slurmdbd: `sacct` has nothing to show, so snakemake's SLURM plugin
# must ask `squeue`: --slurm-status-command squeue), and MinJobAge=3600 so squeue/scontrol still show a
# finished job for an hour (the plugin reads a job's end state that way). Processes are tracked with
# proctrack/linuxproc (works in containers without systemd or cgroup delegation).
# Files: /etc/slurm/slurm.conf (refused if one exists that this script did not write) and $SLURM_LOCAL_DIR
# (default /var/lib/slurm-local: state, spool, logs, pid files). The munge key is the one Debian's munge
# package creates (/etc/munge/munge.key); one is created if it is missing.
set -euo pipefail

DIR="${SLURM_LOCAL_DIR:-/var/lib/slurm-local}"
CONF=/etc/slurm/slurm.conf
MARK="# written by niels_gpt scripts/slurm_local.sh"
PACKAGES=(slurmctld slurmd munge slurm-client)
HOST="$(hostname -s)"

die() { echo "slurm_local: $*" >&2; exit 1; }
pid_alive() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

install_packages() {
  local missing=()
  for cmd in slurmctld slurmd munged sinfo; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
  [[ ${#missing[@]} -eq 0 ]] && return
  echo "installing ${PACKAGES[*]} (missing: ${missing[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${PACKAGES[@]}" >/dev/null; }
}

write_conf() {
  if [[ -e "$CONF" ]] && ! grep -qF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script; a SLURM is configured here already (use it, or move the file away)"
  fi
  local cpus mem_mb
  cpus="$(nproc --all)"
  mem_mb="$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)"
  mkdir -p "$DIR/state" "$DIR/spool" "$(dirname "$CONF")"
  cat > "$CONF" <<EOF
$MARK: one node, no accounting
ClusterName=local
SlurmctldHost=$HOST
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
NodeName=$HOST CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  echo "wrote $CONF: node $HOST, $cpus CPUs, $mem_mb MB"
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
  runuser -u munge -- /usr/sbin/munged
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
  "/usr/sbin/$name" || die "$name did not start (see $DIR/$name.log)"
}

wait_for_node() {
  for _ in $(seq 60); do
    state="$(sinfo -h -N -n "$HOST" -o %t 2>/dev/null || true)"
    case "$state" in
      idle* | mix* | alloc*) sinfo; return ;;
      drain* | down*) scontrol update nodename="$HOST" state=resume 2>/dev/null || true ;;
    esac
    sleep 1
  done
  die "node $HOST did not become idle; see $DIR/slurmctld.log and $DIR/slurmd.log"
}

start() {
  [[ "$(id -u)" -eq 0 ]] || die "run as root (it installs packages and starts daemons): sudo $0 start"
  install_packages
  write_conf
  chmod 700 "$DIR/state" "$DIR/spool"
  start_munge
  start_daemon slurmctld
  start_daemon slurmd
  wait_for_node
  echo "SLURM is up. Try: snakemake --profile profiles/slurm --slurm-status-command squeue ... (README: Running on a cluster)"
}

stop() {
  local pidfile pid
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
}

status() {
  sinfo 2>/dev/null || echo "no SLURM controller answers"
  for name in munged slurmctld slurmd; do
    if pid_alive "$DIR/$name.pid"; then echo "$name: pid $(cat "$DIR/$name.pid")"; else echo "$name: not started by this script"; fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
