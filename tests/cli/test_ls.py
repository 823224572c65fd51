"""nb ls: listing, filters, statuses (running/finished/failed/stale), --json."""

from __future__ import annotations

import json


def rows(result):
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_json_lists_every_run_newest_first(cli, runs):
    r = rows(cli("ls", "--root", str(runs), "--json"))
    ids = {x["id"] for x in r}
    assert ids == {"ddp-00000001", "solo-00000002", "dup-aaaa0001", "dup-aaaa0002", "stale-00000003"}
    started = [x["started"] for x in r]
    assert started == sorted(started, reverse=True)
    ddp = next(x for x in r if x["id"] == "ddp-00000001")
    assert ddp["project"] == "vision" and ddp["name"] == "ddp"
    assert ddp["status"] == "finished"
    assert ddp["ranks"] == 3 and ddp["world_size"] == 3 and ddp["sessions"] == 2
    assert ddp["last_step"] == 24
    assert ddp["duration_s"] > 0 and ddp["size_bytes"] > 0
    assert set(ddp) >= {"id", "project", "name", "status", "ranks", "sessions", "last_step", "started",
                        "duration_s", "path"}


def test_statuses(cli, runs):
    status = {x["id"]: x["status"] for x in rows(cli("ls", "--root", str(runs), "--json"))}
    assert status["solo-00000002"] == "failed"
    assert status["stale-00000003"] == "stale"
    assert status["dup-aaaa0001"] == "finished"


def test_filters(cli, runs):
    root = str(runs)
    assert {x["id"] for x in rows(cli("ls", "vision", "--root", root, "--json"))} == {"ddp-00000001"}
    assert {x["project"] for x in rows(cli("ls", "--project", "nlp", "--root", root, "--json"))} == {"nlp"}
    assert {x["id"] for x in rows(cli("ls", "-p", "nlp", "--name", "d*", "--root", root, "--json"))} == {
        "dup-aaaa0001", "dup-aaaa0002"}
    got = rows(cli("ls", "--status", "failed", "--status", "stale", "--root", root, "--json"))
    assert {x["id"] for x in got} == {"solo-00000002", "stale-00000003"}
    assert rows(cli("ls", "--name", "nothing*", "--root", root, "--json")) == []


def test_nb_dir_is_the_default_root(cli, runs):
    r = rows(cli("ls", "--json", env={"NB_DIR": str(runs)}))
    assert len(r) == 5


def test_plain_table_when_piped(cli, runs):
    result = cli("ls", "--root", str(runs))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split("\t") == ["ID", "PROJECT", "NAME", "STATUS", "RANKS", "SESSIONS", "LAST STEP",
                                    "STARTED", "DURATION"]
    ddp = next(line.split("\t") for line in lines if line.startswith("ddp-"))
    assert ddp[:7] == ["ddp-00000001", "vision", "ddp", "finished", "3", "2", "24"]
    assert "\x1b" not in result.stdout
    assert result.stderr == ""


def test_rich_table_on_a_terminal(cli, runs):
    result = cli("ls", "--root", str(runs), env={"FORCE_COLOR": "1"})
    assert result.exit_code == 0
    assert "\t" not in result.stdout and "ddp-00000001" in result.stdout
    assert "\x1b[" in result.stdout  # styled


