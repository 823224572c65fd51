#!/usr/bin/env bash
# slurm_up.sh - a private, single-host Slurm cluster on loopback for nb's launcher tests.
#
# Starts its own munged (own key and socket), slurmctld and one slurmd per simulated
# node, without systemd, and waits until every node is idle. Nothing is shared with a
# Slurm or munge already on the machine: own config file, ports, socket, state and pid
# files. Clients find the cluster through SLURM_CONF:
#
#     bash scripts/slurm_up.sh                       # 2 nodes nbnode1, nbnode2
#     export SLURM_CONF=/var/lib/nb-slurm/slurm.conf
#     srun -N 2 -n 4 hostname
#     bash scripts/slurm_down.sh
#
# Idempotent: run again with the same settings it only checks the nodes; with other
# settings it stops what it started and starts afresh. Installs the Debian packages
# (munge slurmctld slurmd slurm-client openmpi-bin) with apt-get if missing.
#
# Options (and environment variables):
#   --nodes N        NB_SLURM_NODES        1 or more simulated nodes (default 2). With 1 the
#                                          node is this host; with more they are nbnode1..N,
#                                          each slurmd in its own UTS namespace (jobs see
#                                          hostname = node name), resolved via /etc/hosts.
#   --cpus N         NB_SLURM_CPUS         CPUs declared per node (default 8)
#   --kill-wait S    NB_SLURM_KILL_WAIT    SIGTERM -> SIGKILL on requeue/cancel (default 5)
#   --cred-expire S  NB_SLURM_CRED_EXPIRE  how long a requeued job waits before it may run
#                                          again (Slurm's default is 120; default here 5)
#   --timeout S      NB_SLURM_TIMEOUT      wait for idle nodes (default 60)
#   --no-install     NB_SLURM_INSTALL=0    never call apt-get
# Must run as root (Debian 12). Messages go to stderr prefixed "slurm_up:".
set -euo pipefail

NODES=${NB_SLURM_NODES:-2}
CPUS=${NB_SLURM_CPUS:-8}
KILL_WAIT=${NB_SLURM_KILL_WAIT:-5}
CRED_EXPIRE=${NB_SLURM_CRED_EXPIRE:-5}
TIMEOUT=${NB_SLURM_TIMEOUT:-60}
INSTALL=${NB_SLURM_INSTALL:-1}

BASE=/var/lib/nb-slurm          # config, controller state, spool dirs, logs, munge key
RUN=/run/nb-slurm               # pid files and the munge socket
CONF=$BASE/slurm.conf
CTLD_PORT=16817                 # slurmd i listens on CTLD_PORT + i
HOSTS_TAG="# nb slurm_up.sh nodes"

say() { printf 'slurm_up: %s\n' "$*" >&2; }
die() { printf 'slurm_up: ERROR: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=${2:?}; shift 2 ;;
    --cpus) CPUS=${2:?}; shift 2 ;;
    --kill-wait) KILL_WAIT=${2:?}; shift 2 ;;
    --cred-expire) CRED_EXPIRE=${2:?}; shift 2 ;;
    --timeout) TIMEOUT=${2:?}; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,29p' "$0" | cut -c3-; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
for v in NODES CPUS KILL_WAIT CRED_EXPIRE TIMEOUT; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, got '${!v}'"
done
[ "$NODES" -ge 1 ] && [ "$NODES" -le 8 ] || die "--nodes must be 1..8"
[ "$CPUS" -ge 1 ] || die "--cpus must be at least 1"
[ "$(id -u)" = 0 ] || die "must run as root (installs packages, starts daemons)"

mkdir -p "$RUN" "$BASE/log"
chmod 755 "$RUN" "$BASE"
exec 8>"$RUN/lock"                      # one slurm_up/slurm_down at a time
flock -w 120 8 || die "another slurm_up.sh/slurm_down.sh holds $RUN/lock"

T0=$(date +%s.%N)
took() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

