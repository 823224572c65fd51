"""man/: a page per command that lists every option of the Typer command tree; groff is
happy with every page."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import typer.main

from nbcli.app import app

MAN = Path(__file__).resolve().parents[2] / "man"
ROOT = typer.main.get_command(app)
COMMANDS = sorted(ROOT.commands)


def text_of(page: Path) -> str:
    """The page's words: font escapes dropped, ``\\-`` as ``-``."""
    raw = page.read_text()
    return re.sub(r"\\f[BIRP]|\\f\(..|\\\(em", "", raw).replace("\\-", "-").replace("\\e", "\\")


def names(command) -> list[str]:
    out = []
    for p in command.params:
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "option":
            out += list(p.opts) + list(p.secondary_opts)
        else:
            out.append((p.metavar or p.name.upper()).strip("[]").split("|")[0])
    return out


def test_the_tree_is_what_the_pages_cover():
    assert {"ls", "show", "tail", "export", "timers", "resume-id", "tui"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_page_lists_every_option(command):
    page = MAN / f"nb-{command}.1"
    assert page.exists(), f"man/nb-{command}.1 is missing"
    text = text_of(page)
    missing = [n for n in names(ROOT.commands[command]) if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
    assert not missing, f"nb-{command}.1 does not mention {missing}"
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "EXAMPLES"):
        assert f".SH {section}" in page.read_text(), f"nb-{command}.1 has no {section} section"


def test_nb_page_lists_global_options_and_every_command():
    text = text_of(MAN / "nb.1")
    for n in names(ROOT) + ["--help", "-h"]:
        assert n in text, n
    for command in COMMANDS:
        assert f"nb-{command}" in text, command


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
@pytest.mark.parametrize("page", sorted(p.name for p in MAN.glob("*.[0-9]")))
def test_groff_has_no_warnings(page):
    out = subprocess.run(["groff", "-man", "-ww", "-z", str(MAN / page)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
