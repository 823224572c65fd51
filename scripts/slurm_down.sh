#!/usr/bin/env bash
# slurm_down.sh - stop the cluster scripts/slurm_up.sh started, and nothing else.
#
# Cancels the cluster's jobs and waits for them (at most KillWait + 20 s), then stops
# every slurmd, slurmctld and munged through the pid files slurm_up.sh left in
# /run/nb-slurm (a pid is only signalled if it still runs the expected program with
# our config or socket: never by name), and removes the simulated nodes from
# /etc/hosts. Idempotent: with nothing running it does nothing. Exits non-zero if a
# daemon survives SIGKILL. Must run as root.
set -euo pipefail

BASE=/var/lib/nb-slurm
RUN=/run/nb-slurm
CONF=$BASE/slurm.conf
HOSTS_TAG="# nb slurm_up.sh nodes"

say() { printf 'slurm_down: %s\n' "$*" >&2; }
die() { printf 'slurm_down: ERROR: %s\n' "$*" >&2; exit 1; }
case "${1:-}" in -h|--help) sed -n '2,9p' "$0" | cut -c3-; exit 0 ;; "") ;; *) die "no arguments expected" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root"
[ -d "$RUN" ] || { say "nothing to stop"; exit 0; }
exec 8>"$RUN/lock"
flock -w 120 8 || die "another slurm_up.sh/slurm_down.sh holds $RUN/lock"

# ours PIDFILE NAME PATTERN: the pid runs NAME, is not a zombie, and its command line
# contains PATTERN (our config file or munge socket): a reused pid is never ours.
ours() {
  local pid state
  [ -s "$1" ] || return 1
  pid=$(tr -dc 0-9 <"$1")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$3"
}

FAILED=0
stop() {  # stop PIDFILE NAME PATTERN
  local f=$1 pid
  [ -e "$f" ] || return 0
  if ! ours "$f" "$2" "$3"; then rm -f "$f"; return 0; fi
  pid=$(tr -dc 0-9 <"$f")
  say "stopping $2 (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do ours "$f" "$2" "$3" || break; sleep 0.1; done
  if ours "$f" "$2" "$3"; then
    say "$2 (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 30); do ours "$f" "$2" "$3" || break; sleep 0.1; done
  fi
  if ours "$f" "$2" "$3"; then say "ERROR: $2 (pid $pid) still runs"; FAILED=1; else rm -f "$f"; fi
}

# 1. Jobs first, while the controller runs, so no job outlives its slurmd.
if ours "$RUN/slurmctld.pid" slurmctld "$CONF"; then
  export SLURM_CONF=$CONF
  jobs=$(squeue -h -o '%i' 2>/dev/null | tr '\n' ' ' || true)
  if [ -n "${jobs// /}" ]; then
    kw=$(scontrol show config 2>/dev/null | awk -F= '/^KillWait/ { gsub(/[^0-9]/, "", $2); print $2 }')
    limit=$(( ${kw:-30} + 20 ))
    say "cancelling jobs $jobs(waiting up to ${limit}s)"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    for _ in $(seq $((limit * 4))); do
      [ -z "$(squeue -h -o '%i' 2>/dev/null || true)" ] && break
      sleep 0.25
    done
    left=$(squeue -h -o '%i %T' 2>/dev/null || true)
    [ -z "$left" ] || say "WARNING: jobs left: $left"
  fi
fi

# 2. Daemons: compute nodes, controller, then munge.
for f in "$RUN"/slurmd-*.pid; do [ -e "$f" ] && stop "$f" slurmd "$CONF"; done
stop "$RUN/slurmctld.pid" slurmctld "$CONF"
stop "$RUN/munged.pid" munged "$RUN/munge/munge.socket"

# 3. /etc/hosts (rewritten in place: it may be a bind mount).
if grep -qF "$HOSTS_TAG" /etc/hosts 2>/dev/null; then
  tmp=$(mktemp); grep -vF "$HOSTS_TAG" /etc/hosts >"$tmp" || true; cat "$tmp" >/etc/hosts; rm -f "$tmp"
fi
[ "$FAILED" = 0 ] || die "some daemons could not be stopped"
say "stopped"
