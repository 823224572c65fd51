"""Provenance: what code ran, recorded once per session, with no secret in any file.

Real processes in a real git repository (a remote URL with credentials, an uncommitted
change), secrets planted in the environment and on the command line; every byte of
every file of the run folder is then searched for them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "prov_train.py"
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]

SECRETS = {
    "MY_API_TOKEN": "tok-7f3a9c1e-planted",
    "AWS_SECRET_ACCESS_KEY": "awsK3y-planted-0b2d",
    "AWS_DEFAULT_REGION": "region-planted-4c4c",  # every AWS_* is left out, secret or not
    "WANDB_API_KEY": "wandb-planted-91e0",
    "HF_TOKEN": "hf_planted_55aa",
    "DATABASE_URL": "postgres://dbuser:dbpw-planted-1234@dbhost/db",
    "NCCL_IB_PASSWORD": "ncclpw-planted-77",  # an allowed prefix with a secret name
    "SLURM_AUTH_INFO": "slurmauth-planted-31",
    "SLURM_COMMENT": "comment-planted-5e5e",  # sbatch --comment: free text, may hold anything
}
REMOTE_PW = "remotepw-planted-8d8d"
URL_PW = "urlpw-planted-6e6e"
ARG_PW = ("argpw-planted-a1", "argpw-planted-b2")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def dirty_repo(tmp_path: Path) -> Path:
    """A git repository holding the job, with a credentialed remote and an uncommitted change."""
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    shutil.copy(SCRIPT, repo / "train.py")
    (repo / "model.py").write_text("LAYERS = 2\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "remote", "add", "origin", f"https://alice:{REMOTE_PW}@git.example.com/team/repo.git")
    (repo / "model.py").write_text("LAYERS = 4  # uncommitted change\n")
    return repo


def run_job(repo: Path, root: Path, *args: str, env_extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "SLURM_", "TORCHELASTIC_"))}
    env.update(PYTHONPATH=str(REPO), NCCL_DEBUG="INFO", CUDA_VISIBLE_DEVICES="0,1",
               TORCH_TEST_URL=f"https://bob:{URL_PW}@files.example.com/x", **SECRETS, **(env_extra or {}))
    proc = subprocess.run([sys.executable, str(repo / "train.py"), str(root), *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def all_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_dirty_repo_is_recorded_and_no_secret_reaches_any_file(dirty_repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "runs"
    out = run_job(dirty_repo, root, "--api-token", ARG_PW[0], f"--wandb-key={ARG_PW[1]}")
    run_dir = Path(out["dir"])
    assert out["torch"] is False and out["numpy"] is False, "provenance imports neither torch nor numpy"

    files = all_bytes(run_dir)
    assert {"provenance.r0.s0.json", "provenance.r0.s0.diff", "run.json", "events.r0.s0.log"} <= set(files)
    planted = [*SECRETS.values(), REMOTE_PW, URL_PW, *ARG_PW, "dbpw-planted-1234"]
    for name, data in files.items():
        for secret in planted:
            assert secret.encode() not in data, f"{secret!r} reached {name}"

    prov = json.loads(files["provenance.r0.s0.json"])
    g = prov["git"]
    assert g["commit"] == git(dirty_repo, "rev-parse", "HEAD")
    assert g["branch"] == "main"
    assert g["remote"] == "https://git.example.com/team/repo.git"
    assert g["dirty"] is True and g["diff_truncated"] is False
    assert g["diff_file"] == "provenance.r0.s0.diff"
    diff = files["provenance.r0.s0.diff"].decode()
    assert "+LAYERS = 4  # uncommitted change" in diff and g["diff_bytes"] == len(diff.encode())
    env = prov["env"]
    assert env["NCCL_DEBUG"] == "INFO" and env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["TORCH_TEST_URL"] == "https://files.example.com/x"
    assert not set(SECRETS) & set(env)
    assert prov["argv"][1:] == [str(root), "--api-token", "<redacted>", "--wandb-key=<redacted>"]
    assert prov["executable"] == sys.executable and prov["cwd"] == str(dirty_repo)
    assert "torch" not in prov["libraries"] and "numpy" not in prov["libraries"]
    assert prov["libraries"]["nblog"] and prov["python"]["version"]
    assert prov["distributions"].get("polars")  # installed in this venv

    show = subprocess.run([*NB, "show", str(run_dir)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert show.returncode == 0, show.stderr
    assert f"code\t{g['commit'][:12]}, on main, dirty ({g['diff_bytes']} B of diff in provenance.r0.s0.diff)" in show.stdout
    assert "from https://git.example.com/team/repo.git" in show.stdout
    assert f"command\t{sys.executable} {dirty_repo / 'train.py'} {root} --api-token <redacted>" in show.stdout
    info = json.loads(subprocess.run([*NB, "show", str(run_dir), "--json"], capture_output=True, text=True,
                                     timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)}).stdout)
    (rec,) = info["provenance"]
    assert rec["git"]["commit"] == g["commit"] and rec["distributions"] == prov["distributions"]


def test_torch_versions_are_recorded_when_the_job_imported_torch(dirty_repo: Path, tmp_path: Path) -> None:
    import torch

    out = run_job(dirty_repo, tmp_path / "runs", "--import-torch")
    prov = json.loads((Path(out["dir"]) / "provenance.r0.s0.json").read_text())
    t = prov["libraries"]["torch"]
    assert t["version"] == torch.__version__ and t["cuda"] == torch.version.cuda  # None on this CPU build


def test_a_diff_over_1_mib_is_cut(dirty_repo: Path, tmp_path: Path) -> None:
    (dirty_repo / "model.py").write_text("".join(f"LINE_{i} = {i}\n" for i in range(200_000)))  # ~3 MiB
    out = run_job(dirty_repo, tmp_path / "runs")
    run_dir = Path(out["dir"])
    prov = json.loads((run_dir / "provenance.r0.s0.json").read_text())
    assert prov["git"]["diff_truncated"] is True and prov["git"]["diff_bytes"] == 1 << 20
    assert (run_dir / "provenance.r0.s0.diff").stat().st_size == 1 << 20


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_provenance_off_writes_no_file(dirty_repo: Path, tmp_path: Path, how: str) -> None:
    if how == "argument":
        out = run_job(dirty_repo, tmp_path / "runs", "--off")
    else:
        out = run_job(dirty_repo, tmp_path / "runs", env_extra={"NB_PROVENANCE": "0"})
    names = os.listdir(out["dir"])
    assert not [n for n in names if "provenance" in n], names
    assert sorted(names) == ["events.r0.s0.log", "run.json"]
