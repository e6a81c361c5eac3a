"""The streamable-HTTP transport: loopback by default, Origin/Host validated (DNS-rebinding
protection), and a bearer token that is required to bind any other address.

On loopback the SDK checks Host and Origin (a page in a browser on this machine cannot reach the server
through a rebinding DNS name). Bound to any other address the token is the protection (a rebinding page
cannot send it), so every Host the address is reached by is accepted (a machine name, a DNS alias, a
public address) and only browsers' Origins are checked. The token is compared in constant time on every
request; a missing or wrong one gets 401 with ``WWW-Authenticate: Bearer``. Origins must match the
allowed ones (loopback ones by default, plus ``--allow-origin``); requests without an Origin (ordinary
MCP clients) pass.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(value: str | None) -> str | None:
    """A token from the environment or a file's first line; at least 16 characters."""
    if value is None:
        return None
    token = value.strip()
    if len(token) < 16:
        raise ValueError("the HTTP bearer token must be at least 16 characters (e.g. `openssl rand -hex 32`)")
    return token


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].strip()
        if not hmac.compare_digest(given, self._token):
            body = (b'{"error": "unauthorized: send Authorization: Bearer <token> (the token the server was '
                    b'started with)"}')
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def _matches(value: str, allowed: list[str]) -> bool:
    """``value`` is one of ``allowed``, where ``name:*`` stands for any port (the SDK's rule)."""
    return any(value == a or (a.endswith(":*") and value.startswith(a[:-1])) for a in allowed)


class OriginCheck:
    """ASGI middleware: a request that carries an Origin (a browser) must come from an allowed one."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            origin = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"origin"), "")
            if origin and not _matches(origin, self.allowed):
                body = b"Invalid Origin header"
                headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
                await send({"type": "http.response.start", "status": 403, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def build_app(server: Any, *, host: str, port: int, path: str, token: str | None, allow_origins: list[str],
              allow_hosts: list[str]) -> Any:
    """The Starlette app of ``server`` with transport security and, when given, the bearer token. A
    non-loopback ``host`` needs a token."""
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *allow_origins]
    if is_loopback(host):
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"] + [h if ":" in h else f"{h}:*" for h in allow_hosts]
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                             allowed_origins=origins)
        app = server.streamable_http_app(streamable_http_path=path, transport_security=security, host=host)
        return BearerAuth(app, token) if token else app
    if token is None:
        raise ValueError(f"binding {host} needs a bearer token")
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # any Host: the token protects
    app = server.streamable_http_app(streamable_http_path=path, transport_security=security, host=host)
    return BearerAuth(OriginCheck(app, origins), token)


def listen_message(host: str, port: int, path: str, *, token: bool) -> str:
    """Where the server listens, for stderr at start."""
    name = f"[{host}]" if ":" in host else host
    url = f"http://{name}:{port}{path}"
    if host in ("0.0.0.0", "::"):
        url += f" (all interfaces, e.g. http://{socket.gethostname()}:{port}{path})"
    return f"serving MCP over HTTP at {url}" + ("; clients send Authorization: Bearer <token>" if token else "")
