"""The ``nb serve`` application: routes, the page and its files, behind the token gate.

One concern: putting :mod:`._api`'s handlers, the page (``serve.html`` with
``serve.js`` / ``serve.css``, and ``nb report``'s own ``report.js`` / ``report.css``
and vendored uPlot: one chart code base for both pages) and :class:`._security.TokenGate`
together as one Starlette application. Static files are a fixed table of names: no
request names a path on disk.
"""

from __future__ import annotations

import threading
from importlib import resources
from typing import TYPE_CHECKING

from .._output import warn
from ._api import Api, error, guarded
from ._hub import Catalog
from ._security import TokenGate

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

#: URL name -> (package, file name, media type) of every file the page loads.
ASSETS: dict[str, tuple[str, str, str]] = {
    "uPlot.js": ("nbcli.report", "vendor/uPlot.iife.min.js", "text/javascript"),
    "uPlot.css": ("nbcli.report", "vendor/uPlot.min.css", "text/css"),
    "LICENSE.uPlot": ("nbcli.report", "vendor/LICENSE.uPlot", "text/plain"),
    "report.js": ("nbcli.report", "report.js", "text/javascript"),
    "report.css": ("nbcli.report", "report.css", "text/css"),
    "serve.js": ("nbcli.serve", "serve.js", "text/javascript"),
    "serve.css": ("nbcli.serve", "serve.css", "text/css"),
}


def _read(package: str, name: str) -> bytes:
    return resources.files(package).joinpath(name).read_bytes()


def make_app(catalog: Catalog, token: str, port: int = 0, stopping: threading.Event | None = None) -> TokenGate:
    """The application serving ``catalog``'s runs to holders of ``token``.

    Args:
        catalog: the runs served.
        token: the token every request must carry.
        port: the port served (names the token cookie; set ``.port`` on the returned gate
            after binding to port 0).
        stopping: set when the server stops: the event streams end (else a graceful
            shutdown would wait for them, then cancel them).

    Returns:
        The ASGI application (a :class:`._security.TokenGate` in front of Starlette).
    """
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.responses import Response
    from starlette.routing import Route

    api = Api(catalog, stopping)
    assets = {name: (_read(pkg, file), media) for name, (pkg, file, media) in ASSETS.items()}
    page = _read("nbcli.serve", "serve.html")

    def index(request: Request) -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers={"cache-control": "no-store"})

    def static(request: Request) -> Response:
        got = assets.get(request.path_params["name"])
        if got is None:
            return error(404, "no such file")
        return Response(got[0], media_type=got[1] + "; charset=utf-8", headers={"cache-control": "no-cache"})

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        return error(status, "no such address" if status == 404 else str(getattr(exc, "detail", "")) or "refused")

    async def failed(request: Request, exc: Exception) -> Response:
        # a bug of nb serve: the client gets one line, the terminal the same line with the address
        warn(f"nb serve: {request.url.path}: {type(exc).__name__}: {exc} (answered 500)")
        return error(500, f"{type(exc).__name__}: {exc}")

    routes = [
        Route("/", index),
        Route("/static/{name}", static),
        Route("/api/runs", guarded(api.runs)),
        Route("/api/runs/{run_id}", guarded(api.run)),
        Route("/api/runs/{run_id}/scalars", guarded(api.scalars)),
        Route("/api/runs/{run_id}/band", guarded(api.band)),
        Route("/api/runs/{run_id}/timers", guarded(api.timers)),
        Route("/api/runs/{run_id}/stream", guarded(api.stream)),
        Route("/api/runs/{run_id}/console", guarded(api.console)),
        Route("/api/page", guarded(api.page)),
        Route("/api/chart", guarded(api.chart)),
        Route("/api/diff", guarded(api.diff)),
        Route("/api/stream", guarded(api.stream_many)),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: not_found, Exception: failed})
    app.router.redirect_slashes = False  # its redirect builds an absolute URL from the Host header
    return TokenGate(app, token, port)


__all__ = ["ASSETS", "make_app"]