def test_no_color_on_a_terminal(cli, runs):
    result = cli("ls", "--root", str(runs), env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert result.exit_code == 0
    assert "\x1b[3" not in result.stdout  # no colour codes (bold may remain)
    assert "ddp-00000001" in result.stdout


def test_a_root_that_is_not_a_folder_is_an_error(cli, tmp_path):
    (tmp_path / "afile").write_text("x")
    for root, why in ((tmp_path / "nope", "nope does not exist"), (tmp_path / "afile", "afile is not a folder")):
        for extra in ([], ["--json"], ["--status", "running"], ["--name", "x*"]):
            result = cli("ls", "--root", str(root), *extra)
            assert result.exit_code == 1, (root, extra)
            assert result.stdout == ""  # no header, no []
            assert f"error: no runs: {root}" in result.stderr and why in result.stderr
            assert "pass --root DIR or set NB_DIR" in result.stderr


def test_usage_errors_exit_2(cli, runs):
    assert cli("ls", "--status", "sleeping", "--root", str(runs)).exit_code == 2
    result = cli("ls", "vision", "--project", "nlp", "--root", str(runs))
    assert result.exit_code == 2
    assert result.stdout == ""
    assert cli("ls", "--bogus").exit_code == 2


def test_a_project_without_runs_is_an_error_naming_the_projects(cli, runs):
    for args in (["nosuchproj"], ["-p", "nosuchproj"], ["--project", "nosuchproj", "--status", "failed"]):
        result = cli("ls", *args, "--root", str(runs))
        assert result.exit_code == 1, args
        assert result.stdout == ""  # no empty table
        assert f"no runs of project 'nosuchproj' under {runs}" in result.stderr
        assert "projects there: nlp, vision" in result.stderr


def test_a_project_without_runs_with_json_is_an_empty_list(cli, runs):
    result = cli("ls", "nosuchproj", "--root", str(runs), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == []


def test_a_project_without_runs_under_a_missing_root(cli, tmp_path):
    result = cli("ls", "nosuchproj", "--root", str(tmp_path / "nope"))
    assert result.exit_code == 1 and result.stdout == ""
    assert "does not exist" in result.stderr


def test_a_project_whose_filters_match_nothing_is_not_an_error(cli, runs):
    result = cli("ls", "vision", "--status", "failed", "--root", str(runs))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0].startswith("ID\tPROJECT")
    assert "no runs match" in result.stderr


def test_many_projects_are_not_all_listed(cli, tmp_path):
    for i in range(20):
        (tmp_path / f"proj{i:02d}").mkdir()
    result = cli("ls", "proj1", "--root", str(tmp_path))
    assert result.exit_code == 1
    assert "20 projects there" in result.stderr and "proj07" not in result.stderr
    assert "did you mean" in result.stderr


def test_a_running_runs_last_step_says_how_old_it_is(cli, runs, tmp_path):
    """A running run's last step comes from run.json (nb ls reads nothing else), with
    its age: when rank 0 recorded it there; --json gives that time, unix seconds."""
    import re
    import time

    from cli_helpers import start, torchrun_env

    root = tmp_path / "runs"
    writer = start({"stop": 100_000, "sleep": 0.01}, torchrun_env(0, 1, NB_DIR=str(root), NB_RUN_ID="live-00000001"))
    try:
        meta = root / "proj" / "live-00000001" / "run.json"
        deadline = time.monotonic() + 60
        entry: dict = {}
        while not (isinstance(entry.get("last_step"), int) and entry.get("updated")):
            assert time.monotonic() < deadline and writer.poll() is None, "no progress in run.json"
            time.sleep(0.02)
            try:
                entry = json.loads(meta.read_text())["sessions"][-1]
            except (OSError, ValueError):
                entry = {}
        row = rows(cli("ls", "--root", str(root), "--json"))[0]
        assert row["status"] == "running" and isinstance(row["last_step"], int)
        assert isinstance(row["last_step_updated"], float) and abs(row["last_step_updated"] - time.time()) < 60
        result = cli("ls", "--root", str(root))
        assert result.exit_code == 0
        cell = result.stdout.splitlines()[1].split("\t")[6]
        assert re.fullmatch(r"\d+ \((\d+(\.\d)?s|\dm\d\ds) ago\)", cell), cell
        result = cli("show", "live-00000001", "--root", str(root))
        assert re.search(r"^last step\t\d+ \(\d+(\.\d)?s ago\)$", result.stdout, re.M), result.stdout
    finally:
        writer.kill()
        writer.communicate(timeout=60)
    # a run that ended shows its last step alone
    ddp = rows(cli("ls", "--root", str(runs), "--json"))
    ddp = next(x for x in ddp if x["id"] == "ddp-00000001")
    assert isinstance(ddp["last_step_updated"], float)
    table = cli("ls", "vision", "--root", str(runs)).stdout.splitlines()
    assert table[1].split("\t")[6] == "24"


def test_status_option_selects_preempted_runs(cli, tmp_path):
    """A run whose last session ended by SIGTERM is 'preempted'; -s preempted was refused
    on both the fast and the Typer path although nb ls shows that status."""
    import os
    import subprocess
    import sys

    script = ("import os, signal, sys, nblog as nb\n"
              "run = nb.init('p', run_id='term-00000001', root=sys.argv[1], system=False, provenance=False)\n"
              "run.add_scalar('x', 1.0, step=3)\n"
              "os.kill(os.getpid(), signal.SIGTERM)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NB_", "RANK", "SLURM", "OMPI", "TORCHELASTIC"))}
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, timeout=60, capture_output=True)
    assert proc.returncode == -15, proc.stderr
    r = rows(cli("ls", "--root", str(tmp_path), "--json", "-s", "preempted"))
    assert [(x["id"], x["status"]) for x in r] == [("term-00000001", "preempted")]
    from nbcli._ls import fast_argv  # the fast path takes the same choices

    assert fast_argv(["-s", "preempted"])["statuses"] == ["preempted"]
    assert rows(cli("ls", "--root", str(tmp_path), "--json", "-s", "running")) == []
