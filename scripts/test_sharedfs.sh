#!/usr/bin/env bash
# test_sharedfs.sh - the shared-filesystem suite: two sshfs mounts of one folder (a private
# OpenSSH server on 127.0.0.1) playing machines A and B, as tests/sharedfs/conftest.py
# describes (issue 13).
#
# Installs openssh-server, sshfs and fuse3 with apt-get when missing (root; NB_SHAREDFS_INSTALL=0
# never calls apt-get), then runs `pytest -m sharedfs tests/sharedfs`. The tests start and
# stop the server and the mounts themselves. Once the packages are there and /dev/fuse
# exists, NB_REQUIRE_SHAREDFS=1 makes a test that cannot mount fail instead of skipping;
# otherwise the tests are skipped with a banner saying why. Arguments go to pytest.
# NB_VENV picks the venv (default .venv), made ready by scripts/install.sh first.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${NB_VENV:-.venv}
t0=$(date +%s)
bash scripts/install.sh || exit 1

banner() {
  printf '%s\n' "################################################################################" \
    "# $*" "################################################################################" >&2
}

pkgs=(openssh-server sshfs fuse3)
missing=()
for p in "${pkgs[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
ready=1
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || [ "${NB_SHAREDFS_INSTALL:-1}" != 1 ] || ! command -v apt-get >/dev/null; then
    banner "SHARED-FS SUITE: ${missing[*]} missing and not installable here: the tests will be SKIPPED"
    ready=0
  else
    log=$(mktemp /tmp/nb-sharedfs-apt.XXXXXX)
    # Keep the packages' maintainer scripts from starting the stock sshd.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
      own_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    ok=1
    if ! apt-cache show sshfs >/dev/null 2>&1; then
      apt-get update -qq >"$log" 2>&1 || ok=0
    fi
    [ "$ok" = 1 ] && { apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || ok=0; }
    [ "$own_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    if [ "$ok" != 1 ]; then
      tail -n 20 "$log" >&2
      banner "SHARED-FS SUITE: apt-get install ${missing[*]} FAILED: the tests will be SKIPPED"
      ready=0
    fi
  fi
fi
if [ "$ready" = 1 ] && [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
  export NB_REQUIRE_SHAREDFS=1   # everything is there: a test that cannot mount fails
elif [ "$ready" = 1 ]; then
  banner "SHARED-FS SUITE: not root or no /dev/fuse: the tests will be SKIPPED"
fi

"$venv/bin/python" -m pytest -q -p no:cacheprovider -m sharedfs tests/sharedfs "$@"
rc=$?
echo "test_sharedfs: pytest exited $rc after $(( $(date +%s) - t0 )) s" >&2
exit "$rc"
