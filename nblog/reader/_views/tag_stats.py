"""Per-tag summaries of a run (last value, its step, min, max of rank 0's scalars), for
``nb ls --where/--sort/--columns`` and ``nb diff``: from run.json's ``summary`` when the run
has one, else computed from the event logs with :class:`RunReader`.

Its own module because it sits above both the run catalog (``_catalog``) and the bulk
reader (``_reader``), which itself resolves runs through the catalog.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..._errors import NbError
from ...format import _format as F
from ...format._filenames import RUN_JSON
from ...format._runfile import read_json_file

#: The statistics of a tag summary (run.json ``summary``, see nb-format(5)).
SUMMARY_STATS = ("last", "step", "min", "max")


#: A summary value as a float: JSON numbers, and "nan"/"inf"/"-inf" (run.json holds
#: no bare NaN); None for anything else.
_summary_number = F.number_from_json


def tag_stats(run_dir: str, meta: Mapping | None = None) -> dict[str, dict]:
    """Per scalar tag of rank 0: ``{"last", "step", "min", "max"}`` (floats, and the
    int step of the last value; None where unknown).

    From ``run.json``'s ``summary`` object when the run has one (``meta`` is the parsed
    run.json, read again when None), else computed from rank 0's event logs through
    :class:`nblog.RunReader` (visible points only: a resume hides what it replaces):
    last is the value of the last record at the largest step, min and max ignore NaN.
    Imports polars only in the second case. A run whose logs cannot be read has {}.
    """
    if meta is None:
        meta, _st = read_json_file(os.path.join(run_dir, RUN_JSON))
        meta = meta or {}
    stored = meta.get("summary")
    if isinstance(stored, dict):
        out = {}
        for tag, st in stored.items():
            if isinstance(tag, str) and isinstance(st, dict):
                step = st.get("step")
                out[tag] = {"last": _summary_number(st.get("last")),
                            "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
                            "min": _summary_number(st.get("min")), "max": _summary_number(st.get("max"))}
        return out
    return _summaries_from_logs(run_dir)


def _summaries_from_logs(run_dir: str) -> dict[str, dict]:
    import polars as pl

    from .reader import RunReader

    try:
        frame = RunReader(run_dir).scalars(rank=0)
    except (OSError, ValueError, NbError):
        return {}
    if not len(frame):
        return {}
    value = pl.col("value")
    agg = (
        frame.with_row_index("_i")
        .sort("step", "_i")
        .group_by("tag", maintain_order=True)
        .agg(pl.col("value").last().alias("last"), pl.col("step").last().alias("step"),
             value.filter(~value.is_nan()).min().alias("min"), value.filter(~value.is_nan()).max().alias("max"))
    )
    return {r["tag"]: {k: r[k] for k in SUMMARY_STATS} for r in agg.iter_rows(named=True)}
