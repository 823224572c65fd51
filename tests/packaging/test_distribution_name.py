"""The distribution is ``nblog``: ``nb`` on PyPI is an unrelated project, so no page,
script or message may tell a user to ``pip install nb``."""

from __future__ import annotations

import re
from pathlib import Path

from nbcli._errors import _hint
from nblog import FormatVersionError

REPO = Path(__file__).resolve().parents[2]
WRONG = re.compile(r"pip3? install(?: +-\S+)* +['\"]?nb(?![\w-])")


def test_the_format_version_hint_names_the_nblog_distribution():
    _message, _details, hint = _hint(FormatVersionError("/r/events.r0.s0.nbl", 9, 1))
    assert "pip install -U nblog" in hint and not WRONG.search(hint)


def test_nothing_tells_a_user_to_pip_install_nb():
    files = [REPO / "README.md", *(REPO / "man").iterdir(), *(REPO / "docs").rglob("*.md"),
             *(REPO / "scripts").iterdir(), *(REPO / "nblog").rglob("*.py"), *(REPO / "nbcli").rglob("*.py")]
    found = [f"{f.relative_to(REPO)}: {m.group(0)}" for f in files if f.is_file()
             for m in WRONG.finditer(f.read_text(errors="replace"))]
    assert not found, found
    assert WRONG.search("pip install -U nb") and WRONG.search("pip install nb[dev]")
    assert not WRONG.search("pip install nblog") and not WRONG.search("pip install -U nblog")
