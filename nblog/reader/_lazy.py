"""Imports put off until first use: the public names of ``nblog.reader`` and
``nblog.reader.lowlevel`` (:func:`lazy_attributes`), and a module imported on the first use
of one of its names (:class:`LazyModule`), for the reader modules whose
common path does without it (``RunReader.scalars`` builds its frame with Polars alone, so
a first read does not wait ~60 ms for numpy). Not put in ``sys.modules``: other code
that imports the module gets the real one, and Polars never sees a stand-in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


class LazyModule:
    """Stands for the module ``name``: the first attribute asked for imports it, and each
    attribute is then kept here (later uses are plain attribute reads)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> object:
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)
        return value


numpy = LazyModule("numpy")


def lazy_attributes(module: str, names: dict[str, tuple[str, str]], namespace: dict[str, object],
                    package: str | None = None) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module's PEP 562 ``__getattr__`` and ``__dir__`` for its table of public names.

    Args:
        module: the module's ``__name__``, for the error message.
        names: public name -> (module, attribute in it); the module is imported on the
            first use of any of its names.
        namespace: the module's ``globals()``: each name, once imported, is kept there, so
            later uses are plain global look-ups.
        package: what a relative module in ``names`` is relative to (default ``module``).

    Returns:
        ``(__getattr__, __dir__)``; ``__getattr__`` raises AttributeError for a name not in
        the table.
    """

    def __getattr__(name: str) -> object:
        try:
            source, attr = names[name]
        except KeyError:
            raise AttributeError(f"module {module!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(source, package or module), attr)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
