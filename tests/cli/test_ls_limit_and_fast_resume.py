"""Issue 18 (a root of 20,000 runs): ``nb ls`` on a terminal shows the newest runs and
says how many it left out (``--limit``); piped output and ``--json`` carry every run;
``nb resume-id PROJECT --latest`` is answered without Typer, with the same id and the
same errors as the Typer command."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from cli_helpers import clean_env

import nblog as nb
from nbcli import _ls, _output, _resume

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
HEAVY = ["typer", "click", "pydantic", "rich", "polars", "numpy", "textual"]


def _nb(args, **env):
    return subprocess.run(NB + args, env=clean_env(**env), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A root of 60 runs of project ``p``, each started a second after the previous one."""
    root = tmp_path_factory.mktemp("many") / "runs"
    for i in range(60):
        run = nb.init("p", run_id=f"r{i:02d}-00000000", root=root, system=False, provenance=False, _environ={})
        run.finish()
    for i, d in enumerate(sorted((root / "p").iterdir())):
        meta = json.loads((d / "run.json").read_text())
        meta["created"] = 1.7e9 + i
        (d / "run.json").write_text(json.dumps(meta))
    return root


def _ids(stdout: str) -> list[str]:
    return [line.split()[0] for line in stdout.splitlines()[1:] if line.strip()]


def test_a_terminal_shows_the_newest_runs_and_says_how_many_are_left_out(many):
    term = _nb(["ls", "--root", str(many)], FORCE_COLOR="1", COLUMNS="200")
    assert term.returncode == 0
    shown = [f"r{i:02d}-00000000" for i in range(59, 59 - _ls.TERMINAL_LIMIT, -1)]
    for rid in shown:
        assert rid in term.stdout
    assert "r09-00000000" not in term.stdout
    assert f"the newest {_ls.TERMINAL_LIMIT} of 60 runs shown" in term.stderr and "--limit 0" in term.stderr
    every = _nb(["ls", "--root", str(many), "--limit", "0"], FORCE_COLOR="1", COLUMNS="200")
    assert "r00-00000000" in every.stdout and "shown" not in every.stderr
    # the same words through Typer
    typer = _nb(["ls", "--root", str(many)], FORCE_COLOR="1", COLUMNS="200", NB_DEBUG="1")
    assert (typer.returncode, typer.stdout, typer.stderr) == (term.returncode, term.stdout, term.stderr)


def test_piped_output_and_json_carry_every_run_unless_limited(many):
    piped = _nb(["ls", "--root", str(many)])
    assert len(_ids(piped.stdout)) == 60 and piped.stderr == ""
    assert len(json.loads(_nb(["ls", "--root", str(many), "--json", "-n", "3"]).stdout)) == 60
    for args in (["-n", "3"], ["--limit=3"]):
        for debug in ("", "1"):
            few = _nb(["ls", "--root", str(many), *args], NB_DEBUG=debug)
            assert _ids(few.stdout) == ["r59-00000000", "r58-00000000", "r57-00000000"]
            assert "the newest 3 of 60 runs shown" in few.stderr
    oldest = _nb(["ls", "--root", str(many), "--desc", "-n", "2"])
    assert _ids(oldest.stdout) == ["r00-00000000", "r01-00000000"] and "the oldest 2 of 60" in oldest.stderr
    query = _nb(["ls", "--root", str(many), "--sort", "started", "-n", "2"])
    assert _ids(query.stdout) == ["r00-00000000", "r01-00000000"] and "the first 2 of 60" in query.stderr


@pytest.mark.parametrize("bad", [["--limit", "x"], ["--limit", "-1"], ["-n"]])
def test_a_bad_limit_is_a_usage_error(many, bad):
    assert _ls.fast_argv(bad) is None  # left to Typer, which says why
    out = _nb(["ls", "--root", str(many), *bad])
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr


def test_the_plain_table_is_what_output_table_writes(monkeypatch):
    nasty = "a\tb\x1b[31m\u202e"
    rows = [{"id": "x-1", "project": nasty, "name": None, "status": "running", "ranks": 3, "sessions": 2,
             "last_step": 7, "last_step_updated": 99.0, "started": 1.7e9, "duration_s": 75.2},
            {"id": nasty, "project": "p", "name": nasty, "status": "stale", "ranks": 0, "sessions": 0,
             "last_step": None, "last_step_updated": None, "started": None, "duration_s": 0.4}]
    texts = []
    for write in (lambda: _ls._plain_table(rows, 100.0),
                  lambda: _output.Output().table(_ls._COLUMNS, (_ls._default_cells(r, 100.0) for r in rows))):
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        write()
        texts.append(sys.stdout.getvalue())
    assert texts[0] == texts[1] and "\\x1b" in texts[0]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["p", "--latest"], {"project": "p", "name": None, "root": None}),
        (["--latest", "-n", "exp", "p", "--root", "/r"], {"project": "p", "name": "exp", "root": "/r"}),
        (["--name=exp", "--root=/r", "--latest", "--", "p"], {"project": "p", "name": "exp", "root": "/r"}),
    ],
)
def test_resume_fast_argv_understands_latest(argv, expected):
    assert _resume.fast_argv(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [["p"], ["p", "--job-id", "3", "--latest"], ["--latest"], ["a", "b", "--latest"], ["../x", "--latest"],
     ["p", "--name", "a/b", "--latest"], ["p", "--latest", "--help"], ["p", "--latest", "-n"],
     ["p", "--latest", "-nexp"]],
)
def test_resume_fast_argv_leaves_the_rest_to_typer(argv):
    assert _resume.fast_argv(argv) is None


def test_resume_latest_imports_no_heavy_package_and_answers_as_typer(runs):
    code = (
        "import json, sys\n"
        "from nbcli.app import _fast\n"
        f"rc = _fast(['resume-id', 'nlp', '--latest', '--root', {str(runs)!r}])\n"
        f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert json.loads(out.stderr.splitlines()[-1]) == [0, []], out.stderr
    latest = json.loads(_nb(["ls", "nlp", "--root", str(runs), "--json"]).stdout)[0]["id"]
    assert out.stdout == latest + "\n"
    for args in (["nlp", "--latest"], ["nlp", "-n", "dup", "--latest"], ["vision", "--name", "none", "--latest"],
                 ["nosuch", "--latest"], ["nlp", "--latest", "--job-id", "4"]):
        fast = _nb(["resume-id", *args, "--root", str(runs)])
        typer = _nb(["resume-id", *args, "--root", str(runs)], NB_DEBUG="1")
        assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert _nb(["resume-id", "nosuch", "--latest", "--root", str(runs)]).returncode == 1
