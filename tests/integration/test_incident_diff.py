"""``nb diff`` compares what code ran: rank 0's provenance of each run (commit, dirty
state and uncommitted diff, command line, Python and key libraries, the installed
distributions that differ), real runs in a real git repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _gapkit import REPO, TIMEOUT_S, nb_cli
from _nbproc import base_env


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def fake_dist(where: Path, version: str) -> Path:
    """A folder holding an installed distribution ``nbfakepkg`` of ``version``."""
    info = where / f"nbfakepkg-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nbfakepkg\nVersion: {version}\n")
    return where


def prov_run(repo: Path, root: Path, rid: str, *args: str, path: Path | None = None) -> None:
    env = base_env(NB_PROVENANCE="1", NB_RUN_ID=rid, NB_DIR=str(root))
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(path)])
    proc = subprocess.run([sys.executable, str(repo / "train.py"), str(root), *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def code_runs(tmp_path: Path) -> tuple[Path, str, str, str]:
    """Three runs of one script: A clean at commit 1 with nbfakepkg 1.0; B at commit 2
    with an uncommitted change, nbfakepkg 2.0 and another argument; C as A, again."""
    repo, root = tmp_path / "code", tmp_path / "runs"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    shutil.copy(REPO / "tests" / "integration" / "_scripts" / "prov_train.py", repo / "train.py")
    (repo / "model.py").write_text("LAYERS = 2\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    v1, v2 = fake_dist(tmp_path / "site1", "1.0"), fake_dist(tmp_path / "site2", "2.0")
    prov_run(repo, root, "a-00000001", "--lr", "0.1", path=v1)
    prov_run(repo, root, "c-00000003", "--lr", "0.1", path=v1)
    (repo / "model.py").write_text("LAYERS = 3\n")
    git(repo, "commit", "-q", "-am", "second")
    (repo / "model.py").write_text("LAYERS = 4  # not committed\n")
    prov_run(repo, root, "b-00000002", "--lr", "0.2", path=v2)
    return root, "a-00000001", "b-00000002", "c-00000003"


def test_diff_compares_what_code_ran(code_runs) -> None:
    root, a, b, c = code_runs
    proc = nb_cli("diff", a, b, "--json", "--exit-code", root=root)
    assert proc.returncode == 1, proc.stderr
    code = {e["field"]: e for e in json.loads(proc.stdout)["code"]["fields"]}
    commit = code["commit"]
    assert commit["differs"] and commit["counted"] and len({len(v) for v in commit["values"]}) == 1
    assert code["dirty"]["values"] == [False, True] and code["dirty"]["counted"]
    assert code["branch"]["values"] == ["main", "main"] and not code["branch"]["differs"]
    assert code["command"]["differs"] and not code["command"]["counted"]
    assert code["command"]["values"][0].endswith("train.py " + str(root) + " --lr 0.1")
    assert code["python"]["values"][0] == code["python"]["values"][1]
    packages = json.loads(proc.stdout)["code"]["packages"]
    assert packages == [{"name": "nbfakepkg", "versions": ["1.0", "2.0"]}], packages

    text = nb_cli("diff", a, b, root=root)
    assert text.returncode == 0, text.stderr
    assert re.search(r"^commit\t\*\t[0-9a-f]{12}\t[0-9a-f]{12}$", text.stdout, re.M), text.stdout
    assert re.search(r"^dirty\t\*\tno\tyes$", text.stdout, re.M), text.stdout
    assert re.search(r"^uncommitted diff\t\*\t-?\t\d+ B, sha256 [0-9a-f]{12}$", text.stdout, re.M), text.stdout
    assert re.search(r"^nbfakepkg\t1\.0\t2\.0$", text.stdout, re.M), text.stdout

    same = nb_cli("diff", a, c, "--json", "--exit-code", root=root)
    info = json.loads(same.stdout)
    assert not any(e["differs"] and e["counted"] for e in info["code"]["fields"]), info["code"]
    assert info["code"]["packages"] == []
