"""``nb tui`` on the command line: what it opens, and errors before any screen."""

from __future__ import annotations

from typer.testing import CliRunner

from nbcli.app import app
from nbcli.commands.tui import _is_project


def test_project_or_run(demo_root):
    assert _is_project(demo_root, "demo")
    assert not _is_project(demo_root, "demo/demo-0000abcd")
    assert not _is_project(demo_root, "nothing")


def test_unknown_run_is_an_error_before_the_ui(demo_root):
    result = CliRunner().invoke(app, ["tui", "--root", demo_root, "nosuch"])
    assert result.exit_code == 1
    assert "no run matches 'nosuch'" in result.output
