"""Counts in nb's messages read "1 row", "2 rows" (issue 22: "wrote 1 rows", "1 ranks"):
every such message goes through nblog.reader.lowlevel.plural, checked on real nb processes and
by a scan of the sources for the hand-made forms it replaced."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

from cli_helpers import clean_env

REPO = Path(__file__).resolve().parents[2]
CODE = "from nbcli.app import main; main()"


def nb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CODE, *args], capture_output=True, text=True, env=clean_env(),
                          timeout=300)


def test_export_of_one_point_says_1_row_1_rank_1_run_1_file(tmp_path):
    root = tmp_path / "runs"
    script = textwrap.dedent(f"""
        import nblog
        run = nblog.init("p", root={str(root)!r}, run_id="one-00000001", system=False, console=False)
        run.add_scalar("loss", 0.5, step=0)
        run.finish()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, env=clean_env(), timeout=300)
    res = nb("export", "one-00000001", "--root", str(root), "-o", str(tmp_path / "one.csv"))
    assert res.returncode == 0 and f"wrote 1 row (scalars, 1 rank) to {tmp_path / 'one.csv'}" in res.stderr
    res = nb("export", "--root", str(root), "-o", str(tmp_path / "ds"))
    assert res.returncode == 0, res.stderr
    assert "p/one-00000001: 1 row, 1 rank\n" in res.stderr and "wrote 1 row of 1 run in 1 file under" in res.stderr


# in a string literal: a noun made plural by hand, word{'s' if n != 1 else ''},
# word{'s' * (n != 1)}, or {n} word(s)
_HAND_MADE = re.compile(r"""[a-z]\{['"]s['"] (?:if|\*)|\} [a-z ]*[a-z]\(s\)""")


def test_no_message_makes_a_plural_by_hand():
    found = []
    for folder in ("nbcli", "nblog/reader"):
        for path in sorted((REPO / folder).rglob("*.py")):
            with path.open("rb") as f:
                for tok in tokenize.tokenize(f.readline):
                    if tok.type == tokenize.STRING and _HAND_MADE.search(tok.string):
                        found.append(f"{path.relative_to(REPO)}:{tok.start[0]}: {tok.string}")
    assert found == []
