"""Logged data is never interpreted: no Rich markup, no raw control characters, on a pipe
or a terminal; JSON stays exact and valid."""

from __future__ import annotations

import json

import pytest
from cli_helpers import TEXT, run_ranks

TERMINAL = {"FORCE_COLOR": "1", "NO_COLOR": "1"}
RAW = ["\x1b[31m", "\x1b[2J", "\u202e"]


@pytest.mark.parametrize("env", [{}, TERMINAL], ids=["pipe", "terminal"])
def test_show(cli, runs, env):
    result = cli("show", "ddp-00000001", "--root", str(runs), env=env)
    assert result.exit_code == 0
    out = result.stdout
    assert "[bold red]x[/]" in out  # a tag that looks like markup prints as it is
    assert "[bold]x[/] \\u001b[2J" in out  # the config value (JSON): markup literal, ESC escaped
    for raw in RAW:
        assert raw not in out


@pytest.mark.parametrize("env", [{}, TERMINAL], ids=["pipe", "terminal"])
def test_tail_text(cli, runs, env):
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--tag", "samples", "-n", "5", env=env)
    assert result.exit_code == 0
    assert "hello \\x1b[31mred\\x1b[0m \\u202eevil" in result.stdout
    for raw in RAW:
        assert raw not in result.stdout


@pytest.mark.parametrize("env", [{}, TERMINAL], ids=["pipe", "terminal"])
def test_tail_markup_tag(cli, runs, env):
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--tag", "[[]*", "-n", "1", env=env)
    assert result.exit_code == 0 and "[bold red]x[/]" in result.stdout


def test_names_in_ls_and_timers(cli, tmp_path):
    root = tmp_path / "runs"
    run_ranks(root, {"project": "[red]p", "name": "[blink]n", "stop": 2}, 1, "odd-00000001")
    for env in ({}, TERMINAL):
        result = cli("ls", "--root", str(root), env=env)
        assert result.exit_code == 0
        assert "[red]p" in result.stdout and "[blink]n" in result.stdout
        result = cli("timers", "odd-00000001", "--root", str(root), env=env)
        assert result.exit_code == 0


def test_json_is_exact_and_safe(cli, runs):
    result = cli("show", "ddp-00000001", "--root", str(runs), "--json")
    for raw in RAW:
        assert raw not in result.stdout  # \u001b, \u202e escapes instead
    info = json.loads(result.stdout)
    assert {t["tag"] for t in info["tags"]} >= {"[bold red]x[/]", "samples"}
    text = next(t for t in info["tags"] if t["tag"] == "samples")
    assert text["last_text"] == "resumed"
    result = cli("tail", "ddp-00000001", "--root", str(runs), "--tag", "samples", "--json", "-n", "5")
    assert "\u202e" not in result.stdout and "\x1b" not in result.stdout
    assert json.loads(result.stdout.splitlines()[0])["text"] == TEXT


def test_error_messages_escape_the_query(cli, runs):
    result = cli("show", "\x1b[2Jgone\u202e", "--root", str(runs))
    assert result.exit_code == 1
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "\\x1b[2Jgone\\u202e" in result.stderr
