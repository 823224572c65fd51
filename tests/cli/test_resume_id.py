"""nb resume-id: exactly one id on stdout; the same id nb.init derives under Slurm and torchrun."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from cli_helpers import WRITER, clean_env, torchrun_env

UUID = "3f2b9d1e-8c4a-4e6f-9b2d-7a1c5e8f0d3b"


def init_id(env: dict, project: str = "proj", name: str = "exp") -> str:
    """The run id a real process gets from nb.init with ``env``."""
    spec = json.dumps({"project": project, "name": name, "stop": 1, "print_id": True})
    out = subprocess.run([sys.executable, str(WRITER), spec], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[0])["id"]


def resume_id(cli, *args, env=None):
    result = cli("resume-id", *args, env=env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("\n") == 1 and result.stdout.endswith("\n")
    assert result.stderr == ""
    return result.stdout[:-1]


@pytest.mark.parametrize(
    "launcher",
    [
        {"SLURM_JOB_ID": "4242", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "1"},
        {"TORCHELASTIC_RUN_ID": "myid"},
        {"TORCHELASTIC_RUN_ID": "myid", "SLURM_JOB_ID": "4242"},  # --rdzv-id wins over the allocation
        {"TORCHELASTIC_RUN_ID": UUID, "SLURM_JOB_ID": "4242"},  # torchrun's own uuid: Slurm's id wins
        {"TORCHELASTIC_RUN_ID": UUID},
    ],
    ids=["slurm", "torchrun-rdzv-id", "torchrun-in-slurm", "uuid-in-slurm", "torchrun-uuid"],
)
def test_equals_what_init_derives(cli, tmp_path, launcher):
    ranks = {} if "SLURM_PROCID" in launcher else {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
                                                       "LOCAL_WORLD_SIZE": "1"}
    env = clean_env(NB_DIR=str(tmp_path), **ranks, **launcher)
    expected = init_id(env)
    assert re.fullmatch(r"exp-[0-9a-f]{8}", expected)
    assert resume_id(cli, "proj", "--name", "exp", env=launcher) == expected


def test_explicit_job_id(cli, tmp_path):
    env = torchrun_env(0, 1, NB_DIR=str(tmp_path), SLURM_JOB_ID="777")
    assert resume_id(cli, "proj", "-n", "exp", "--job-id", "777") == init_id(env)
    # --job-id overrides the environment
    assert resume_id(cli, "proj", "-n", "exp", "--job-id", "777", env={"SLURM_JOB_ID": "1"}) == init_id(env)


def test_without_name_uses_run(cli):
    assert re.fullmatch(r"run-[0-9a-f]{8}", resume_id(cli, "proj", "--job-id", "5"))


def test_random_without_a_job_id(cli):
    a = resume_id(cli, "proj", "--name", "My Exp")
    b = resume_id(cli, "proj", "--name", "My Exp")
    assert re.fullmatch(r"my-exp-[0-9a-f]{8}", a) and a != b


def test_latest(cli, runs):
    assert resume_id(cli, "nlp", "--name", "dup", "--latest", "--root", str(runs)) in {"dup-aaaa0001",
                                                                                        "dup-aaaa0002"}
    assert resume_id(cli, "vision", "--latest", "--root", str(runs)) == "ddp-00000001"
    latest = json.loads(cli("ls", "nlp", "--root", str(runs), "--json").stdout)[0]["id"]
    assert resume_id(cli, "nlp", "--latest", "--root", str(runs)) == latest


def test_latest_finds_nothing(cli, runs):
    result = cli("resume-id", "vision", "--name", "other", "--latest", "--root", str(runs))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: no run of project 'vision' named 'other'")


def test_usage_errors(cli):
    assert cli("resume-id").exit_code == 2
    assert cli("resume-id", "../x").exit_code == 2
    assert cli("resume-id", "p", "--name", "a/b").exit_code == 2
    result = cli("resume-id", "p", "--latest", "--job-id", "3")
    assert result.exit_code == 2 and result.stdout == ""
    assert cli("resume-id", "p", "--job-id", " ").exit_code == 2
