"""The wings of nblog import downward only, nothing closes a circle, and nblog never
imports nbcli.

The order, bottom first (:data:`LAYERS`)::

    nblog._errors, nblog._log, nblog._version   leaves: the standard library only
    nblog.format                                the on-disk contract: the standard library only
    nblog.media, nblog.system                   above format; never each other
    nblog.write, nblog.reader                   above those; never each other
    nblog  (nblog/__init__.py)                  the public face: init, Run, RunReader, errors
    nblog.integrations                          framework doors
    nblog.tensorboard                           SummaryWriter, tfevents export and import
    nbcli                                       the command line (public nblog names only:
                                                tests/unit/test_public_api.py)

A module may import the standard library (and, above format, third-party packages), the
modules of its own wing and those of wings on lower layers: never a wing on its own layer
nor one above. Every module of the two packages belongs to exactly one wing.

The graph is built from the source with ``ast``: every ``import`` and ``from ... import``
counts, module level or inside a function, so a circle hidden behind a function-local import
is still a circle. ``from pkg import name`` is an edge to the submodule ``pkg.name`` when
there is one, else to ``pkg`` itself (its ``__init__``, which defines ``name``): ``from ..
import _log`` imports ``nblog._log``, ``from .. import __version__`` imports ``nblog``. The
package ``__init__`` files that Python runs before any submodule are modules of the graph
like any other, with their own edges, not an edge of every submodule. A package that serves
names lazily (a module-level ``__getattr__`` calling ``importlib.import_module`` on a table
of ``(module, attribute)`` pairs, as ``nblog.reader`` does) imports each module of its table.
Only imports under ``if TYPE_CHECKING:`` are left out: the type checker reads them, Python
never runs them (a module naming the type of what it is handed).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nblog", "nbcli")

#: The wings, bottom layer first; the wings of one layer never import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("nblog._errors", "nblog._log", "nblog._version"),
    ("nblog.format",),
    ("nblog.media", "nblog.system"),
    ("nblog.write", "nblog.reader"),
    ("nblog",),
    ("nblog.integrations",),
    ("nblog.tensorboard",),
    ("nbcli",),
)
#: Wings that import the standard library only (and lower wings of these).
STDLIB_ONLY = ("nblog._errors", "nblog._log", "nblog._version", "nblog.format")

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


def _absolute(module: str | None, level: int, package: str) -> str:
    """The absolute name of ``from <level dots><module> import ...`` inside ``package``."""
    if not level:
        return module or ""
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _lazy_table(tree: ast.Module, package: str) -> list[str]:
    """The modules a lazy package imports on first use of a name: the first items of
    its ``(module, attribute)`` string pairs, when it has a module-level ``__getattr__``
    calling ``importlib.import_module``."""
    getattr_fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"), None)
    if getattr_fn is None or not any(
            isinstance(n, ast.Attribute) and n.attr == "import_module" for n in ast.walk(getattr_fn)):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            name = node.elts[0].value  # type: ignore[attr-defined]
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                out.append(_absolute(name[level:] or None, level, package))
            elif name.split(".")[0] in PACKAGES:
                out.append(name)
    return out


def _graph(mods: dict[str, Path], *, third_party: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """module -> the modules of the two packages it imports (anywhere in its source).

    ``third_party``, when given, is filled with module -> the top-level names it imports
    that are neither the standard library nor the two packages."""
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = mod if is_pkg else mod.rpartition(".")[0]
        edges: set[str] = set()
        others: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _typing_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                stem = _absolute(node.module, node.level, package)
                if stem == "__future__":
                    continue
                for a in node.names:  # `from pkg import name`: the submodule pkg.name, if any
                    sub = f"{stem}.{a.name}"
                    targets.append(sub if sub in mods else stem)
            for t in targets:
                hit = _resolve(t, mods)
                if hit is None:
                    top = t.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in PACKAGES:
                        others.add(top)
                elif hit != mod:
                    edges.add(hit)
        edges.update(h for t in _lazy_table(tree, package) if (h := _resolve(t, mods)) and h != mod)
        graph[mod] = edges
        if third_party is not None:
            third_party[mod] = others
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


def wing_of(mod: str) -> str | None:
    """The wing ``mod`` belongs to: the longest wing name that is ``mod`` or a package
    above it; None when ``mod`` lies in ``nblog`` outside every wing (``nblog`` itself is
    the package's ``__init__`` only)."""
    best = None
    for layer in LAYERS:
        for wing in layer:
            if (mod == wing or mod.startswith(wing + ".")) and (best is None or len(wing) > len(best)):
                best = wing
    if best == "nblog" and mod != "nblog":
        return None
    return best


def _layer(wing: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if wing in layer)


def order_violations(graph: dict[str, set[str]]) -> list[str]:
    """``"a -> b (why)"`` for every edge against the order of :data:`LAYERS`."""
    bad = []
    for mod, edges in sorted(graph.items()):
        wa = wing_of(mod)
        if wa is None:
            continue
        for dep in sorted(edges):
            wb = wing_of(dep)
            if wb is None or wb == wa:
                continue
            la, lb = _layer(wa), _layer(wb)
            if lb > la:
                bad.append(f"{mod} -> {dep} ({wa} imports {wb}, a wing above it)")
            elif lb == la:
                bad.append(f"{mod} -> {dep} ({wa} imports {wb}, a wing beside it)")
    return bad


def test_every_module_has_a_wing() -> None:
    assert [m for m in _modules() if wing_of(m) is None] == []


def test_the_wings_import_downward_only() -> None:
    assert order_violations(_graph(_modules())) == []


def test_format_and_the_leaves_import_the_standard_library_only() -> None:
    others: dict[str, set[str]] = {}
    _graph(_modules(), third_party=others)
    bad = {m: sorted(o) for m, o in others.items() if o and wing_of(m) in STDLIB_ONLY}
    assert bad == {}


def test_no_import_circle() -> None:
    assert _cycles(_graph(_modules())) == []


def test_nblog_never_imports_nbcli() -> None:
    mods = _modules()
    graph = _graph(mods)
    bad = sorted(
        f"{m} -> {e}" for m, es in graph.items() if m.split(".")[0] == "nblog" for e in es
        if e.split(".")[0] == "nbcli"
    )
    assert bad == []


# -- the checker itself ----------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return _modules(tmp_path)


def test_the_checker_sees_a_function_local_circle(tmp_path: Path) -> None:
    """A circle closed only by an import inside a function is found."""
    mods = _tree(tmp_path, {"nblog/__init__.py": "", "nblog/_a.py": "from ._b import x\n",
                            "nblog/_b.py": "x = 1\ndef f():\n    from nblog import _a\n"})
    assert _cycles(_graph(mods)) == [["nblog._a", "nblog._b"]]


def test_the_checker_leaves_out_typing_only_imports(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` never runs: it closes no circle."""
    mods = _tree(tmp_path, {"nblog/__init__.py": "", "nblog/_a.py": "from ._b import x\n",
                            "nblog/_b.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ._a import y\nx = 1\n"})
    assert _cycles(_graph(mods)) == []


def test_the_checker_sees_a_name_taken_from_a_package(tmp_path: Path) -> None:
    """``from .. import __version__`` imports the package's ``__init__`` (a circle when
    that imports the module back); ``from .. import _log`` imports only ``_log``."""
    mods = _tree(tmp_path, {
        "nblog/__init__.py": "__version__ = '1'\nfrom .write._init import init\n",
        "nblog/_log.py": "",
        "nblog/write/__init__.py": "",
        "nblog/write/_init.py": "from .. import __version__\nfrom .. import _log\ninit = 1\n",
        "nblog/write/_run.py": "from .. import _log as log\n",
    })
    graph = _graph(mods)
    assert graph["nblog.write._init"] == {"nblog", "nblog._log"}
    assert graph["nblog.write._run"] == {"nblog._log"}
    assert _cycles(graph) == [["nblog", "nblog.write._init"]]
    assert order_violations(graph) == ["nblog.write._init -> nblog (nblog.write imports nblog, a wing above it)"]


def test_the_checker_reads_a_lazy_table(tmp_path: Path) -> None:
    """A lazy package imports the modules of its ``(module, attribute)`` table."""
    mods = _tree(tmp_path, {
        "nblog/__init__.py": "",
        "nblog/write/__init__.py": "",
        "nblog/write/_writer.py": "class Writer: ...\n",
        "nblog/reader/__init__.py": (
            "import importlib\n"
            "_NAMES = {'Writer': ('nblog.write._writer', 'Writer'), 'x': ('._x', 'x')}\n"
            "def __getattr__(name):\n"
            "    module, attr = _NAMES[name]\n"
            "    return getattr(importlib.import_module(module, __name__), attr)\n"),
        "nblog/reader/_x.py": "x = 1\n",
    })
    graph = _graph(mods)
    assert graph["nblog.reader"] == {"nblog.write._writer", "nblog.reader._x"}
    assert order_violations(graph) == [
        "nblog.reader -> nblog.write._writer (nblog.reader imports nblog.write, a wing beside it)"]


@pytest.mark.parametrize(("source", "ok"), [
    ("import json, os\nfrom collections.abc import Mapping\n", True),
    ("def f():\n    import numpy\n", False),
    ("from omegaconf import OmegaConf\n", False),
])
def test_the_checker_sees_a_third_party_import_in_format(tmp_path: Path, source: str, ok: bool) -> None:
    mods = _tree(tmp_path, {"nblog/__init__.py": "", "nblog/format/__init__.py": "",
                            "nblog/format/_x.py": source})
    others: dict[str, set[str]] = {}
    _graph(mods, third_party=others)
    assert (others["nblog.format._x"] == set()) is ok
