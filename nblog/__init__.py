"""nblog: fast logging for distributed deep-learning training.

    import nblog as nb
    run = nb.init("llm", run_name="ddp", config=cfg)   # every rank, or rank 0 only
    run.add_scalar({"train/loss": loss, "lr": lr}, step=step)
    with run.timer("data"):
        batch = next(it)
    run.finish()

    r = nb.RunReader("ddp-1a2b3c4d", root="nb_runs")
    r.scalars()                     # polars.DataFrame

``import nblog`` loads only the standard library; ``RunReader`` imports numpy and
polars when first used. The file format: ``man nb-format``; the rest: the README.

Where a scalar goes, wing by wing:

- ``write/``: ``init`` (``_init``) finds the launch identity (``_launch``: rank, world
  size, machine), the run id (``_runid``), the settings, the run folder (``_rundir``) and
  the session history of a resumed run (``_session``). ``Run.add_scalar`` (``_scalars``;
  the rest of ``Run`` is ``_run`` and a module a concern beside it) **packs** the point into
  a 24-byte record in memory (a dict whose key set repeats: one block for the whole dict; a
  tensor on a GPU: a copy queued without a sync, ``_device``); the writer thread
  (``_writer``) splits blocks, converts device values, encodes the points as COLUMNS frames
  (about 13 bytes a point) and hands them to the OS.
  ``_lifecycle`` ends the session on exit, signals and fork; ``_console`` captures output.
- ``format/``: the on-disk contract. ``_format`` **frames** the records (header,
  checksums, record kinds; ``columns_layout``: where each column of a COLUMNS frame
  lies), ``_walk`` finds the frames again for every reader (file header, frame walk,
  torn tails), ``_runfile`` is ``run.json``, ``_filenames`` the names of a run folder's
  files, ``_filesafety`` how every file is created and replaced (exclusive create, atomic
  replace, no symbolic link), ``_pack`` the media pack, ``_names`` the rules for names
  that become paths.
- ``media/``: images, histograms, audio and figures, checked and copied on the caller's
  thread (``_media_input``), encoded on the writer thread (``_media_encode``) into the pack.
- ``system/``: the system-metrics sampler (``_system``) and NVIDIA GPUs (``_nvml``).
- ``reader/`` (public: ``nblog.reader``, what a user of runs needs, and
  ``nblog.reader.lowlevel``, the building blocks for tools), a package a role:
  ``_runs/catalog`` **finds** runs (``_runs/`` is many runs: query, listing cache, export,
  diff); ``_runfiles/rankfiles`` a rank's session files in order (new sessions, the hiding
  rule, following; ``_runfiles/`` also reads the sidecars beside them); ``_file/logfile``
  **decodes** an event log incrementally (the frames ``format/_walk`` finds; the columns
  where ``columns_layout`` says, with numpy, or with Arrow in ``_file/columns``);
  ``_views/``: ``RunReader`` (whole frames), ``LiveRun`` (the TUI's growing series),
  ``nb tail``, ``nb watch``, the one straggler rule; ``_answers/``: what ``nb show`` and
  ``nb timers`` print. ``docs/layout.md`` walks the tree.
- ``nbcli`` (a separate package) **draws**: ``nb`` commands, the TUI (``nbcli/tui``,
  its display maths (smoothing, downsampling, bands for every viewer) in ``nbcli/series``) and ``nb report``.
- Here at the top: the public names, the errors (``_errors``), the one logger (``_log``),
  the version (``_version``; these three are leaves that import nothing of nblog),
  ``tensorboard/`` (a ``SummaryWriter`` look-alike, tfevents export and import) and
  ``integrations/`` (frameworks).

The wings import downward only: the three leaves, then ``format``, then ``media`` and
``system``, then ``write`` and ``reader`` (never each other), then this package's public
names, then ``integrations`` and ``tensorboard`` (``tests/unit/test_import_graph.py``).
"""

from __future__ import annotations

from ._errors import (
    AmbiguousRunError,
    BlobError,
    DamagedLogWarning,
    FormatVersionError,
    NbError,
    RunNotFoundError,
    StrictModeError,
)
from ._version import __version__
from .write._init import init
from .write._run import Run, Timer

__all__ = [
    "AmbiguousRunError",
    "BlobError",
    "DamagedLogWarning",
    "FormatVersionError",
    "NbError",
    "Run",
    "RunNotFoundError",
    "RunReader",
    "StrictModeError",
    "Timer",
    "__version__",
    "init",
]


TYPE_CHECKING = False
if TYPE_CHECKING:  # for the type checker; at run time __getattr__ imports it when first asked
    from .reader._views.reader import RunReader
del TYPE_CHECKING  # not a name of nblog's


def __getattr__(name: str) -> type:
    if name == "RunReader":  # imports numpy and polars: only when asked for
        from .reader._views.reader import RunReader

        return RunReader
    raise AttributeError(f"module 'nblog' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the lazy ``RunReader``, so completion and ``dir()`` show it."""
    return sorted(set(globals()) | {"RunReader"})
