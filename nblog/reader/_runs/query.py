"""Selecting runs by config and results: what ``nb ls --where/--sort/--columns/--group`` does.

Polars is the engine: ``--where`` is a SQL ``WHERE`` fragment parsed by
:func:`polars.sql_expr`, evaluated on a frame with one row per run. The only thing done
to the text first is :func:`quote_keys`: a bare word with ``.`` or ``/`` inside
(``optim.lr``, ``train/loss.min``) is one key, so it is wrapped in double quotes
(SQL would read ``optim.lr`` as column ``lr`` of a table ``optim`` and ``train/loss``
as a division); and a dotted chain of quoted and bare parts, as SQL users quote a name
with other characters (``"train/loss".last``, ``"val/top-1".max``, ``optim."lr"``), is
the same one key (``"train/loss.last"``), where Polars would read a field of a struct.

A key is, in this order of precedence:

- a field of the ``nb ls`` row (:data:`FIELDS`: ``status``, ``ranks``, ``started``, ...);
- a config key, nested keys joined with dots (``optim.lr``); ``config.KEY`` always
  means the config key, whatever the fields are called;
- a scalar tag of rank 0: ``TAG`` is its last value, ``TAG.last``, ``TAG.step``
  (the step of the last value), ``TAG.min`` and ``TAG.max`` its statistics
  (:func:`nblog.reader._views.tag_stats.tag_stats`: from run.json's ``summary``, else from the
  event logs).

Only the columns a query names are built, and tag statistics are read only for the
runs left by the parts of ``--where`` (its top-level ``AND`` terms) that name no tag,
so a query on fields and config keys reads nothing but the run.json files.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Sequence

import polars as pl

from .._file.gcpause import paused_gc
from .._views.tag_stats import SUMMARY_STATS, tag_stats

#: The fields of an ``nb ls`` row a query can name; ``duration`` is ``duration_s``.
FIELDS = ("id", "project", "name", "status", "ranks", "world_size", "sessions", "last_step",
          "last_step_updated", "started", "duration_s", "duration", "last_write", "size_bytes", "path")
_FIELD_OF = {f: ("duration_s" if f == "duration" else f) for f in FIELDS}
_MISSING = object()

# single-quoted strings (kept as they are), then a key: a chain of parts joined by dots,
# each part a double-quoted identifier or a bare word (with slashes and dots inside); a
# chain is taken whole (possessive) and must not be a function's name
_QUOTED = r'"(?:[^"]|"")*"'
_PART = rf'(?:{_QUOTED}|\w+(?:[./]\w+)*)'
_TOKEN = re.compile(rf"""'(?:[^']|'')*'|(?<![\w."])((?:{_QUOTED}|[A-Za-z_]\w*(?:[./]\w+)*)(?:\.{_PART})*+)(?![\w(."])""",
                    re.ASCII)
_PARTS = re.compile(rf"{_QUOTED}|[^.\"]+(?:[./][^.\"]+)*", re.ASCII)


class QueryError(ValueError):
    """A query that cannot be run: a bad ``--where`` expression, an unknown key, a
    comparison of values that do not compare. ``option`` names the option at fault,
    ``hint`` says what to write instead (may be None)."""

    def __init__(self, option: str, message: str, hint: str | None = None):
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message
        self.hint = hint


def quote_keys(expr: str) -> str:
    """``expr`` with every key put in one pair of double quotes: a bare word of letters,
    digits and ``_`` that has ``.`` or ``/`` between its parts (``optim.lr``,
    ``train/loss.min``), and a chain of quoted and bare parts joined by dots
    (``"train/loss".last`` becomes ``"train/loss.last"``). Text in single quotes, a lone
    quoted key (``"val/top-1"``), a plain word and a word followed by ``(`` stay as
    they are."""
    return _TOKEN.sub(_quote_key, expr)


def _quote_key(m: re.Match) -> str:
    chain = m.group(1)
    if chain is None:  # a string
        return m.group(0)
    if '"' not in chain and "." not in chain and "/" not in chain:  # a plain word (AND, status)
        return chain
    if chain.startswith('"') and _PARTS.fullmatch(chain):  # one quoted key
        return chain
    parts = [p[1:-1].replace('""', '"') if p.startswith('"') else p for p in _PARTS.findall(chain)]
    return '"' + ".".join(parts).replace('"', '""') + '"'


