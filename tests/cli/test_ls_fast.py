"""nb ls without Typer: the entry point answers the plain forms of ``nb ls`` itself
(Typer and the Pydantic it uses cost about 0.3 s to start) and must answer them exactly
as the Typer command does; everything else goes to Typer."""

from __future__ import annotations

import errno
import io
import json
import subprocess
import sys

import pytest
from cli_helpers import clean_env

from nbcli import _ls, _output
from nbcli.app import _fast
from nbcli.commands.ls import Status

NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
HEAVY = ["typer", "click", "pydantic", "rich", "polars", "numpy", "textual"]


def test_statuses_match_the_typer_choices():
    assert _ls.STATUSES == tuple(s.value for s in Status)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], dict(project=None, name=None, statuses=[], root=None, as_json=False)),
        (["vision", "--json"], dict(project="vision", name=None, statuses=[], root=None, as_json=True)),
        (["-p", "nlp", "--name", "d*", "--root", "/r"],
         dict(project="nlp", name="d*", statuses=[], root="/r", as_json=False)),
        (["--project=nlp", "--name=", "--root=/r", "-s", "failed", "--status=stale"],
         dict(project="nlp", name="", statuses=["failed", "stale"], root="/r", as_json=False)),
        (["--root", "/a", "--root", "/b"], dict(project=None, name=None, statuses=[], root="/b", as_json=False)),
        (["nlp", "-p", "nlp"], dict(project="nlp", name=None, statuses=[], root=None, as_json=False)),
        (["--", "odd"], dict(project="odd", name=None, statuses=[], root=None, as_json=False)),
    ],
)
def test_fast_argv_understands_the_plain_forms(argv, expected):
    assert _ls.fast_argv(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"], ["-h"], ["--bogus"], ["-pnlp"], ["-p"], ["--root"], ["a", "b"], ["--status", "sleeping"],
        ["--status", "Running"], ["vision", "--project", "nlp"], ["a/b"], [".."], ["--name", "-x"], ["-"],
        ["--json=1"], ["-s=failed"], ["--", "-x", "y"],
    ],
)
def test_fast_argv_leaves_the_rest_to_typer(argv):
    assert _ls.fast_argv(argv) is None


def test_the_fast_path_is_not_taken_for_other_commands_or_when_debugging(monkeypatch):
    assert _fast(["show", "x"]) is None
    assert _fast(["--debug", "ls"]) is None
    monkeypatch.setenv("NB_DEBUG", "1")
    assert _fast(["ls"]) is None
    monkeypatch.delenv("NB_DEBUG")
    monkeypatch.setenv("_NB_COMPLETE", "bash_complete")
    assert _fast(["ls"]) is None


def _nb(args, **env):
    return subprocess.run(NB + args, env=clean_env(**env), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args",
    [
        [], ["--json"], ["nlp"], ["nlp", "--json"], ["-p", "vision"], ["--name", "d*"], ["--status", "failed"],
        ["-s", "stale", "--status", "finished", "--json"], ["nosuchproj"], ["nosuchproj", "--json"],
        ["--name", "nothing*"],
        # not fast: Typer in both runs
        ["--status", "sleeping"], ["vision", "-p", "nlp"], ["--bogus"],
    ],
)
def test_same_output_as_typer(runs, args):
    """The same stdout, stderr and exit code as the Typer command (NB_DEBUG=1 makes
    the entry point hand every argument list to Typer)."""
    fast = _nb(["ls", *args, "--root", str(runs)])
    typer = _nb(["ls", *args, "--root", str(runs)], NB_DEBUG="1")
    assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)


def test_nb_dir_a_missing_root_and_a_terminal_the_same_as_typer(runs, tmp_path):
    for env in ({"NB_DIR": str(runs)}, {"NB_DIR": str(tmp_path / "nope")}, {},
                {"NB_DIR": str(runs), "FORCE_COLOR": "1", "COLUMNS": "120"}):  # a Rich table
        fast = subprocess.run(NB + ["ls"], env=clean_env(**env), capture_output=True, text=True, cwd=tmp_path)
        typer = subprocess.run(NB + ["ls"], env=clean_env(NB_DEBUG="1", **env), capture_output=True, text=True,
                               cwd=tmp_path)
        assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)


@pytest.mark.parametrize("args", [[], ["--json"], ["nlp"], ["--status", "failed", "--json"]])
def test_a_root_that_is_not_a_folder_the_same_as_typer(tmp_path, args):
    (tmp_path / "afile").write_text("x")
    for root in (tmp_path / "nope", tmp_path / "afile"):
        fast = _nb(["ls", *args, "--root", str(root)])
        typer = _nb(["ls", *args, "--root", str(root)], NB_DEBUG="1")
        assert fast.returncode == 1 and fast.stdout == "" and "error: no runs" in fast.stderr
        assert (fast.returncode, fast.stdout, fast.stderr) == (typer.returncode, typer.stdout, typer.stderr)


def test_nb_ls_imports_no_heavy_package(runs):
    code = (
        "import json, sys\n"
        "from nbcli.app import _fast\n"
        f"rc = _fast(['ls', '--root', {str(runs)!r}])\n"
        f"print(json.dumps([rc, sorted(m for m in {HEAVY!r} if m in sys.modules)]), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert json.loads(out.stderr.splitlines()[-1]) == [0, []], out.stderr


def test_a_closed_pipe_exits_1_quietly(runs, monkeypatch, capsys):
    class Closed(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert _fast(["ls", "--root", str(runs)]) == 1
    assert capsys.readouterr().err == ""


def test_an_unexpected_error_is_a_message_not_a_traceback(runs, monkeypatch, capsys):
    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(_ls, "run_ls", boom)
    assert _fast(["ls", "--root", str(runs)]) == 1
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: boom" in err and "Traceback" not in err


def test_records_json_is_what_json_dumps_writes():
    nasty = "q\"b\\s\n\x1b[31m\u202e\x85 é"
    rows = [{}, {"a": None, "b": True, "c": False, "d": -3, "e": 2**70, "f": 0.1, "g": 1e300, "h": float("nan"),
                 "i": float("inf"), "j": -float("inf"), nasty: nasty}]
    want = json.dumps(_output._finite(rows), indent=2, ensure_ascii=False, allow_nan=False, default=str)
    want = _output._JSON_UNSAFE.sub(_output._json_escape, want)
    assert _output.json_text(rows) == want
    assert _output._records_json([{"nested": [1]}], 2) is None  # left to json.dumps
    assert _output._records_json([{1: 2}], 2) is None
    assert _output.json_text([{"nested": {"x": 1}}]) == '[\n  {\n    "nested": {\n      "x": 1\n    }\n  }\n]'
