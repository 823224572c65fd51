"""nb show: metadata, config, sessions with hidden points, files, machines, tags, dropped."""

from __future__ import annotations

import json

from cli_helpers import TEXT, run_ranks


def show_json(cli, runs, run="ddp-00000001"):
    result = cli("show", run, "--root", str(runs), "--json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return json.loads(result.stdout)


def test_json_metadata_and_config(cli, runs):
    info = show_json(cli, runs)
    assert info["run"]["id"] == "ddp-00000001" and info["run"]["status"] == "finished"
    assert info["meta"]["launcher"] == "torchrun" and info["meta"]["run_id_source"] == "explicit"
    assert sorted(info["meta"]["hosts"]) == ["node-a"]  # the hosts rank 0 knows
    assert info["config"] == {"lr": 0.1, "model": {"layers": [64, 64]}, "note": "[bold]x[/] \x1b[2J"}


def test_json_sessions_with_hidden_points(cli, runs):
    info = show_json(cli, runs)
    s0, s1 = info["sessions"]
    assert (s0["session"], s0["first_step"], s1["session"], s1["first_step"]) == (0, 0, 1, 10)
    assert s0["host"] == "node-a" and isinstance(s0["start"], float)
    # session 0 logged steps 0-19 on every rank; 10-19 are hidden by session 1:
    # rank 0 has 2 scalars + 1 timer per step (+ the +inf at step 7, not hidden),
    # ranks 1 and 2 one timer per step.
    assert s0["hidden_points"] == 10 * 3 + 10 + 10
    assert s1["hidden_points"] == 0


def test_json_files_of_writing_ranks(cli, runs):
    files = show_json(cli, runs)["files"]
    assert [(f["rank"], f["session"]) for f in files] == [(r, s) for r in range(3) for s in range(2)]
    for f in files:
        assert f["file"] == f"events.r{f['rank']}.s{f['session']}.log"
        assert f["size_bytes"] > 0 and f["closed"] and f["end_status"] == "finished"
    assert {f["host"] for f in files if f["rank"] == 2} == {"node-b"}
    r2s0 = next(f for f in files if (f["rank"], f["session"]) == (2, 0))
    assert r2s0["hidden_points"] == 10 and r2s0["first_step"] == 0


def test_json_machines(cli, runs):
    machines = show_json(cli, runs)["machines"]
    assert sorted((m["hostname"], m["rank"]) for m in machines) == [("node-a", 0), ("node-b", 2)]
    assert all(m["system_tags"] > 0 for m in machines)


def test_json_tags_last_value_and_first_nonfinite(cli, runs):
    tags = {(t["kind"], t["tag"]): t for t in show_json(cli, runs)["tags"]}
    loss = tags["scalar", "train/loss"]
    assert loss["last_step"] == 24 and loss["last_value"] == 1 / 25 and loss["last_rank"] == 0
    assert loss["first_nonfinite"] == {"step": 5, "rank": 0, "value": "nan"}
    grad = tags["scalar", "train/grad"]
    assert grad["first_nonfinite"] == {"step": 7, "rank": 0, "value": "inf"}
    assert tags["scalar", "[bold red]x[/]"]["last_value"] == 24.0
    step = tags["timer", "step"]
    assert step["ranks"] == 3 and step["points"] == 3 * 25 and step["first_nonfinite"] is None
    text = tags["text", "samples"]
    assert text["last_text"] == "resumed" and text["points"] == 2
    assert show_json(cli, runs)["dropped"] == {}


def test_plain_sections(cli, runs):
    result = cli("show", "ddp", "--root", str(runs))  # a unique prefix
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    for title in ("# Run", "# Config", "# Sessions", "# Event logs", "# Machines", "# Tags", "# Dropped"):
        assert title in out
    assert "id\tddp-00000001" in out
    assert "nan at step 5 (rank 0)" in out
    assert "events.r2.s1.log" in out
    assert "\x1b" not in out


def test_failed_and_stale_runs(cli, runs):
    assert show_json(cli, runs, "solo-00000002")["run"]["status"] == "failed"
    stale = show_json(cli, runs, "nlp/stale-00000003")
    assert stale["run"]["status"] == "stale"
    f = stale["files"][0]
    assert f["closed"] is False  # killed: no END record


def test_path_to_run_folder(cli, runs):
    result = cli("show", str(runs / "vision" / "ddp-00000001"), "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["run"]["id"] == "ddp-00000001"


def test_text_in_tags_table_is_escaped(cli, runs):
    out = cli("show", "ddp-00000001", "--root", str(runs)).stdout
    assert TEXT not in out and "\x1b" not in out and "\u202e" not in out


def test_a_run_killed_early_shows_its_last_step_from_the_event_logs(cli, tmp_path):
    """run.json learns a session's last step at finish (or a later progress update); a
    run killed before either still has one in its event logs, and nb show reads them."""
    import subprocess
    import sys

    from cli_helpers import clean_env

    code = (
        "import os, signal, nblog as nb\n"
        f"run = nb.init('p', run_id='killed', root={str(tmp_path)!r}, system=False)\n"
        "for step in range(40):\n"
        "    run.add_scalar('loss', 1.0 / (step + 1), step=step)\n"
        "run.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", code], env=clean_env(), timeout=60)
    info = show_json(cli, tmp_path, "killed")
    assert info["run"]["last_step"] == 39
    assert [f["last_step"] for f in info["files"]] == [39]


def test_fifos_under_a_runs_file_names_never_hang_a_reader(cli, tmp_path):
    """A FIFO named run.json, events.r1.s0.log or media.r0.pack (left by a tool, or
    hostile) is skipped: nothing blocks in open() waiting for a writer."""
    import os
    import subprocess
    import sys

    from cli_helpers import clean_env

    import nblog as nb

    run = nb.init("p", run_id="fifo", root=str(tmp_path), system=False, _environ={})
    run.add_scalar("loss", 1.0, step=0)
    run.finish()
    run_dir = tmp_path / "p" / "fifo"
    (run_dir / "run.json").unlink()
    for name in ("run.json", "events.r1.s0.log", "media.r0.pack"):
        os.mkfifo(run_dir / name)
    code = (
        "import sys, nblog as nb\n"
        "r = nb.RunReader(sys.argv[1])\n"
        "print(r.config, r.ranks(), len(r.scalars(all_ranks=True)), len(r.histograms()), r.sessions(1)[0]['points'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(run_dir)], env=clean_env(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["{}", "[0,", "1]", "1", "0", "0"]
    nb_cmd = [sys.executable, "-c", "from nbcli.app import main; main()"]
    for command, code in ((["show", str(run_dir), "--json"], 0), (["timers", str(run_dir)], 0),
                          (["tail", str(run_dir), "--rank", "1"], 0)):
        done = subprocess.run(nb_cmd + command, env=clean_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == code and "Traceback" not in done.stderr, (command, done.stderr)
    assert "events.r1.s0.log: not a regular file; skipped" in done.stderr  # tail of the FIFO rank says so
    assert json.loads(subprocess.run(nb_cmd + ["show", str(run_dir), "--json"], env=clean_env(), capture_output=True,
                                     text=True, timeout=60).stdout)["media"] == []


def test_every_tag_entry_has_every_key(cli, runs):
    keys = {"kind", "tag", "ranks", "points", "last_step", "last_value", "last_text", "last_rank", "first_nonfinite"}
    tags = show_json(cli, runs)["tags"]
    assert {t["kind"] for t in tags} >= {"scalar", "timer", "text"}
    assert all(set(t) == keys for t in tags)


def test_a_copied_run_folder_is_listed_by_its_folder_name(cli, runs, tmp_path):
    """nb ls shows the id that RUN arguments resolve (the folder's), not the one inside
    a copied folder's run.json."""
    import json as _json
    import shutil

    root = tmp_path / "root"
    shutil.copytree(runs / "vision" / "ddp-00000001", root / "vision" / "copy-0000")
    rows = _json.loads(cli("ls", "--root", str(root), "--json").stdout)
    assert [(r["project"], r["id"]) for r in rows] == [("vision", "copy-0000")]
    assert cli("show", "copy-0000", "--root", str(root)).exit_code == 0


def test_a_broken_run_json_is_said_not_silent(cli, runs, tmp_path):
    import shutil

    run_dir = tmp_path / "vision" / "broken-0000"
    shutil.copytree(runs / "vision" / "ddp-00000001", run_dir)
    (run_dir / "run.json").write_text("{not json")
    result = cli("show", str(run_dir), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["run"]["status"] == "unknown"
    assert "run.json is missing or not a JSON object" in result.stderr


def test_tag_globs_select_the_tags_listed(cli, runs):
    every = show_json(cli, runs)
    result = cli("show", "ddp-00000001", "--root", str(runs), "--json", "--tag", "train/*")
    assert result.exit_code == 0 and result.stderr == ""
    info = json.loads(result.stdout)
    assert [(t["kind"], t["tag"]) for t in info["tags"]] == [("scalar", "train/grad"), ("scalar", "train/loss")]
    assert info["tags"] == [t for t in every["tags"] if t["tag"].startswith("train/")]  # same entries, fewer
    assert {k: v for k, v in info.items() if k != "tags"} == {k: v for k, v in every.items() if k != "tags"}
    result = cli("show", "ddp-00000001", "--root", str(runs), "--json", "-t", "samples", "--tag", "st?p")
    assert [(t["kind"], t["tag"]) for t in json.loads(result.stdout)["tags"]] == [("timer", "step"),
                                                                                 ("text", "samples")]
    result = cli("show", "ddp-00000001", "--root", str(runs), "--tag", "train/l*")
    assert result.exit_code == 0
    table = result.stdout.split("# Tags")[1].split("# Dropped")[0].splitlines()
    assert [row.split("\t")[1] for row in table[2:] if row] == ["train/loss"]
    result = cli("show", "ddp-00000001", "--root", str(runs), "--tag", "nope*")
    assert result.exit_code == 0 and "no tag of run ddp-00000001 matches --tag nope*" in result.stderr


def test_a_session_that_changed_the_config_is_said(cli, tmp_path):
    root = tmp_path / "runs"
    first = {"lr": 0.1, "model": {"layers": [64, 64], "act": "relu"}, "seed": 1}
    later = {"lr": 0.05, "model": {"layers": [64, 64, 64], "act": "relu"}, "batch": 32}
    run_ranks(root, {"stop": 3, "config": first}, 1, "cfg-00000001")
    run_ranks(root, {"start": 3, "stop": 6, "config": first, "resume": "auto"}, 1, "cfg-00000001")  # the same
    run_ranks(root, {"start": 6, "stop": 9, "config": later, "resume": "auto"}, 1, "cfg-00000001")
    info = show_json(cli, root, "cfg-00000001")
    assert info["config"] == first
    s0, s1, s2 = info["sessions"]
    assert (s0["config"], s0["config_changes"], s1["config"], s1["config_changes"]) == (None, [], None, [])
    assert s2["config"] == later
    assert s2["config_changes"] == [
        {"key": "batch", "change": "added", "before": None, "after": 32},
        {"key": "lr", "change": "changed", "before": 0.1, "after": 0.05},
        {"key": "model.layers", "change": "changed", "before": [64, 64], "after": [64, 64, 64]},
        {"key": "seed", "change": "removed", "before": 1, "after": None},
    ]
    result = cli("show", "cfg-00000001", "--root", str(root))
    assert result.exit_code == 0
    assert "# Config (of session 0)" in result.stdout
    assert ("session 2 changed the config (4 keys): batch added: 32; lr 0.1 -> 0.05; "
            "model.layers [64,64] -> [64,64,64]; seed removed (was 1)") in result.stdout
    assert "session 1 changed" not in result.stdout


def test_a_rank_stopped_by_sigterm_is_stopped_not_running(cli, tmp_path):
    """A session closed by SIGTERM ends with status "running" (resumable); the files table
    said STATE "running" for a process that was gone."""
    import os
    import subprocess
    import sys

    script = (
        "import os, signal, nblog as nb\n"
        f"run = nb.init('p', run_id='sig', system=False, provenance=False, _environ={{'NB_DIR': {str(tmp_path)!r}}})\n"
        "run.add_scalar('loss', 1.0, step=1)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, NB_DIR=str(tmp_path)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -15, proc.stderr
    result = cli("show", "sig", "--root", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if "events.r0.s0.log" in line)
    assert row.rstrip().endswith("stopped (SIGTERM)"), row
    files = json.loads(cli("show", "sig", "--root", str(tmp_path), "--json").stdout)["files"]
    assert files[0]["end_reason"] == "SIGTERM"


def test_a_long_config_value_is_cut_with_a_note(cli, tmp_path):
    """Issue 22: a 100,000-character config value was printed whole. The plain view keeps
    its first 500 characters and a list's first 50 items, says so under the config, and
    --json still carries every value whole."""
    root = tmp_path / "runs"
    config = {"prompt": "x" * 99_995 + "<end>", "ids": list(range(1000)), "lr": 0.1, "short": "y" * 500}
    run_ranks(root, {"stop": 2, "config": config}, 1, "long-00000001")
    result = cli("show", "long-00000001", "--root", str(root))
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert len(text) < 20_000 and "<end>" not in text
    assert f'"prompt": "{"x" * 500}… (99,500 more characters)"' in text
    assert '"… (950 more items)"' in text and "    49,\n" in text and "    50,\n" not in text
    assert f'"short": "{"y" * 500}"' in text  # 500 characters: kept whole
    assert "2 long values cut above (all of it: nb show --json, config)" in text
    assert show_json(cli, root, "long-00000001")["config"] == config
