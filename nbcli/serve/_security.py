"""Who may read what ``nb serve`` serves: the token, the headers of every answer.

One concern: an ASGI middleware (:class:`TokenGate`) in front of every route. A request
passes with the server's token given one of three ways: ``Authorization: Bearer TOKEN``
(scripts), the cookie the page sets (browsers), or ``?token=TOKEN`` in the URL (the link
``nb serve`` prints). Opening the page with ``?token=`` sets the cookie (HttpOnly,
SameSite=Strict, named after the port so two servers on one host keep theirs) and
redirects to the same address without the token, so it stays out of the address bar,
the history and any Referer. Everything else gets 401 and a one-line JSON error, no data.
Tokens are compared in constant time (:func:`hmac.compare_digest`).

Every answer, 401s included, carries a Content-Security-Policy of ``default-src 'self'``
(the page may load its own scripts and styles and nothing else; images are ``data:``),
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``, ``X-Frame-Options:
DENY``, and no CORS header: a page of another origin cannot read an answer.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The environment variable that sets the token instead of a random one.
TOKEN_ENV = "NB_SERVE_TOKEN"
#: The shortest token accepted from the environment (characters).
MIN_TOKEN_CHARS = 16

CSP = ("default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
       "frame-ancestors 'none'; form-action 'self'")
SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class TokenError(ValueError):
    """``NB_SERVE_TOKEN`` is set but unusable (too short, or characters a URL would change)."""


def make_token(env: MutableMapping[str, str] | None = None) -> str:
    """The server's token: ``$NB_SERVE_TOKEN`` when set, else 32 random URL-safe characters
    (:func:`secrets.token_urlsafe`, 192 bits).

    Raises:
        TokenError: the variable is set to fewer than :data:`MIN_TOKEN_CHARS` characters or
            to characters other than letters, digits, ``-``, ``_``, ``.`` and ``~``.
    """
    env = os.environ if env is None else env
    given = env.get(TOKEN_ENV)
    if given is None:
        return secrets.token_urlsafe(24)
    if len(given) < MIN_TOKEN_CHARS:
        raise TokenError(f"${TOKEN_ENV} has {len(given)} characters; use at least {MIN_TOKEN_CHARS}")
    if not all(c.isascii() and (c.isalnum() or c in "-_.~") for c in given):
        raise TokenError(f"${TOKEN_ENV} may hold only letters, digits, '-', '_', '.' and '~'")
    return given


def cookie_name(port: int) -> str:
    """The token cookie's name for a server on ``port`` (cookies are per host, not port)."""
    return f"nb_serve_{port}"


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers") or []}


class TokenGate:
    """ASGI middleware: answers nothing without the token; secures every answer's headers.

    Args:
        app: the application behind the gate.
        token: the server's token.
        port: the port served (names the cookie); set after binding to port 0 through
            :attr:`port`.
    """

    def __init__(self, app: ASGIApp, token: str, port: int = 0):
        self.app, self.token, self.port = app, token, port

    def given(self, scope: Scope) -> tuple[str | None, str | None]:
        """(token from the header or cookie, token from the query string) of a request."""
        h = _headers(scope)
        auth = h.get(b"authorization", b"").decode("latin-1")
        header = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if header is None and b"cookie" in h:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(h[b"cookie"].decode("latin-1"))
            except CookieError:
                pass
            morsel = jar.get(cookie_name(self.port))
            header = morsel.value if morsel is not None else None
        query = None
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
            if k == "token":
                query = v
        return header, query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [(k, v) for k, v in message["headers"]
                                      if k.lower() not in {h for h, _ in SECURITY_HEADERS}] + SECURITY_HEADERS
            await send(message)

        header, query = self.given(scope)
        if _same(header, self.token):
            await self.app(scope, receive, secured)
            return
        if _same(query, self.token) and scope["method"] in ("GET", "HEAD") and not scope["path"].startswith("/api/"):
            await self._set_cookie(scope, secured)  # the page: keep it, drop it from the address
            return
        await self._refuse(secured, "a token is required: open the address nb serve printed, or send "
                                    "'Authorization: Bearer TOKEN'" if header is None and query is None
                           else "wrong token")

    async def _set_cookie(self, scope: Scope, send: Send) -> None:
        rest = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
                if k != "token"]
        where = quote(scope["path"]) + ("?" + urlencode(rest) if rest else "")
        cookie = f"{cookie_name(self.port)}={self.token}; Path=/; HttpOnly; SameSite=Strict"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", where.encode("latin-1")), (b"set-cookie", cookie.encode()),
                                (b"cache-control", b"no-store"), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _refuse(send: Send, why: str) -> None:
        body = (json.dumps({"error": why}) + "\n").encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                (b"cache-control", b"no-store"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["CSP", "MIN_TOKEN_CHARS", "SECURITY_HEADERS", "TOKEN_ENV", "TokenError", "TokenGate", "cookie_name",
           "make_token"]
