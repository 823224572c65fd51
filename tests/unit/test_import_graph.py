"""The module import graph of nblog and nbcli has no circle, and nblog never imports nbcli.

The graph is built from the source with ``ast``: every ``import`` and ``from ... import``
counts, module level or inside a function, so a circle hidden behind a function-local import
is still a circle. Only imports under ``if TYPE_CHECKING:`` are left out: the type checker
reads them, Python never runs them (a module naming the type of what it is handed).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nblog", "nbcli")


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the two packages under ``root``: dotted name -> source file."""
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names or lies inside."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def _typing_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            if (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
                    isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"):
                out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of the two packages it imports (anywhere in its source)."""
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = mod if is_pkg else mod.rpartition(".")[0]
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _typing_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                # `from pkg import name` may import a submodule `pkg.name`
                targets = [f"{stem}.{a.name}" for a in node.names] + [stem]
            for t in targets:
                hit = _resolve(t, mods)
                if hit and hit != mod:
                    edges.add(hit)
        graph[mod] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    mods = _modules()
    graph = _graph(mods)
    # a package's __init__ is imported whenever any of its submodules is; an edge from a
    # submodule up to its own package's __init__ (``from .. import _log``) is not a circle
    # of design, so it is left out
    for mod, edges in graph.items():
        graph[mod] = {e for e in edges if not mod.startswith(e + ".")}
    assert _cycles(graph) == []


def test_the_checker_sees_a_function_local_circle(tmp_path: Path) -> None:
    """The checker itself: a circle closed only by an import inside a function is found."""
    pkg = tmp_path / "nblog"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("from ._b import x\n")
    (pkg / "_b.py").write_text("x = 1\ndef f():\n    from nblog import _a\n")
    graph = _graph(_modules(tmp_path))
    assert _cycles(graph) == [["nblog._a", "nblog._b"]]


def test_the_checker_leaves_out_typing_only_imports(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` never runs: it closes no circle."""
    pkg = tmp_path / "nblog"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("from ._b import x\n")
    (pkg / "_b.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ._a import y\nx = 1\n")
    assert _cycles(_graph(_modules(tmp_path))) == []


def test_nblog_never_imports_nbcli() -> None:
    mods = _modules()
    graph = _graph(mods)
    bad = sorted(
        f"{m} -> {e}" for m, es in graph.items() if m.split(".")[0] == "nblog" for e in es
        if e.split(".")[0] == "nbcli"
    )
    assert bad == []