def parse_where(expr: str) -> pl.Expr:
    """The Polars expression of a ``--where`` fragment (after :func:`quote_keys`).

    Raises:
        QueryError: Polars cannot parse it (the message is Polars').
    """
    if not expr.strip():
        raise QueryError("--where", "the expression is empty", "for example: --where 'optim.lr < 3e-4'")
    try:
        return pl.sql_expr(quote_keys(expr))
    except Exception as exc:  # polars raises SQLSyntaxError, SQLInterfaceError, ...; all mean "bad text"
        raise QueryError("--where", f"cannot parse {expr!r}: {_polars_message(exc)}", _QUOTING_HINT) from None


_QUOTING_HINT = ("write text in single quotes (status = 'failed') and keys with other characters than "
                 'letters, digits, _ . / in double quotes ("val/top-1" > 0.9); see nb ls --help')


def _polars_message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _conjuncts(expr: pl.Expr) -> list[pl.Expr]:
    """The top-level AND terms of ``expr`` (``expr`` itself when it is no AND)."""
    parts = expr.meta.pop()
    if len(parts) == 2 and (parts[1] & parts[0]).meta.eq(expr):
        return _conjuncts(parts[1]) + _conjuncts(parts[0])
    return [expr]


def config_value(config: object, key: str) -> object:
    """The value at the dotted ``key`` of a nested config, or ``_MISSING``. A key
    that itself holds dots (``{"a.b": 1}``) is found too: each dot may be part of a
    name or a step into a nested dict."""
    if not isinstance(config, dict):
        return _MISSING
    if key in config:
        return config[key]
    start = 0
    while True:
        dot = key.find(".", start)
        if dot < 0:
            return _MISSING
        head = config.get(key[:dot], _MISSING)
        if isinstance(head, dict):
            found = config_value(head, key[dot + 1:])
            if found is not _MISSING:
                return found
        start = dot + 1


def flat_config(config: object, prefix: str = "") -> dict[str, object]:
    """Every leaf of a nested config under its dotted key (lists are leaves)."""
    out: dict[str, object] = {}
    if isinstance(config, dict):
        for k, v in config.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v:
                out.update(flat_config(v, key + "."))
            else:
                out[key] = v
    return out


