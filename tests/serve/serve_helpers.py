"""A real ``nb serve`` process for the tests, and plain HTTP requests to it.

:func:`served` starts ``nb serve --port 0`` (the installed console script of this venv,
as a user runs it), reads the one line it prints, and stops it with SIGTERM at the end,
checking that it exits 0. :class:`Server.get` makes one request with the standard
library (no client library between the test and the server)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

NB = str(Path(sys.executable).with_name("nb"))
#: How long a server may take to print its address (a first start on a loaded machine).
START_S = 60.0


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Server:
    url: str  # what it printed: http://127.0.0.1:PORT/?token=TOKEN
    proc: subprocess.Popen
    stderr: list[str] = field(default_factory=list)

    @property
    def token(self) -> str:
        return self.url.split("?token=", 1)[1]

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    @property
    def base(self) -> str:
        return self.url.split("/?token=", 1)[0]

    def get(self, path: str, token: str | None | bool = True, headers: dict | None = None,
            timeout: float = 60.0) -> Reply:
        """GET ``path``; ``token``: True sends the server's as a Bearer header, a string
        sends that one, None/False sends none."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = dict(headers or {})
        if token is True:
            h["Authorization"] = f"Bearer {self.token}"
        elif isinstance(token, str):
            h["Authorization"] = f"Bearer {token}"
        try:
            conn.request("GET", path, headers=h)
            r = conn.getresponse()
            return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        finally:
            conn.close()

    def stop(self) -> int:
        """SIGTERM; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("nb serve did not stop within 30 s of SIGTERM") from None
        err = self.proc.stderr.read() if self.proc.stderr else ""
        self.stderr.append(err)
        return rc


def start_server(root: Path, *names: str, env: dict | None = None, args: tuple[str, ...] = ()) -> Server:
    """Start ``nb serve NAMES --root ROOT --port 0`` and wait for its address line."""
    proc = subprocess.Popen([NB, "serve", *names, "--root", str(root), "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    assert proc.stdout is not None
    ready, _w, _x = select.select([proc.stdout], [], [], START_S)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("nb serve: http://"):
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"nb serve printed {line!r} {out!r}; stderr: {err[-2000:]}")
    return Server(line.split("nb serve: ", 1)[1].strip(), proc)


@contextlib.contextmanager
def served(root: Path, *names: str, env: dict | None = None, args: tuple[str, ...] = ()) -> Iterator[Server]:
    """A running server for the ``with`` block; it must exit 0 on SIGTERM at the end."""
    server = start_server(root, *names, env=env, args=args)
    try:
        yield server
    finally:
        rc = server.stop()
    assert rc == 0, f"nb serve exited {rc} on SIGTERM; stderr: {server.stderr[-1][-2000:]}"
