"""``nb serve [RUN_OR_PROJECT...]``: a live page of the runs in a browser, and a JSON API."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from .. import _damage as damage
from .._options import Root
from .._output import error, warn

#: What ``pip install`` names when the extra is missing.
EXTRA_HINT = "pip install 'nblog[serve]'  (Starlette and uvicorn)"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _server_class(uvicorn: Any, early: list[int], stopping: threading.Event) -> Any:
    """uvicorn's Server, ending with exit status 0 on SIGINT and SIGTERM: uvicorn shuts
    down gracefully on both, then raises the signal again (the status would say killed);
    a server that was asked to stop has done its job. ``early``: the signals that came
    between the address line and the start (the server stops at once); ``stopping`` is
    set on the first signal (the event streams end)."""

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            stopping.set()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            before = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
            for sig in early:
                self.handle_exit(sig, None)
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

    return Server


def serve(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="RUN_OR_PROJECT", show_default=False,
                       help="Serve only these runs (ids, prefixes, PROJECT/RUN_ID, folders) and projects "
                            "[default: every run under the root]."),
    ] = None,
    root: Root = None,
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS",
                          help="The address to listen on. Anything but a loopback address lets other "
                               "machines ask (they still need the token): a warning says so."),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", min=0, max=65535, metavar="PORT", help="The port; 0: any free port."),
    ] = 6007,
) -> None:
    """Serve a live web page of the runs: a runs table (filter with the SQL of nb ls
    --where, sort, group), and for the runs you select every scalar as a chart (min/max
    buckets at the chart's width, zoom fetches finer ones; the median of the ranks with
    their band and the outlying rank), timers as a rank x step heat map with the
    stragglers named, system metrics per machine, text, images, config and sessions, and
    nb diff of two runs. New points appear as the job flushes them, pushed by the server.

    Prints one line, the address to open, with its token: nb serve:
    http://127.0.0.1:PORT/?token=TOKEN. From another machine: ssh -L PORT:127.0.0.1:PORT
    HOST, then open the same address. Every request needs the token (a random one each
    start, or $NB_SERVE_TOKEN); the JSON API (man nb-serve) takes it as Authorization:
    Bearer TOKEN. Read-only: nothing is written under the root. Stops on Ctrl-C or
    SIGTERM (exit 0).
    """
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as exc:
        error(f"nb serve needs {exc.name}, which is not installed", EXTRA_HINT)
        raise typer.Exit(1) from None
    from nblog import AmbiguousRunError, RunNotFoundError
    from nblog.reader import default_root

    from ..serve._app import make_app
    from ..serve._hub import Catalog, resolve_scope
    from ..serve._security import TokenError, make_token

    if not host.strip():
        raise typer.BadParameter("no address given (127.0.0.1: this machine only)", param_hint="--host")
    where = os.path.abspath(root or default_root())
    if not os.path.isdir(where) and not names:
        raise typer.BadParameter(f"{where} is not a folder (pass --root DIR or set NB_DIR)", param_hint="--root")
    try:
        scope = resolve_scope(where, names or [])
    except (RunNotFoundError, AmbiguousRunError) as exc:
        raise typer.BadParameter(str(exc), param_hint="RUN_OR_PROJECT") from None
    try:
        token = make_token()
    except TokenError as exc:
        raise typer.BadParameter(str(exc), param_hint="NB_SERVE_TOKEN") from None
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except (OSError, OverflowError) as exc:
        taken = getattr(exc, "errno", None) in (errno.EADDRINUSE, errno.EACCES)
        error(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}",
              "choose another --port (0: any free port)" if taken else
              "--host takes an address of this machine (127.0.0.1: this machine only)")
        raise typer.Exit(1) from None
    bound = sock.getsockname()[1]
    damage.allow(True)  # damaged bytes are in each answer's "damage" list (and warned here): stopping is exit 0
    if not _loopback(host):
        warn(f"listening on {host}, not on a loopback address: other machines can reach this server "
             "(the token still guards every request; on a shared machine prefer ssh -L)")
    stopping = threading.Event()
    catalog = Catalog(scope)
    # the first listing while uvicorn starts and the user opens the page (20,000 runs: ~0.6 s)
    threading.Thread(target=catalog.warm, name="nb-serve-listing", daemon=True).start()
    gate = make_app(catalog, token, bound, stopping)
    config = uvicorn.Config(gate, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2, ws="none")
    early: list[int] = []
    for sig in _STOP_SIGNALS:  # a script may stop the server as soon as it read the address line
        signal.signal(sig, lambda sig, _frame: early.append(sig))
    server = _server_class(uvicorn, early, stopping)(config)
    print(f"nb serve: {_url(host, bound, token)}", flush=True)
    server.run(sockets=[sock])
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


__all__ = ["register", "serve"]
