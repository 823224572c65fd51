"""TensorBoard and nb: write nb runs through TensorBoard's API, export them as TensorBoard
event files, import TensorBoard event files as nb runs.

- :class:`SummaryWriter` (``_summary_writer``): ``from nblog.tensorboard import
  SummaryWriter`` in place of ``torch.utils.tensorboard``'s, writing an nb run
  (:data:`UNSUPPORTED`: the calls nb does not implement; :func:`run_folder_of`: the run
  name a ``log_dir`` gives).
- :func:`export_tfevents` (``_summary_writer``): a run as event files TensorBoard opens
  (``nb export --format tfevents``); needs the ``tensorboard`` package.
- :func:`import_sources`, :func:`import_source`, :func:`import_folder` (``_import``):
  TensorBoard event files, or nb's own export, as nb runs (``nb import tensorboard``);
  :class:`ImportSource` is what becomes one run, :class:`AlreadyImported` the refusal of
  a second import, :func:`event_folders` and :func:`run_name_for` the layout rules.

Importing and writing runs both use the write path and the reader, so this package sits
on top of both (with ``nblog.integrations``), never inside either. ``import nblog`` does
not import it; the import names load ``_import`` on first use.
"""

from __future__ import annotations

import importlib

from ._summary_writer import UNSUPPORTED, SummaryWriter, export_tfevents, run_folder_of

#: Public name -> (private module of this package, its attribute), imported on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "AlreadyImported": ("._import", "AlreadyImported"),
    "ImportSource": ("._import", "ImportSource"),
    "event_folders": ("._import", "event_folders"),
    "import_folder": ("._import", "import_folder"),
    "import_source": ("._import", "import_source"),
    "import_sources": ("._import", "import_sources"),
    "run_name_for": ("._import", "run_name_for"),
}

__all__ = sorted(["UNSUPPORTED", "SummaryWriter", "export_tfevents", "run_folder_of", *_LAZY])

TYPE_CHECKING = False
if TYPE_CHECKING:  # the names for the type checker; at run time __getattr__ imports each on first use
    from ._import import (
        AlreadyImported,
        ImportSource,
        event_folders,
        import_folder,
        import_source,
        import_sources,
        run_name_for,
    )
del TYPE_CHECKING  # not a name of nblog.tensorboard's


def __getattr__(name: str) -> object:
    """Import the module behind a public name on first use and cache the name here.

    Raises:
        AttributeError: ``name`` is not a public name of ``nblog.tensorboard``.
    """
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'nblog.tensorboard' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
