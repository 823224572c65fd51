"""The reader library is the API: ``nbcli`` imports only public ``nblog`` names, and the
``__all__`` of every public module of ``nblog`` is complete and true.

A module or name is private when any part of its dotted path starts with an underscore
(``nblog._x``, ``nblog.reader._runfiles.rankfiles``, ``from nblog.reader import _helper``). The
scan reads every ``nbcli`` source file with :mod:`ast`, so function-local imports count.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Public modules of nblog whose ``__all__`` is checked.
PUBLIC_MODULES = ("nblog", "nblog.reader", "nblog.reader.lowlevel", "nblog.format", "nblog.write",
                  "nblog.tensorboard")


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and part != "__init__" for part in dotted.split("."))


def private_imports(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` for each import of a private nblog module or name in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "nblog" and _private(alias.name):
                    out.append((node.lineno, alias.name))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "nblog":
                continue
            if _private(node.module):
                out.append((node.lineno, node.module))
                continue
            for alias in node.names:
                if alias.name.startswith("_") and alias.name != "__version__":
                    out.append((node.lineno, f"{node.module}.{alias.name}"))
    return out


def test_the_scan_finds_private_imports():
    src = ("import nblog._format\nfrom nblog.reader._runfiles.rankfiles import x\nfrom nblog.reader import _y\n"
           "def f():\n    from nblog._tail import Follower\n"
           "from nblog import RunReader\nfrom nblog.reader import Follower\nfrom nblog import __version__\n")
    assert [w for _l, w in private_imports(src)] == [
        "nblog._format", "nblog.reader._runfiles.rankfiles", "nblog.reader._y", "nblog._tail"]


def test_nbcli_imports_only_public_nblog_names():
    found = []
    for path in sorted((ROOT / "nbcli").rglob("*.py")):
        for line, what in private_imports(path.read_text(encoding="utf-8")):
            found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert found == []


def _defined_public(module) -> set[str]:
    """Public names a module defines itself (functions, classes, constants), not ones it
    imported from elsewhere; for a lazy package, the names it resolves on demand."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if name in ("annotations",):
            continue
        home = getattr(value, "__module__", None)
        if (inspect.isclass(value) or inspect.isfunction(value)) and home != module.__name__:
            continue  # imported, not defined here
        names.add(name)
    return names


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_complete_and_every_name_exists(name):
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), "a name twice in __all__"
    for n in exported:
        assert hasattr(module, n), f"{name}.__all__ names {n}, which does not exist"
        value = getattr(module, n)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), f"{name}.{n} has no docstring"
    missing = _defined_public(module) - set(exported)
    assert not missing, f"public names of {name} missing from __all__: {sorted(missing)}"


def test_reader_names_are_lazy():
    """``import nblog``, ``import nblog.reader`` and ``import nblog.reader.lowlevel`` import
    no reader module but the lazy-name table's own (``_lazy``: the standard library only),
    and so no numpy or polars: the names resolve on first use."""
    code = ("import sys, nblog, nblog.reader as r, nblog.reader.lowlevel\n"
            "bad = sorted(m for m in sys.modules if m.startswith('nblog.reader.')\n"
            "             and m not in ('nblog.reader._lazy', 'nblog.reader.lowlevel') or m in ('numpy', 'polars'))\n"
            "assert not bad, bad\n"
            "r.RunReader; assert 'polars' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_dir_lists_every_public_name_before_first_use(name):
    """``dir()`` (and so tab completion) shows the lazy names too, before they were asked for."""
    code = (f"import {name} as m\n"
            "missing = sorted(set(m.__all__) - set(dir(m)))\n"
            "assert not missing, missing\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
