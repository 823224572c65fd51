"""The JSON API of ``nb serve`` (``man nb-serve``): what the page reads, for scripts too.

One concern: a request's parameters checked, the reader library asked, the answer as
JSON. Every handler is synchronous and runs in a worker thread (reads block on disks);
the two streams are asynchronous generators that hand each poll to a thread.

=================================  ===========================================================
``GET /api/runs``                  the rows of ``nb ls --json`` (same keys); ``where=SQL``,
                                   ``sort=KEY``, ``desc=1`` as ``nb ls``; ``with=config``
                                   adds each run's flattened ``config`` and its tags' last
                                   values (``last``: run.json's summary)
``GET /api/runs/{id}``             what ``nb show --json`` gives
``GET /api/runs/{id}/scalars``     ``tag=T&rank=K&buckets=N&start=S&end=E``: one rank's
                                   series as min/max/last buckets of steps
``GET /api/runs/{id}/band``        ``tag=T&buckets=N&start=S&end=E``: per bucket the median,
                                   min and max across ranks, and the outlying rank
``GET /api/runs/{id}/timers``      the timers as rank × step heat maps, stragglers named by
                                   the one rule (``nb timers``)
``GET /api/runs/{id}/console``     ``rank=K&last=N&grep=RE``: the last lines of a rank's
                                   console as ``nb logs --json`` gives them, and the ranks
                                   that have one
``GET /api/runs/{id}/stream``      ``text/event-stream`` of the points flushed from now on
``GET /api/page``                  ``runs=ID,ID&part=info|details|all``: the data of ``nb
                                   report``'s page for those runs, scalar charts left to
                                   ``/api/chart`` (info: runs and tags, quick; details:
                                   timers, system metrics, text, images)
``GET /api/chart``                 ``runs=ID,ID&tag=T&buckets=N&start=S&end=E&rank=K&x=A``:
                                   one chart of the page (every run's median line, band and
                                   outlier; one rank's line with ``rank``; x: step, wall or
                                   active seconds)
``GET /api/stream``                ``runs=ID,ID``: one event stream for several runs
``GET /api/diff``                  ``runs=ID,ID``: what ``nb diff --json`` gives
=================================  ===========================================================

Numbers follow the one JSON rule of every command (:func:`nbcli._output.json_text`:
NaN and infinities as the strings "nan", "inf", "-inf"). A bad parameter is a 400, an
unknown run a 404, each with one line ``{"error": "..."}``; nothing a run holds (damage,
a file that vanished) ever stops the server: damaged ranges are in each answer's
``damage`` list instead.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from .._output import json_text
from ._hub import REFRESH_S, Catalog, NoSuchRun

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

#: Buckets of a chart when a request does not say, and the most it may ask for.
DEFAULT_BUCKETS = 1000
MAX_BUCKETS = 20_000
#: Runs one request may name (``/api/page``, ``/api/chart``, ``/api/stream``).
MAX_RUNS = 64
#: A stream sends a comment at least this often (seconds) so proxies keep it open.
KEEPALIVE_S = 15.0


class BadRequest(ValueError):
    """A parameter that cannot be used: a 400 with this message."""


def answer(obj: Any, status: int = 200) -> Response:
    """``obj`` as a JSON response (the one JSON rule of every command)."""
    from starlette.responses import Response

    return Response(json_text(obj, indent=None) + "\n", status, media_type="application/json",
                    headers={"cache-control": "no-store"})


def error(status: int, message: str) -> Response:
    """A one-line JSON error: ``{"error": message}``."""
    return answer({"error": message}, status)


def _int(request: Request, name: str, default: int | None, lo: int | None = None, hi: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise BadRequest(f"{name} must be between {lo} and {hi}, not {v}")
    return v


def _number(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number, not {raw[:40]!r}") from None
    if not math.isfinite(v):
        raise BadRequest(f"{name} must be finite, not {raw[:40]!r}")
    return v


def _tag(request: Request) -> str:
    tag = request.query_params.get("tag")
    if not tag:
        raise BadRequest("tag is required (a scalar tag, as nb show lists them)")
    return tag


def _run_ids(request: Request) -> list[str]:
    raw = request.query_params.get("runs") or ""
    ids = [r for r in dict.fromkeys(raw.split(",")) if r]
    if not ids:
        raise BadRequest("runs is required: run ids separated by commas")
    if len(ids) > MAX_RUNS:
        raise BadRequest(f"at most {MAX_RUNS} runs at once, not {len(ids)}")
    return ids


def _range(request: Request) -> tuple[float | None, float | None]:
    start, end = _number(request, "start"), _number(request, "end")
    if start is not None and end is not None and end < start:
        raise BadRequest(f"end ({end:g}) is before start ({start:g})")
    return start, end


class Api:
    """The handlers of the API over one :class:`~._hub.Catalog`."""

    def __init__(self, catalog: Catalog, stopping: threading.Event | None = None):
        self.catalog = catalog
        self.stopping = stopping or threading.Event()  # set when the server stops: streams end

    # -- runs -------------------------------------------------------------------------

    def runs(self, request: Request) -> Response:
        from nblog.reader import QueryError, RunsTable, select_runs

        from .._ls import json_rows, named_keys

        q = request.query_params
        where, sort = q.get("where") or None, q.get("sort") or None
        desc = q.get("desc", "") in ("1", "true", "yes")
        pairs = self.catalog.pairs()
        if where is None and sort is None:
            rows = [dict(r) for r, _m in pairs]
            if desc:
                rows.reverse()
        else:
            table = RunsTable(pairs)
            try:
                picked = select_runs(table, where, sort, desc)
                rows = json_rows(table, picked, (), named_keys(where, sort))
            except QueryError as exc:
                raise BadRequest(exc.message + (f" (hint: {exc.hint})" if exc.hint else "")) from None
        if "config" in (q.get("with") or "").split(","):
            from ..report._data import flatten

            metas = {r["path"]: m for r, m in pairs}
            for row in rows:
                meta = metas.get(row.get("path"), {})
                row["config"] = dict(flatten(meta.get("config")))
                row["last"] = {t: s.get("last") for t, s in (meta.get("summary") or {}).items() if isinstance(s, dict)}
        return answer(rows)

    def run(self, request: Request) -> Response:
        from nblog import RunReader
        from nblog.reader import overview

        folder = self.catalog.folder(request.path_params["run_id"])
        return answer(overview(RunReader(folder)))

    # -- series -----------------------------------------------------------------------

    def scalars(self, request: Request) -> Response:
        import numpy as np

        from ..series import step_buckets

        served = self.catalog.run(request.path_params["run_id"])
        tag = _tag(request)
        rank = _int(request, "rank", 0, 0, 1 << 30)
        buckets = _int(request, "buckets", DEFAULT_BUCKETS, 1, MAX_BUCKETS)
        start, end = _range(request)
        assert rank is not None and buckets is not None
        envs = served.envelopes(rank)
        if envs is not None:  # a big rank: its envelope's segments, bucketed again
            e = envs.get(tag)
            if e is None:
                exact, cols = step_buckets(np.zeros(0, np.int64), np.zeros(0), buckets, start, end)
            else:
                exact, cols = step_buckets(e.last_step, e.last, buckets, start, end, lo=e.lo, hi=e.hi, n=e.count)
                exact = exact and bool((e.count <= 1).all())
        else:
            step, value = served.points(tag, rank)
            exact, cols = step_buckets(step, value, buckets, start, end)
        return answer({
            "run": served.id, "tag": tag, "rank": rank, "exact": exact,
            "last_step": served.last_step(rank), "points": int(cols["n"].sum()),
            "summary": "envelope" if envs is not None else None,
            "series": {"step": cols["step"].tolist(), "min": cols["min"].tolist(), "max": cols["max"].tolist(),
                       "last": cols["last"].tolist()},
            "damage": served.live().damage(),
        })

    def band(self, request: Request) -> Response:
        import numpy as np

        from .. import series as S

        served = self.catalog.run(request.path_params["run_id"])
        tag = _tag(request)
        buckets = _int(request, "buckets", DEFAULT_BUCKETS, 1, MAX_BUCKETS)
        start, end = _range(request)
        assert buckets is not None
        frame, summarised = served.frame(tag, None, start, end)
        finite = frame.filter(frame["value"].is_finite()) if len(frame) else frame
        grid = S.make_grid(finite["x"].to_numpy() if len(finite) else np.zeros(0), buckets)
        b = S.band(S.buckets(frame, grid), grid)
        return answer({
            "run": served.id, "tag": tag, "exact": not grid.bucketed, "ranks": b.ranks,
            "outlier": b.outlier, "points": len(frame) if not summarised else None,
            "summary": "envelope" if summarised else None,
            "series": {"step": [int(x) for x in grid.x().tolist()], "median": b.line.tolist(), "min": b.lo.tolist(),
                       "max": b.hi.tolist(),
                       "outlier": b.outlier_line.tolist() if b.outlier_line is not None else None},
            "damage": served.live().damage(),
        })

    def timers(self, request: Request) -> Response:
        from nblog import RunReader

        from ..report._data import timer_maps

        folder = self.catalog.folder(request.path_params["run_id"])
        reader = RunReader(folder)
        maps = timer_maps(reader)
        return answer({"run": request.path_params["run_id"], "timers": maps, "damage": reader.damage()})

    def console(self, request: Request) -> Response:
        import re

        from nblog.reader import ConsoleLogs

        folder = self.catalog.folder(request.path_params["run_id"])
        last = _int(request, "last", 200, 1, 10_000)
        grep = request.query_params.get("grep") or None
        if grep is not None:
            try:
                re.compile(grep)
            except re.error as exc:
                raise BadRequest(f"grep is not a regular expression: {exc}") from None
        ranks = ConsoleLogs(folder).all_ranks()
        rank = _int(request, "rank", ranks[0] if ranks else None, 0, 1 << 30)
        lines = [] if rank is None else [ln.to_json() for ln in ConsoleLogs(folder, ranks=[rank], grep=grep).read(last)]
        return answer({"run": request.path_params["run_id"], "ranks": ranks, "rank": rank, "lines": lines})

    # -- the page ---------------------------------------------------------------------

    def page(self, request: Request) -> Response:
        from nblog import RunReader

        from ..report._data import build

        ids = _run_ids(request)
        part = request.query_params.get("part") or "all"
        if part not in ("info", "details", "all"):
            raise BadRequest(f"part is info, details or all, not {part[:40]!r}")
        served = [self.catalog.run(i) for i in ids]
        readers = [RunReader(s.dir) for s in served]
        data = build(readers, scalars=False, details=part != "info")
        if part != "details":
            data["tags"] = sorted({t for s in served for t in s.scalar_tags()})
            for info, s in zip(data["runs"], served, strict=True):  # what listing the tags skipped as damaged
                info["damage"] = s.live().damage()
        return answer(data)

    def chart(self, request: Request) -> Response:
        from ..report._data import scalar_chart

        ids = _run_ids(request)
        tag = _tag(request)
        buckets = _int(request, "buckets", DEFAULT_BUCKETS, 1, MAX_BUCKETS)
        rank = _int(request, "rank", None, 0, 1 << 30)
        axis = request.query_params.get("x") or "step"
        if axis not in ("step", "wall", "active"):
            raise BadRequest(f"x is step, wall or active, not {axis[:40]!r}")
        start, end = _range(request)
        assert buckets is not None
        served = [self.catalog.run(i) for i in ids]
        ranks = None if rank is None else [rank]
        frames, summarised = [], []
        for s in served:
            f, summary = s.frame(tag, ranks, start, end, axis)
            if len(f):
                frames.append((s.id, f))
            if summary:
                summarised.append(s.id)
        out = scalar_chart(tag, frames, buckets, axis)
        out["summarised"] = summarised  # runs drawn from envelopes: the band, not the points
        out["rank"] = rank
        out["damage"] = {s.id: d for s in served if (d := s.live().damage())}
        return answer(out)

    def diff(self, request: Request) -> Response:
        from nblog.reader import diff_runs

        ids = _run_ids(request)
        if len(ids) < 2:
            raise BadRequest("nb diff needs two runs or more")
        return answer(diff_runs([self.catalog.folder(i) for i in ids]))

    # -- streams ----------------------------------------------------------------------

    def stream(self, request: Request) -> Response:
        return self._stream(request, [request.path_params["run_id"]])

    def stream_many(self, request: Request) -> Response:
        return self._stream(request, _run_ids(request))

    def _stream(self, request: Request, ids: list[str]) -> Response:
        from starlette.responses import StreamingResponse

        served = [self.catalog.run(i) for i in ids]  # 404 before the stream starts
        return StreamingResponse(_events(request, served, self.stopping), media_type="text/event-stream",
                                 headers={"cache-control": "no-store", "x-accel-buffering": "no"})


async def _events(request: Request, served: list, stopping: threading.Event) -> AsyncIterator[str]:
    """The event stream: ``retry`` first, then one ``data:`` line per event (a JSON object:
    run, tag, rank, step and value lists), a comment every :data:`KEEPALIVE_S` seconds;
    it ends when the client goes or the server stops (``stopping``)."""
    import anyio
    import anyio.to_thread

    cursors: dict[str, int | None] = {s.id: None for s in served}

    def poll() -> list[dict]:
        out = []
        for s in served:
            seq, events = s.feed().since(cursors[s.id])
            cursors[s.id] = seq
            for e in events:
                out.append({"run": s.id, **e})
        return out

    await anyio.to_thread.run_sync(poll)  # from here on: what is flushed after the stream opened ...
    yield "retry: 2000\n: nb serve stream\n\n"  # ... which a client knows once it reads this
    quiet = 0.0
    while not stopping.is_set() and not await request.is_disconnected():
        await anyio.sleep(REFRESH_S)
        events = await anyio.to_thread.run_sync(poll)
        for e in events:
            yield "data: " + json_text(e, indent=None) + "\n\n"
        quiet = 0.0 if events else quiet + REFRESH_S
        if quiet >= KEEPALIVE_S:
            quiet = 0.0
            yield ": keepalive\n\n"


def guarded(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``handler`` with its failures turned into one-line JSON errors: 400 for a bad
    parameter, 404 for an unknown run, 500 (the cause's type and message, no traceback)
    for anything else."""
    def run(request: Request) -> Response:
        from nblog import NbError

        try:
            return handler(request)
        except BadRequest as exc:
            return error(400, str(exc))
        except NoSuchRun as exc:
            return error(404, f"no run {json.dumps(str(exc))} is served here")
        except (NbError, OSError) as exc:  # a run that vanished or cannot be read: this request fails, not the server
            return error(404 if isinstance(exc, (FileNotFoundError, LookupError)) else 500,
                         f"{type(exc).__name__}: {exc}")

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run


__all__ = ["DEFAULT_BUCKETS", "MAX_BUCKETS", "MAX_RUNS", "Api", "BadRequest", "answer", "error", "guarded"]
