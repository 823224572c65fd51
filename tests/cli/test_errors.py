"""The error boundary: exit codes, error/hint lines on stderr, --debug tracebacks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_helpers import clean_env


def test_no_such_run(cli, runs):
    result = cli("show", "nothing", "--root", str(runs))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: no run matches 'nothing'")
    assert str(runs) in result.stderr
    assert "hint: " in result.stderr and "Traceback" not in result.stderr


def test_ambiguous_prefix_lists_candidates(cli, runs):
    result = cli("show", "dup-aaaa", "--root", str(runs))
    assert result.exit_code == 1 and result.stdout == ""
    assert "matches 2 runs" in result.stderr
    assert "nlp/dup-aaaa0001" in result.stderr and "nlp/dup-aaaa0002" in result.stderr
    assert "hint: " in result.stderr


@pytest.mark.parametrize("command", ["show", "tail", "timers", "export"])
def test_every_run_command_resolves_the_same_way(cli, runs, command):
    result = cli(command, "dup-aaaa", "--root", str(runs))
    assert result.exit_code == 1 and "matches 2 runs" in result.stderr
    result = cli(command, "nothing", "--root", str(runs))
    assert result.exit_code == 1 and "no run matches" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["tail", "RUN", "-n", str(2**64)],
        ["tail", "RUN", "--rank", str(2**31)],
        ["media", "RUN", "--step", str(2**63)],
        ["timers", "RUN", "--last-steps", str(2**63)],
        ["export", "RUN", "--rank", str(2**40)],
    ],
    ids=["tail-n", "tail-rank", "media-step", "timers-last-steps", "export-rank"],
)
def test_numbers_too_large_are_usage_errors_not_internal_errors(cli, runs, args):
    result = cli(*[str(runs / "vision" / "ddp-00000001") if a == "RUN" else a for a in args], "--root", str(runs))
    assert result.exit_code == 2, result.stderr
    assert "less than or equal to" in result.stderr and "internal error" not in result.stderr


def test_usage_error_exits_2(cli):
    result = cli("show")
    assert result.exit_code == 2
    assert "RUN" in result.stderr
    assert cli("nosuchcommand").exit_code == 2
    assert cli("tail", "x", "-n", "-3").exit_code == 2


def test_debug_shows_the_traceback(cli, runs):
    result = cli("--debug", "show", "nothing", "--root", str(runs))
    assert result.exit_code == 1
    assert isinstance(result.exception, LookupError)


def test_internal_errors_are_reported_without_traceback(cli, runs, monkeypatch):
    import nblog.reader

    def boom(reader, *args, **kwargs):
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(nblog.reader, "overview", boom)  # the public name nb show calls
    result = cli("show", "ddp-00000001", "--root", str(runs))
    assert result.exit_code == 1
    assert "error: internal error: ZeroDivisionError: bug" in result.stderr
    assert "--debug" in result.stderr and "Traceback" not in result.stderr


def test_version_and_help(cli):
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.startswith("nb ")
    result = cli("--help")
    assert result.exit_code == 0
    for command in ("ls", "show", "tail", "export", "timers", "resume-id", "tui"):
        assert command in result.stdout


def test_console_script_and_completion(tmp_path):
    """The installed entry point works and Typer's shell completion is available."""
    env = clean_env(NB_DIR=str(tmp_path), _NB_COMPLETE="complete_bash", COMP_WORDS="nb t", COMP_CWORD="1")
    out = subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["tail", "timers", "tui"]
    out = subprocess.run([sys.executable, "-c", "from nbcli.app import main; main()", "show", "x"],
                         env=clean_env(NB_DIR=str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith("error: ") and out.stdout == ""
