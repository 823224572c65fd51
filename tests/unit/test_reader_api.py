"""The reader's two public faces, curated (issue 23 item 5): ``nblog.reader`` holds what a
user of runs needs (about thirty names), ``nblog.reader.lowlevel`` the building blocks for
tools. Each name is spelt once, lives in one of the two, is documented in its module's
table, and nbcli reaches the reader through these two only (``test_public_api`` scans for
private imports). Behind them, five private packages a role, which import downward only.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import re

import pytest

import nblog.reader as reader
import nblog.reader.lowlevel as lowlevel

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: What a user of RunReader, listings, export, diff, watch and follow needs.
READER = {
    "ConsoleLine", "ConsoleLogs", "Envelope", "Event", "Follower", "LiveRun", "QueryError",
    "RunReader", "RunsTable", "Series", "StragglerRule", "TimerFrames", "WatchOptions",
    "Watcher", "decode_histogram", "default_root", "diff_runs", "export_root", "group_runs",
    "hang_report", "hang_summary", "latest_run", "latest_step", "list_runs", "overview", "parse_where", "read_envelopes",
    "read_frames", "resolve_run", "run_row", "run_status", "select_runs", "straggler_frames",
    "tag_matcher", "timer_report", "write_frames", "writer_alive",
}

#: The building blocks for tools.
LOWLEVEL = {
    "ALERT_SCHEMA", "DEFAULT_KINDS", "HANG_KEYS", "Delta", "EXPORT_KINDS", "FAILURE_SCHEMA", "FORMATS",
    "HISTOGRAM_SCHEMA", "KINDS", "KIND_CODES", "LogFile", "MEDIA_SCHEMA", "POINT_SCHEMA",
    "RankFiles", "STALE_AFTER_S", "STRAGGLER_FLOOR_S", "STRAGGLER_SPREAD",
    "STRAGGLER_WARMUP_STEPS", "SYSTEM_SCHEMA", "TEXT_SCHEMA", "TRACEBACK_LINES", "WINDOW",
    "envelope_file_name", "event_files", "failed_ranks", "failure_line", "follow",
    "format_for", "hang_where", "hide_thresholds", "list_runs_meta", "log_last_step", "plural",
    "process_alive", "provenance_lines", "rank_last_step", "ranks_with_logs", "read_all",
    "read_frame", "read_hang_dump", "read_header", "read_on", "refuse_linked_folders", "session_last_step",
    "session_steps", "tag_set", "tag_stats", "tag_table", "this_host", "timer_frames",
    "write_frame", "write_output", "writing_to",
}


def test_the_public_names_are_exactly_the_curated_ones():
    assert set(reader.__all__) == READER
    assert set(lowlevel.__all__) == LOWLEVEL
    assert not READER & LOWLEVEL, "a name in both faces"
    assert 30 <= len(READER) <= 40


@pytest.mark.parametrize("module", [reader, lowlevel], ids=lambda m: m.__name__)
def test_each_name_is_spelt_as_where_it_is_defined(module):
    """No aliases: a public name is the name its defining module gives it (the old
    ``select_runs = _runs_query.select`` was two spellings of one function)."""
    for name, (_source, attr) in module._NAMES.items():
        assert name == attr, f"{module.__name__}.{name} is {attr} under another name"


@pytest.mark.parametrize("module", [reader, lowlevel], ids=lambda m: m.__name__)
def test_each_name_is_in_its_modules_table(module):
    """The module docstring is the map: every public name appears in its table, as a
    Sphinx role (``:func:`x```, ``:class:`x```, ``:data:`x```)."""
    doc = module.__doc__ or ""
    listed = set(re.findall(r":(?:func|class|data|meth):`~?([A-Za-z_][\w.]*)`", doc))
    missing = sorted(set(module.__all__) - listed)
    assert not missing, f"not in {module.__name__}'s docstring table: {missing}"


@pytest.mark.parametrize("module", [reader, lowlevel], ids=lambda m: m.__name__)
def test_each_function_and_class_has_a_docstring(module):
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"{module.__name__}.{name} has no docstring"


def test_type_checker_sees_the_same_names_as_the_table():
    """The TYPE_CHECKING imports of each face (what mypy and editors see) name exactly the
    table's names, so neither can drift from the other."""
    for module in (reader, lowlevel):
        tree = ast.parse(pathlib.Path(module.__file__).read_text(encoding="utf-8"))
        seen = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.If)
                for sub in ast.walk(node) if isinstance(sub, ast.ImportFrom) for a in sub.names}
        assert seen == set(module._NAMES), module.__name__


def test_the_reader_packages_are_grouped_by_role():
    """The private modules live in five packages named by what they serve; no flat private
    module is left beside the two public faces but the lazy-import helper."""
    flat = sorted(p.name for p in (ROOT / "nblog/reader").glob("_*.py") if p.name != "__init__.py")
    assert flat == ["_lazy.py"]
    groups = sorted(p.name for p in (ROOT / "nblog/reader").iterdir() if p.is_dir() and p.name.startswith("_")
                    and p.name != "__pycache__")
    assert groups == ["_answers", "_file", "_runfiles", "_runs", "_views"]
    for group in groups:
        init = importlib.import_module(f"nblog.reader.{group}")
        assert init.__doc__, f"nblog.reader.{group} says nothing of its role"


#: The reader's role packages, bottom first: one log file, one run's files, views of one
#: run, many runs, the answers the CLI formats.
ROLE_ORDER = ("_file", "_runfiles", "_views", "_runs", "_answers")


def _role_imports(path: pathlib.Path, package: str) -> list[tuple[int, str]]:
    """``(line, role package)`` of each import in ``path`` (a module of ``package``) of
    another role package, at module level or inside a function; imports under ``if
    TYPE_CHECKING:`` are left out (Python never runs them)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(sub) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for sub in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative to nblog.reader.<package>
                base = ["nblog", "reader", package][: 3 - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
                targets = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
            elif node.module:
                targets = [node.module]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        for target in targets:
            parts = target.split(".")
            if parts[:2] == ["nblog", "reader"] and len(parts) > 2 and parts[2] in ROLE_ORDER:
                found.append((node.lineno, parts[2]))
    return found


def test_the_role_packages_import_downward_only():
    """A module of a role package imports its own package and those below it, never one
    above (:data:`ROLE_ORDER`): a newcomer reads the reader bottom up without going back."""
    up = []
    for package in ROLE_ORDER:
        for path in sorted((ROOT / "nblog/reader" / package).glob("*.py")):
            for line, target in _role_imports(path, package):
                if ROLE_ORDER.index(target) > ROLE_ORDER.index(package):
                    up.append(f"nblog/reader/{package}/{path.name}:{line} imports {target}")
    assert not up, "\n".join(up)


def test_the_role_order_check_sees_relative_absolute_and_local_imports(tmp_path):
    """The checker itself: an upward import is seen in each spelling, a TYPE_CHECKING one is not."""
    src = tmp_path / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .._views.select import x\n"
        "from nblog.reader._answers import overview\n"
        "def f():\n"
        "    from .._runs import catalog\n"
        "if TYPE_CHECKING:\n"
        "    from .._views.reader import RunReader\n",
        encoding="utf-8")
    assert _role_imports(src, "_file") == [(2, "_views"), (3, "_answers"), (5, "_runs")]
