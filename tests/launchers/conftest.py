"""The launcher suite: nb under the real torchrun, mpirun and Slurm (issue 7).

Every test here is marked ``launchers`` and is left out of a plain ``pytest`` run
(deselected, with a note in the summary). ``bash scripts/test_launchers.sh`` runs it
(``.ci/run`` does): it starts the cluster, runs ``pytest -m launchers tests/launchers`` and
stops the cluster. By hand::

    bash scripts/slurm_up.sh                       # a private 2-node cluster (root)
    pytest -m launchers tests/launchers
    bash scripts/slurm_down.sh

Tests that need Slurm use the ``slurm`` fixture: when the cluster of
``scripts/slurm_up.sh`` does not answer, they are skipped with a loud reason and a
banner at the end of the run (``NB_REQUIRE_SLURM=1`` turns that into a failure).
torchrun and mpirun tests need no daemon.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from launchkit import DROP, DROP_PREFIXES, SLURM_CONF, VENV_BIN, slurm_status

_missing: list[str] = []


def pytest_collection_modifyitems(config, items):
    """Leave the launcher tests out unless ``-m`` names them (``-m launchers``)."""
    if "launchers" in (config.option.markexpr or ""):
        return
    ours = [i for i in items if i.get_closest_marker("launchers")]
    if ours:
        items[:] = [i for i in items if not i.get_closest_marker("launchers")]
        config.hook.pytest_deselected(items=ours)
        config._nb_launchers_deselected = len(ours)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = getattr(config, "_nb_launchers_deselected", 0)
    if n:
        terminalreporter.write_line(
            f"note: {n} launcher tests deselected; run them with `bash scripts/test_launchers.sh` "
            "(starts and stops the Slurm cluster; or `-m launchers` with it up)"
        )
    if _missing:
        bar = "!" * 78
        terminalreporter.write_line(bar, red=True, bold=True)
        terminalreporter.write_line("LAUNCHER TESTS NOT RUN (skipped):", red=True, bold=True)
        for line in _missing:
            terminalreporter.write_line(f"  {line}", red=True)
        terminalreporter.write_line(bar, red=True, bold=True)


def _unavailable(msg: str):
    """Skip (fail with NB_REQUIRE_SLURM=1: the cluster and its packages should be there),
    and remember it for the banner at the end."""
    if os.environ.get("NB_REQUIRE_SLURM") == "1":
        pytest.fail(msg)
    if msg not in _missing:
        _missing.append(msg)
    pytest.skip(msg)


@pytest.fixture
def env(tmp_path) -> dict:
    """A clean environment for launched jobs: no launcher variables from outside, the
    venv first on PATH, runs under ``tmp_path/runs``, system metrics every 0.2 s."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(DROP_PREFIXES) and k not in DROP}
    e.update(
        PATH=f"{VENV_BIN}:{e.get('PATH', '/usr/bin:/bin')}",
        NB_DIR=str(tmp_path / "runs"),
        NB_SYSTEM_INTERVAL="0.2",
        NB_WAIT_S="60",
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
        SLURM_CONF=SLURM_CONF,
    )
    return e


@pytest.fixture(scope="session")
def slurm() -> dict:
    """The cluster of scripts/slurm_up.sh: {"nodes": [names]}. Skips loudly if it is
    down (fails instead with NB_REQUIRE_SLURM=1)."""
    why = slurm_status()
    if why is not None:
        _unavailable(f"SLURM CLUSTER NOT UP: {why}")
    e = dict(os.environ, SLURM_CONF=SLURM_CONF)
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], env=e, capture_output=True,
                           text=True, check=True).stdout.split()
    return {"nodes": sorted(set(nodes))}


@pytest.fixture
def two_nodes(slurm) -> list[str]:
    if len(slurm["nodes"]) < 2:
        _unavailable(f"ONE SLURM NODE {slurm['nodes']}: start it with scripts/slurm_up.sh --nodes 2")
    return slurm["nodes"][:2]


@pytest.fixture(scope="session")
def openmpi() -> None:
    """Open MPI's mpirun (scripts/slurm_up.sh installs openmpi-bin)."""
    if not shutil.which("mpirun"):
        _unavailable("OPEN MPI NOT INSTALLED: no mpirun on PATH (apt-get install openmpi-bin)")
