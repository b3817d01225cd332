"""The HTTP front door of `kestrel mcp --http`: who may call, and how long a request may take.

`FrontDoor` is ASGI middleware in front of the SDK's streamable HTTP app. For every request:
- at most `max_requests` are served at once; one more is answered 503 at once;
- it must carry `Authorization: Bearer TOKEN` with one of the server's tokens (compared in
  constant time), else 401 before its body is read; the token's label is the client identity
  the call's sessions belong to (`kestrel.service.mcp.server.CLIENT_KEY` in the ASGI scope);
- its body must arrive whole within `body_seconds` (a body trickled slower is cut off: 408,
  connection closed) and be at most `max_body_bytes` (413);
- when the client hangs up before the response is complete, the event under
  `DISCONNECTED_KEY` is set: the call running for it is cancelled (and its session closed).
Request headers that never complete, and idle connections, are hypercorn's to close after its
keep-alive timeout (`ServiceLimits.idle_seconds`).

Tokens: `load_tokens(path)` reads a token file (one token per line, `#` comments; owner-only,
refused when others may read it), `create_token_file(path)` writes a new one (0600, never
through a symlink), `new_token()` makes one (256 random bits).
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import msgspec

from kestrel.service.host.limits import DEFAULT_LIMITS, ServiceLimits
from kestrel.service.mcp.server import CLIENT_KEY, DISCONNECTED_KEY

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MIN_TOKEN_CHARS = 32


class TokenError(ValueError):
    """A token file that cannot be used (the text says why and what to do)."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _check_token(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN_CHARS or not all(33 <= ord(c) < 127 for c in token):
        raise TokenError(f"{where}: a token is at least {MIN_TOKEN_CHARS} printable characters without blanks")
    return token


def load_tokens(path: str | Path) -> dict[str, str]:
    """The tokens of the file at `path` (token -> its label, `token N` by line order). The file
    must be a regular file of this user that no one else can read or write."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise TokenError(f"--token-file {p}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"--token-file {p}: not a regular file")
        if st.st_uid != os.getuid():
            raise TokenError(f"--token-file {p}: belongs to uid {st.st_uid}, not to you")
        if st.st_mode & 0o077:
            raise TokenError(f"--token-file {p}: other users can read or write it (mode {st.st_mode & 0o777:04o}): "
                             "chmod 600 it")
        raw = f.read(1 << 16)
    tokens: dict[str, str] = {}
    for n, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        text = line.strip()
        if text and not text.startswith("#"):
            tokens[_check_token(text, f"--token-file {p}, line {n}")] = f"token {len(tokens) + 1}"
    if not tokens:
        raise TokenError(f"--token-file {p}: holds no token (one per line)")
    return tokens


def create_token_file(path: str | Path) -> str:
    """Write a new token to a new file at `path` (0600, refused when the path exists or is a
    symlink); returns the token."""
    token = new_token()
    try:
        fd = os.open(Path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise TokenError(f"--token-file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"# the bearer token of kestrel mcp --http (send: Authorization: Bearer TOKEN)\n{token}\n")
    return token


async def _respond(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class FrontDoor:
    def __init__(self, app: App, tokens: dict[str, str], limits: ServiceLimits = DEFAULT_LIMITS) -> None:
        if not tokens:
            raise ValueError("the HTTP server needs at least one token")
        self.app = app
        self.tokens = tokens
        self.limits = limits
        self.active = 0

    def identify(self, scope: Scope) -> str | None:
        """The label of the request's bearer token, None when it has none of ours."""
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                given = value
        scheme, _, token = given.decode("latin-1").partition(" ")
        if scheme.lower() != "bearer":
            return None
        found = None
        candidate = token.strip().encode()
        for known, label in self.tokens.items():  # every token compared: the time tells nothing
            if hmac.compare_digest(candidate, known.encode()):
                found = label
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # websockets: not served
            return
        if self.active >= self.limits.max_requests:
            await _respond(send, 503, f"the server is serving {self.active} requests, its limit: try again")
            return
        self.active += 1
        try:
            await self._serve(scope, receive, send)
        finally:
            self.active -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = self.identify(scope)
        if client is None:
            await _respond(send, 401, "missing or unknown bearer token: send Authorization: Bearer TOKEN",
                           [(b"www-authenticate", b'Bearer realm="kestrel"')])
            return
        lim = self.limits
        for name, value in scope.get("headers", []):
            if name.lower() == b"content-length" and value.isdigit() and int(value) > lim.max_body_bytes:
                await _respond(send, 413, f"request body over {lim.max_body_bytes} bytes")
                return
        chunks: list[bytes] = []
        size = 0
        complete = False
        with anyio.move_on_after(lim.body_seconds):
            while not complete:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > lim.max_body_bytes:
                    await _respond(send, 413, f"request body over {lim.max_body_bytes} bytes")
                    return
                chunks.append(chunk)
                complete = not message.get("more_body", False)
        if not complete:
            await _respond(send, 408, f"request body not sent within {lim.body_seconds:g} s")
            return
        body = b"".join(chunks)
        gone = anyio.Event()
        replayed = False

        async def app_receive() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    gone.set()
                    return

        inner = dict(scope)
        inner[CLIENT_KEY] = client
        inner[DISCONNECTED_KEY] = gone
        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            try:
                await self.app(inner, app_receive, send)
            except Exception as exc:  # kept out of the task group (no exception group): re-raised below
                failure = exc
            tg.cancel_scope.cancel()
        if failure is not None:
            raise failure


__all__ = ["MIN_TOKEN_CHARS", "FrontDoor", "TokenError", "create_token_file", "load_tokens", "new_token"]