def _series(name: str, values: list) -> pl.Series:
    """A typed column: booleans, integers, floats (integers and floats mixed), text;
    anything else (lists, dicts, values of several kinds) as its JSON text."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pl.Series(name, values, dtype=pl.Null)
    if kinds == {bool}:
        return pl.Series(name, values, dtype=pl.Boolean)
    if kinds <= {int} and all(v is None or -(2**63) <= v < 2**63 for v in values):
        return pl.Series(name, values, dtype=pl.Int64)
    if kinds <= {int, float}:
        return pl.Series(name, [None if v is None else float(v) for v in values], dtype=pl.Float64)
    if kinds == {str}:
        return pl.Series(name, values, dtype=pl.String)
    text = [v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)
            for v in values]
    return pl.Series(name, text, dtype=pl.String)


class RunsTable:
    """The runs of a listing (``(row, run.json)`` pairs from
    :func:`nblog.reader._runs.catalog.list_runs_meta`) as columns built on demand."""

    def __init__(self, pairs: Sequence[tuple[dict, dict]], summaries: dict[str, dict] | None = None):
        """``summaries``: tag summaries already read, by run folder (filled as runs are read)."""
        self.pairs = list(pairs)
        self._config_keys: dict[str, bool] = {}
        self.summaries_read: dict[str, dict[str, dict]] = {} if summaries is None else summaries

    # -- what a key is

    def is_config(self, key: str) -> bool:
        """Whether ``key`` names a config key: ``config.X``, or a key of any run's config
        that is not a field."""
        if key in _FIELD_OF:
            return False
        if key.startswith("config."):
            return True
        known = self._config_keys.get(key)
        if known is None:
            known = any(config_value(meta.get("config"), key) is not _MISSING for _row, meta in self.pairs)
            self._config_keys[key] = known
        return known

    def is_summary(self, key: str) -> bool:
        """Whether ``key`` is neither a field nor a config key: a tag statistic (or unknown)."""
        return key not in _FIELD_OF and not self.is_config(key)

    def summaries(self, i: int) -> dict[str, dict]:
        """The tag summaries of run ``i`` (read once)."""
        row, meta = self.pairs[i]
        got = self.summaries_read.get(row["path"])
        if got is None:
            got = self.summaries_read[row["path"]] = tag_stats(row["path"], meta)
        return got

    def value(self, i: int, key: str) -> object:
        """The value of ``key`` for run ``i`` as JSON would carry it (config values as
        logged, tag statistics as floats); None where the run has none."""
        row, meta = self.pairs[i]
        field = _FIELD_OF.get(key)
        if field is not None:
            return row.get(field)
        if self.is_config(key):
            cfg = meta.get("config")
            v = config_value(cfg, key)
            if v is _MISSING and key.startswith("config."):
                v = config_value(cfg, key[len("config."):])
            return None if v is _MISSING else v
        found = self._stat(self.summaries(i), key)
        return None if found is None else found[1]

    @staticmethod
    def _stat(summaries: dict[str, dict], key: str) -> tuple[str, object] | None:
        """``(tag, value)`` of a tag key (``TAG`` or ``TAG.<stat>``) in ``summaries``."""
        st = summaries.get(key)
        if st is not None:
            return key, st.get("last")
        tag, dot, stat = key.rpartition(".")
        if dot and stat in SUMMARY_STATS and tag in summaries:
            return tag, summaries[tag].get(stat)
        return None

    def check_known(self, keys: Iterable[str], option: str, rows: Sequence[int]) -> None:
        """Raise :class:`QueryError` for a key of ``keys`` that is no field, no config
        key of any run and no tag statistic of any run of ``rows`` (not checked when
        ``rows`` is empty: there is no tag to look at)."""
        if not rows:
            return
        for key in keys:
            if not self.is_summary(key):
                continue
            if any(self._stat(self.summaries(i), key) is not None for i in rows):
                continue
            known = set(FIELDS)
            for _row, meta in self.pairs:
                known.update(flat_config(meta.get("config")))
            for i in rows:
                known.update(self.summaries(i))
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hints = [f"did you mean {', '.join(close)}?"] if close else []
            if option == "--where":
                hints.append(_QUOTING_HINT)
            raise QueryError(option, f"unknown key {key!r}: not a field, a config key of any run, or a scalar "
                             "tag of rank 0 (TAG, TAG.last, TAG.step, TAG.min, TAG.max) of the runs listed",
                             "; ".join(hints) or None)

    def frame(self, rows: Sequence[int], keys: Iterable[str]) -> pl.DataFrame:
        """Columns ``_i`` (the run's index) and one per key, for the runs ``rows``."""
        cols = [pl.Series("_i", list(rows), dtype=pl.Int64)]
        for key in dict.fromkeys(keys):
            cols.append(_series(key, [self.value(i, key) for i in rows]))
        return pl.DataFrame(cols)


def _evaluate(frame: pl.DataFrame, expr: pl.Expr, option: str, text: str) -> pl.DataFrame:
    try:
        return frame.filter(expr)
    except Exception as exc:  # a comparison of text with a number, a non-boolean result, ...
        raise QueryError(option, f"cannot evaluate {text!r}: {_polars_message(exc)}",
                         "compare numbers with numbers and text with text ('adam'); a config key that is a "
                         "number in some runs and text in others is text, and so are lists and dicts "
                         "(JSON text)") from None


def select_runs(
    table: RunsTable, where: str | None = None, sort: str | None = None, desc: bool = False,
    keys: Sequence[str] = (),
) -> list[int]:
    """The indices of the runs of ``table`` that ``where`` keeps, in ``sort`` order
    (ascending, or descending with ``desc``; missing values last; ties keep the
    listing's order, newest first), checking that every key of ``where``, ``sort`` and
    ``keys`` is known (:meth:`RunsTable.check_known`).

    The cyclic garbage collector is paused meanwhile (:func:`paused_gc`): a column of
    20,000 values for each key, none in a cycle, is all it would scan.

    Raises:
        QueryError: a bad expression or an unknown key.
    """
    with paused_gc():
        return _select(table, where, sort, desc, keys)


def _select(table: RunsTable, where: str | None, sort: str | None, desc: bool, keys: Sequence[str]) -> list[int]:
    rows = list(range(len(table.pairs)))
    if where is not None:
        expr = parse_where(where)
        names = expr.meta.root_names()
        base = [n for n in names if not table.is_summary(n)]
        # the AND terms that name no tag first: tag statistics are read only for the runs left
        first = [c for c in _conjuncts(expr) if not any(table.is_summary(n) for n in c.meta.root_names())]
        if first and len(first) < len(_conjuncts(expr)):
            pre = first[0]
            for c in first[1:]:
                pre = pre & c
            rows = _evaluate(table.frame(rows, base), pre, "--where", where)["_i"].to_list()
        table.check_known(names, "--where", rows)
        rows = _evaluate(table.frame(rows, names), expr, "--where", where)["_i"].to_list()
    if sort is not None:
        table.check_known([sort], "--sort", rows)
        f = table.frame(rows, [sort])
        try:
            rows = f.sort(sort, descending=desc, nulls_last=True, maintain_order=True)["_i"].to_list()
        except Exception as exc:
            raise QueryError("--sort", f"cannot sort by {sort!r}: {_polars_message(exc)}") from None
    table.check_known(keys, "--columns", rows)
    return rows


def group_runs(
    table: RunsTable, rows: Sequence[int], key: str, values: Sequence[str] = (), sort: str | None = None,
    desc: bool = False,
) -> list[dict]:
    """The runs ``rows`` grouped by the value of ``key``: one dict per group with
    ``key`` (the value; None for runs without it), ``runs`` (how many), ``ids``
    (``project/id`` in listing order), and per key of ``values``: ``{"mean", "min",
    "max"}`` for numbers, ``{"values": [...]}`` (the distinct values, sorted) otherwise.
    Groups come in the order of their value (missing last), or of the mean of
    ``sort`` when it is another key; ``desc`` reverses it.

    Raises:
        QueryError: an unknown key.
    """
    table.check_known([key, *values], "--group", rows)
    values = [v for v in dict.fromkeys(values) if v != key]
    f = table.frame(rows, [key, *values]).with_columns(
        pl.Series("_run", [f"{table.pairs[i][0]['project']}/{table.pairs[i][0]['id']}" for i in rows],
                  dtype=pl.String))
    numeric = {v for v in values if f.schema[v].is_numeric()}
    aggs = [pl.len().alias("_runs"), pl.col("_run").alias("_ids"), pl.col("_i").first().alias("_first")]
    for v in values:
        if v in numeric:
            col = pl.col(v).cast(pl.Float64)
            aggs += [col.mean().alias(f"{v}\0mean"), col.min().alias(f"{v}\0min"), col.max().alias(f"{v}\0max")]
        else:
            aggs.append(pl.col(v).drop_nulls().unique().sort().alias(f"{v}\0values"))
    g = f.group_by(key, maintain_order=True).agg(aggs)
    by = key if sort is None or sort == key or sort not in numeric else f"{sort}\0mean"
    g = g.sort(by, descending=desc, nulls_last=True, maintain_order=True)
    out = []
    for r in g.iter_rows(named=True):
        entry = {key: table.value(r["_first"], key), "runs": r["_runs"], "ids": r["_ids"]}  # as logged
        for v in values:
            if v in numeric:
                entry[v] = {s: r[f"{v}\0{s}"] for s in ("mean", "min", "max")}
            else:
                entry[v] = {"values": r[f"{v}\0values"]}
        out.append(entry)
    return out


__all__ = ["FIELDS", "QueryError", "RunsTable", "config_value", "flat_config", "group_runs", "parse_where",
           "quote_keys", "select_runs"]
