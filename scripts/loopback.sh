#!/usr/bin/env bash
# loopback.sh CMD [ARGS...] - run CMD where nothing it listens on can be reached from another
# machine: in a network namespace of its own whose only interface is loopback.
#
# torchrun (torch 2.13) has no bind address: its rendezvous store, and the store of a job's
# rank 0, listen on every interface (`*:<port>` in `ss -ltn`) whatever --rdzv-endpoint,
# --master-addr or --local-addr say; those only choose where processes connect. A job on one
# machine needs nothing beyond loopback, so this script takes the other interfaces away from
# CMD and every process it starts. They still share the files, the host name, the processes
# and everything but the network with the rest of the machine.
#
#   bash scripts/loopback.sh .venv/bin/torchrun --standalone --nproc-per-node 4 train.py
#
# Name lookups inside use /etc/hosts only (a private view of /etc/nsswitch.conf): no DNS
# server can be reached from there, and torch's store warns on every connection when the
# lookup of its peer fails as "temporary" instead of "not found".
#
# Needs unshare and ip (util-linux, iproute2), and root or unprivileged user namespaces.
# Where it cannot make the namespace it says so on stderr and runs CMD as it is; with
# NB_LOOPBACK=require (the tests) that is an error, exit 125. Otherwise: CMD's exit status.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: loopback.sh CMD [ARGS...]" >&2; exit 2; }

if [ "${_NB_LOOPBACK_NSS:-}" != "" ]; then   # inside the new namespaces: set up, become CMD
  nss=$_NB_LOOPBACK_NSS
  unset _NB_LOOPBACK_NSS
  # the lookup setting is a nicety (quiet logs): its failure must not stop CMD
  if [ -s "$nss" ]; then mount --bind "$nss" /etc/nsswitch.conf 2>/dev/null || true; fi
  rm -f "$nss"
  ip link set lo up
  exec "$@"
fi

if command -v unshare >/dev/null && command -v ip >/dev/null; then
  opts=(--net --mount --propagation private)
  # not root: a user namespace where we are root, as `ip` needs (files keep our own owner)
  [ "$(id -u)" = 0 ] || opts+=(--map-root-user)
  # probe first: a failed unshare or ip must not pass for CMD's own exit status
  if unshare "${opts[@]}" ip link set lo up 2>/dev/null; then
    nss=$(mktemp "${TMPDIR:-/tmp}/nb-loopback-nss.XXXXXX")
    if [ -r /etc/nsswitch.conf ]; then
      sed 's/^hosts:.*/hosts: files/' /etc/nsswitch.conf >"$nss"
    fi
    _NB_LOOPBACK_NSS=$nss exec unshare "${opts[@]}" bash "$(readlink -f "${BASH_SOURCE[0]}")" "$@"
  fi
fi
if [ "${NB_LOOPBACK:-}" = require ]; then
  echo "loopback.sh: cannot make a network namespace (unshare --net, ip) for: $*" >&2
  exit 125
fi
echo "loopback.sh: no private network namespace here (needs unshare, ip, and root or user namespaces): running as is" >&2
exec "$@"
