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
polars when first used. See SPEC.md and ``man nb-format`` for the file format.
"""

from __future__ import annotations

__version__ = "0.1.0"

from ._errors import (  # noqa: E402
    AmbiguousRunError,
    BlobError,
    FormatVersionError,
    NbError,
    RunNotFoundError,
    StrictModeError,
)
from .write._init import init  # noqa: E402
from .write._run import Run, Timer  # noqa: E402

__all__ = [
    "AmbiguousRunError",
    "BlobError",
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


def __getattr__(name: str):
    if name == "RunReader":  # imports numpy and polars: only when asked for
        from .reader._reader import RunReader

        return RunReader
    raise AttributeError(f"module 'nblog' has no attribute {name!r}")
