#!/usr/bin/env bash
# test_loaded.sh - the tests marked `timing` (a browser's first start, a real terminal, an
# answer a busy machine could change: tests/tui, tests/report, timers, watch, stragglers,
# system sampling, signals...) run again beside a CPU hog: `stress-ng --cpu N` keeps every
# core busy (N = the machine's cores) for the whole run. Each such test must give the same
# answer on an idle machine (scripts/test.sh) and on this loaded one; each browser test
# starts Chromium as on a new machine (its own empty profile, home and caches).
#
# Installs stress-ng with apt-get when missing (as root); without it the run fails rather
# than passing unloaded. Arguments go to pytest. NB_VENV picks the venv (default .venv).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${NB_VENV:-.venv}
t0=$(date +%s)
bash scripts/install.sh || exit 1
if ! command -v stress-ng >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null || true
  fi
fi
if ! command -v stress-ng >/dev/null; then
  echo "test_loaded: stress-ng is not installed (apt-get install stress-ng): the loaded run cannot run" >&2
  exit 1
fi
cores=$(nproc)
stress-ng --cpu "$cores" --timeout 3h --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null' EXIT
sleep 1
kill -0 "$hog" 2>/dev/null || { echo "test_loaded: stress-ng did not start" >&2; exit 1; }
echo "test_loaded: stress-ng --cpu $cores is running (pid $hog); the timing tests again" >&2
"$venv/bin/python" -m pytest -q -m timing "$@"
rc=$?
echo "test_loaded: pytest exited $rc after $(( $(date +%s) - t0 )) s, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit "$rc"
