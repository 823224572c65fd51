"""The file names of a run folder: every name written by ``nblog.format._filenames``
parses back to what made it, each parser takes only its own kind, and no other module
of nblog or nbcli writes or parses such a name itself (an ``ast`` scan of their source).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nblog.format import _filenames as N

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / "nblog" / "format" / "_filenames.py"

numbers = st.integers(min_value=0, max_value=999_999_999)

#: kind -> (writer, parser) of the names with a rank and a session
PAIRS = {
    "events": (N.event_file_name, N.parse_event_file_name),
    "envelope": (N.envelope_file_name, N.parse_envelope_file_name),
    "console": (N.console_file_name, N.parse_console_file_name),
    "provenance": (N.provenance_file_name, N.parse_provenance_file_name),
    "failure": (N.failure_file_name, N.parse_failure_file_name),
    "media": (N.session_pack_file_name, N.parse_pack_file_name),
}


@pytest.mark.parametrize("kind", sorted(PAIRS))
@given(rank=numbers, session=numbers)
def test_every_name_parses_back(kind: str, rank: int, session: int) -> None:
    write, parse = PAIRS[kind]
    assert parse(write(rank, session)) == (rank, session)


@given(rank=numbers)
def test_a_ranks_own_pack_parses_back(rank: int) -> None:
    assert N.parse_pack_file_name(N.pack_file_name(rank)) == (rank, None)


@pytest.mark.parametrize("kind", sorted(PAIRS))
def test_each_parser_takes_its_own_kind_only(kind: str) -> None:
    _write, parse = PAIRS[kind]
    others = [w(3, 4) for k, (w, _p) in PAIRS.items() if k != kind]
    others += [N.pack_file_name(3) if kind != "media" else "media.r3.log", N.RUN_JSON, N.RUN_JSON_BACKUP,
               N.provenance_file_name(3, 4, "diff"), N.temp_file_name(PAIRS[kind][0](3, 4)),
               N.aside_file_name(PAIRS[kind][0](3, 4)), PAIRS[kind][0](3, 4) + "x", "x" + PAIRS[kind][0](3, 4)]
    assert [n for n in others if parse(n) is not None] == []


@pytest.mark.parametrize("name", ["events.r-1.s0.log", "events.r.s0.log", "events.r1.s0.log.tmp",
                                  "failure.r1234567890.s0.json", "provenance.r0.s1234567890.json",
                                  "media.r01.s2.pack", "media.r1.s.pack", "console.r1.s2.txt"])
def test_names_nb_never_wrote_are_not_parsed(name: str) -> None:
    assert [k for k, (_w, parse) in PAIRS.items() if parse(name) is not None] == []


def test_the_envelope_path_of_an_event_log() -> None:
    assert N.envelope_path_for("/r/p/x/" + N.event_file_name(2, 5)) == "/r/p/x/" + N.envelope_file_name(2, 5)
    assert N.envelope_path_for("/r/p/x/" + N.console_file_name(2, 5)) is None


def test_the_prefixes_start_their_kinds() -> None:
    assert N.event_file_name(1, 2).startswith(N.EVENTS_PREFIX)
    assert N.pack_file_name(1).startswith(N.MEDIA_PREFIX)
    assert N.session_pack_file_name(1, 2).startswith(N.MEDIA_PREFIX)
    assert N.failure_file_name(1, 2).startswith(N.FAILURE_PREFIX)


@pytest.mark.parametrize("name", [N.RUN_JSON, N.RUN_JSON_BACKUP, N.envelope_file_name(0, 3)])
def test_temp_and_aside_names_are_hidden_new_and_known_as_such(name: str) -> None:
    temps = {N.temp_file_name(name) for _ in range(50)}
    asides = {N.aside_file_name(name) for _ in range(50)}
    assert len(temps) == 50 and len(asides) == 50  # a new name each call
    for t in temps:
        assert t.startswith(".") and "/" not in t and N.is_temp_of(t, name) and not N.is_aside_of(t, name)
    for a in asides:
        assert a.startswith(".") and "/" not in a and N.is_aside_of(a, name) and not N.is_temp_of(a, name)
    other = "run.jsonx" if name == N.RUN_JSON else N.RUN_JSON + "x"
    assert not N.is_temp_of(N.temp_file_name(other), name) and not N.is_aside_of(N.aside_file_name(other), name)


# -- nobody else writes or parses these names ------------------------------------------------

# a string constant that starts a run folder's file name (also as a regular expression),
# names run.json, or ends like a temp, aside or pack file
_NAME_PART = re.compile(
    r"^\^?(?:events|envelope|console|provenance|failure|media)\\?\.|run\\?\.json|\.(?:tmp|old|bak|pack)$")


def name_parts(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of each string constant of ``source`` that builds or matches a
    run folder's file name: docstrings and text with white space (messages) are prose."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                  and not any(c.isspace() for c in n.value) and _NAME_PART.search(n.value))


def test_the_scan_finds_names_built_or_parsed_by_hand() -> None:
    src = '''"""events.r0.s0.log in a docstring is prose."""
import re
_A = re.compile(r"^console\\.r(\\d+)\\.s(\\d+)\\.log$")
def f(rank, session, path, name):
    """media.r0.pack"""
    a = f"events.r{rank}.s{session}.log"
    b = os.path.join(path, "run.json")
    c = name.startswith("failure.")
    d = f"{path}.tmp{os.getpid()}"
    e = name.endswith(".pack")
    warn("run.json is missing")  # a message
    return "media", ".bin"
'''
    assert name_parts(src) == [(3, r"^console\.r(\d+)\.s(\d+)\.log$"), (6, "events.r"), (7, "run.json"),
                               (8, "failure."), (9, ".tmp"), (10, ".pack")]


def test_no_other_module_writes_or_parses_a_run_folders_file_names() -> None:
    found = []
    for pkg in ("nblog", "nbcli"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path == HOME:
                continue
            found += [f"{path.relative_to(ROOT)}:{line}: {text!r}"
                      for line, text in name_parts(path.read_text(encoding="utf-8"))]
    assert found == []
    assert name_parts(HOME.read_text(encoding="utf-8"))  # the scan sees the home module's names
