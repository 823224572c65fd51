#!/usr/bin/env bash
# test_launchers.sh - the launcher suite: nb under the real torchrun, Open MPI and Slurm.
#
# Starts the private Slurm cluster (scripts/slurm_up.sh, 2 simulated nodes; installs
# munge, Slurm and Open MPI with apt when missing), runs `pytest -m launchers
# tests/launchers`, and stops the cluster afterwards whatever happened (trap). If the
# cluster cannot start (not root, no apt, daemons refused), it says so loudly: the
# Slurm tests are skipped with a banner, the torchrun and Open MPI tests still run.
# Arguments go to pytest. NB_VENV picks the venv (default .venv), made ready by
# scripts/install.sh first.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${NB_VENV:-.venv}
t0=$(date +%s)
bash scripts/install.sh || exit 1   # the venv, as scripts/test.sh makes it (quick when ready)

banner() {
  printf '%s\n' "################################################################################" \
    "# $*" "################################################################################" >&2
}

if [ "$(id -u)" != 0 ]; then
  banner "LAUNCHER SUITE: not root, cannot start Slurm: the Slurm tests will be SKIPPED"
elif bash scripts/slurm_up.sh; then
  trap 'bash scripts/slurm_down.sh' EXIT
  export NB_REQUIRE_SLURM=1      # the cluster is up: a Slurm test that cannot reach it fails
else
  banner "LAUNCHER SUITE: scripts/slurm_up.sh FAILED: the Slurm tests will be SKIPPED"
  bash scripts/slurm_down.sh || true
fi

"$venv/bin/python" -m pytest -q -m launchers tests/launchers "$@"
rc=$?
echo "test_launchers: pytest exited $rc after $(( $(date +%s) - t0 )) s (cluster start included)" >&2
exit "$rc"