# alive PIDFILE NAME: the pid in PIDFILE runs (not a zombie) and its command is NAME.
alive() {
  local pid state
  [ -s "$1" ] || return 1
  pid=$(tr -dc 0-9 <"$1")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# ---------------------------------------------------------------------- packages
PKGS=(munge slurmctld slurmd slurm-client openmpi-bin)
MISSING=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || MISSING+=("$p")
done
if [ ${#MISSING[@]} -gt 0 ]; then
  [ "$INSTALL" = 1 ] || die "missing packages: ${MISSING[*]} (and --no-install)"
  say "installing ${MISSING[*]}"
  # Keep the packages' maintainer scripts from starting the stock services.
  OWN_POLICY=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
    OWN_POLICY=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  ok=1
  # apt-get update only when the package lists do not know the packages yet.
  if ! apt-cache show slurmctld >/dev/null 2>&1; then
    apt-get update -qq >"$BASE/log/apt.log" 2>&1 || ok=0
  fi
  [ "$ok" = 1 ] && { apt-get install -y -qq --no-install-recommends "${MISSING[@]}" >>"$BASE/log/apt.log" 2>&1 || ok=0; }
  [ "$OWN_POLICY" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$ok" = 1 ] || { tail -n 20 "$BASE/log/apt.log" >&2; die "apt-get failed (log: $BASE/log/apt.log)"; }
  say "packages installed ($(took))"
fi
for b in munged munge unmunge mungekey slurmctld slurmd sinfo scontrol srun sbatch mpirun unshare; do
  command -v "$b" >/dev/null || die "$b not found"
done

# ---------------------------------------------------------------------- settings
HOST=$(hostname -s)
if [ "$NODES" = 1 ]; then NAMES=$HOST; else NAMES=$(seq -f 'nbnode%g' 1 "$NODES" | tr '\n' ' '); NAMES=${NAMES% }; fi
SETTINGS="nodes=$NODES cpus=$CPUS kill_wait=$KILL_WAIT cred_expire=$CRED_EXPIRE host=$HOST"
MARK="# written by nb scripts/slurm_up.sh; settings: $SETTINGS"

all_alive() {
  alive "$RUN/munged.pid" munged && alive "$RUN/slurmctld.pid" slurmctld || return 1
  local n
  for n in $NAMES; do alive "$RUN/slurmd-$n.pid" slurmd || return 1; done
}

wait_idle() {
  local deadline=$(( $(date +%s) + TIMEOUT )) states n_ok n
  while :; do
    alive "$RUN/slurmctld.pid" slurmctld || { logs; die "slurmctld died"; }
    for n in $NAMES; do alive "$RUN/slurmd-$n.pid" slurmd || { logs; die "slurmd $n died"; }; done
    states=$(SLURM_CONF=$CONF sinfo -h -N -o '%N %T' 2>/dev/null || true)
    n_ok=$(printf '%s\n' "$states" | awk '$2 ~ /^(idle|mixed|allocated)$/' | sort -u | wc -l)
    [ "$n_ok" -ge "$NODES" ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      printf '%s\n' "$states" >&2; logs; die "nodes not idle after ${TIMEOUT}s"
    fi
    sleep 0.3
  done
}

logs() {
  local f
  for f in "$BASE"/log/*.log "$BASE"/munge/munged.log; do
    [ -f "$f" ] || continue
    printf -- '----- tail of %s\n' "$f" >&2; tail -n 12 "$f" >&2 || true
  done
}

if [ -f "$CONF" ] && head -n 1 "$CONF" | grep -qxF "$MARK" && all_alive; then
  wait_idle
  say "already up ($SETTINGS); export SLURM_CONF=$CONF"
  exit 0
fi
if compgen -G "$RUN/*.pid" >/dev/null; then
  say "settings changed or a daemon is gone: stopping the previous cluster first"
  flock -u 8
  bash "$(dirname "$0")/slurm_down.sh" || die "slurm_down.sh failed"
  flock -w 120 8 || die "could not re-take $RUN/lock"
fi

# ---------------------------------------------------------------------- munge (own key and socket)
MUNGE_DIR=$BASE/munge
MUNGE_SOCK=$RUN/munge/munge.socket
install -d -o munge -g munge -m 0700 "$MUNGE_DIR"
install -d -o munge -g munge -m 0755 "$RUN/munge"
if [ ! -s "$MUNGE_DIR/munge.key" ]; then
  mungekey --create --keyfile="$MUNGE_DIR/munge.key"
fi
chown munge:munge "$MUNGE_DIR/munge.key"; chmod 0400 "$MUNGE_DIR/munge.key"
rm -f "$RUN/munged.pid"
runuser -u munge -- munged --socket="$MUNGE_SOCK" --key-file="$MUNGE_DIR/munge.key" \
  --pid-file="$RUN/munge/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
  --seed-file="$MUNGE_DIR/munged.seed" </dev/null >/dev/null 2>&1 8>&- \
  || { logs; die "munged did not start"; }
for _ in $(seq 50); do munge -S "$MUNGE_SOCK" -n </dev/null 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1 && break; sleep 0.1; done
munge -S "$MUNGE_SOCK" -n </dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null || { logs; die "munge credentials do not round-trip"; }
cp "$RUN/munge/munged.pid" "$RUN/munged.pid"

# ---------------------------------------------------------------------- slurm.conf
# Job ids start from the clock so that a fresh cluster never reuses the ids of an
# earlier one: nb derives run ids from SLURM_JOB_ID.
FIRST_JOB_ID=$(( ($(date +%s) % 5000000) * 10 + 1000 ))
MEM=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.8 }' /proc/meminfo)
{
  echo "$MARK"
  cat <<EOF
ClusterName=nbtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# socket: our own munged. cred_expire: how long a requeued job is held (default 120 s).
AuthInfo=socket=$MUNGE_SOCK,cred_expire=$CRED_EXPIRE
StateSaveLocation=$BASE/state
SlurmdSpoolDir=$BASE/spool/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
FirstJobId=$FIRST_JOB_ID
# No cgroups, no accounting, no systemd: works in containers.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=$KILL_WAIT
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
EOF
  i=0
  for n in $NAMES; do
    i=$((i + 1))
    echo "NodeName=$n NodeHostname=$n NodeAddr=127.0.0.1 Port=$((CTLD_PORT + i)) CPUs=$CPUS RealMemory=$((MEM / NODES)) State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$CONF.tmp"
mv "$CONF.tmp" "$CONF"

# ---------------------------------------------------------------------- /etc/hosts
# Simulated nodes must resolve (torch's c10d rendezvous connects to them by name).
# /etc/hosts may be a bind mount: rewrite it in place.
tmp=$(mktemp)
grep -vF "$HOSTS_TAG" /etc/hosts >"$tmp" || true
[ "$NODES" -gt 1 ] && echo "127.0.0.1 $NAMES $HOSTS_TAG" >>"$tmp"
cmp -s "$tmp" /etc/hosts || cat "$tmp" >/etc/hosts
rm -f "$tmp"

# ---------------------------------------------------------------------- daemons
rm -rf "${BASE:?}/state" "${BASE:?}/spool"
mkdir -p "$BASE/state"
slurmctld -f "$CONF" </dev/null >>"$BASE/log/slurmctld.out" 2>&1 8>&- || { logs; die "slurmctld did not start"; }
for _ in $(seq 100); do
  SLURM_CONF=$CONF scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1
done
SLURM_CONF=$CONF scontrol ping 2>/dev/null | grep -q 'is UP' || { logs; die "slurmctld does not answer"; }
for n in $NAMES; do
  mkdir -p "$BASE/spool/$n"
  if [ "$NODES" = 1 ]; then
    slurmd -f "$CONF" -N "$n" </dev/null >>"$BASE/log/slurmd-$n.out" 2>&1 8>&- || { logs; die "slurmd $n did not start"; }
  else
    # shellcheck disable=SC2016
    unshare --uts -- sh -c 'hostname "$1" && exec slurmd -f "$2" -N "$1"' sh "$n" "$CONF" \
      </dev/null >>"$BASE/log/slurmd-$n.out" 2>&1 8>&- || { logs; die "slurmd $n did not start"; }
  fi
done
wait_idle
say "up in $(took): nodes [$NAMES], $CPUS CPUs each, KillWait=${KILL_WAIT}s, requeue hold ${CRED_EXPIRE}s"
say "export SLURM_CONF=$CONF   (logs: $BASE/log)"
