"""A loopback model server for the tests: stdlib `http.server` on 127.0.0.1 speaking the OpenAI
Chat Completions (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`)
wire formats, recording every request. No SDK is patched: the real SDKs talk HTTP to it.

Replies come from a `Script`: a function of the parsed request body (stateless, so runs on
asyncio, trio and direct get the same answers), returning a `Canned` reply: the text, the
finish/stop reason, an HTTP status, a delay, a raw body, usage fields to send verbatim, extra
response headers, a dropped connection, or (Chat Completions) a custom tool call.

A provider's behaviour at scale is configured on the server (`serve(..., latency=, rps=,
faults=)`): a latency added to every answered request; a requests-per-second limit (a sliding
one-second window of answered requests) beyond which a request is answered 429 with
`Retry-After` (whole seconds, rounded up) and `retry-after-ms`; and `Faults` that answer a
seeded share of the requests with HTTP 500 or drop the connection without an answer. Every
request is recorded with what it got (`Recorded.status`: the HTTP status, or `DROPPED`), its
arrival time and the tokens of its answer, so a test can count calls lost and duplicated.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DROPPED = 0
"""`Recorded.status` of a request whose connection the server dropped without an answer."""


@dataclass(frozen=True)
class Canned:
    text: str = "PASS"
    finish: str | None = None  # None: "stop" / "end_turn"
    status: int = 200
    delay: float = 0.0
    body: bytes | None = None  # sent verbatim (a malformed body)
    usage: dict[str, Any] | None = None  # sent verbatim instead of the default usage
    thinking: str | None = None  # Anthropic: a thinking block before the text
    reasoning: str | None = None  # OpenAI-compatible: the message's separate `reasoning_content`
    refusal: str | None = None  # OpenAI: `message.refusal` (content null); Anthropic: stop_reason refusal
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers (e.g. Retry-After)
    drop: bool = False  # close the connection without an answer
    tool_input: str | None = None  # OpenAI: a custom tool call with this input (content: text or null)
    tool_name: str = "kestrel_reply"


Script = Callable[[str, dict[str, Any]], Canned]


@dataclass
class Recorded:
    """One request: `status` is what it got (DROPPED: no answer), `at` its arrival
    (time.monotonic), `tokens` the usage total of a 200 answer, `raw` the body's bytes."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 200
    at: float = 0.0
    tokens: int = 0
    raw: bytes = b""


@dataclass(frozen=True)
class Faults:
    """A seeded share of the requests answered HTTP `status` (`error_rate`) or dropped
    without an answer (`drop_rate`), drawn in arrival order."""

    error_rate: float = 0.0
    drop_rate: float = 0.0
    status: int = 500
    seed: int = 0


def body_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def user_turns(body: dict[str, Any]) -> list[str]:
    """The user messages' text of a request, in order (either wire format)."""
    out = []
    for m in body.get("messages", []):
        if m.get("role") != "user":
            continue
        c = m.get("content")
        out.append(c if isinstance(c, str) else "".join(b.get("text", "") for b in c))
    return out


def by_iteration(*replies: str | Canned) -> Script:
    """Reply k (0-based) to the k-th user message of the conversation; PASS past the end."""

    def script(path: str, body: dict[str, Any]) -> Canned:
        k = len(user_turns(body)) - 1
        r = replies[k] if k < len(replies) else "PASS"
        return r if isinstance(r, Canned) else Canned(r)

    return script


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _total(usage: Any, *keys: str) -> int:
    if not isinstance(usage, dict):
        return 0
    return sum(v for k in keys if isinstance(v := usage.get(k), int))


def openai_body(model: str, c: Canned, prompt: str) -> dict[str, Any]:
    out = _tokens(c.text + (c.tool_input or ""))
    usage = c.usage if c.usage is not None else {
        "prompt_tokens": _tokens(prompt), "completion_tokens": out,
        "total_tokens": _tokens(prompt) + out,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    message: dict[str, Any] = {"role": "assistant", "content": None if c.refusal is not None else c.text}
    if c.reasoning is not None:
        message["reasoning_content"] = c.reasoning
    if c.refusal is not None:
        message["refusal"] = c.refusal
    if c.tool_input is not None:
        message["content"] = c.text or None
        message["tool_calls"] = [{"id": "call_loopback", "type": "custom",
                                  "custom": {"name": c.tool_name, "input": c.tool_input}}]
    return {
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": c.finish or ("tool_calls" if c.tool_input is not None else "stop"),
                     "message": message}],
        "usage": usage,
    }


def anthropic_body(model: str, c: Canned, prompt: str) -> dict[str, Any]:
    usage = c.usage if c.usage is not None else {
        "input_tokens": _tokens(prompt), "output_tokens": _tokens(c.text),
        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
    }
    content: list[dict[str, Any]] = []
    if c.thinking is not None:
        content.append({"type": "thinking", "thinking": c.thinking, "signature": "sig"})
    content.append({"type": "text", "text": c.refusal if c.refusal is not None else c.text})
    stop = "refusal" if c.refusal is not None else c.finish or "end_turn"
    return {
        "id": "msg_loopback", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": usage,
    }


@dataclass
class ModelServer:
    script: Script
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0  # requests being answered now (arrived, not yet answered)
    most_in_flight: int = 0  # the most at once so far

    def recorded(self) -> list[Recorded]:
        with self.lock:
            return list(self.requests)

    def count(self, status: int | None = None) -> int:
        """The requests received (`status`: only those that got it; DROPPED: dropped)."""
        return sum(1 for r in self.recorded() if status is None or r.status == status)

    def answered(self) -> int:
        return self.count(200)

    def duplicated(self) -> int:
        """200 answers to a request body already answered 200 (the same call made twice)."""
        seen = Counter(body_digest(r.body) for r in self.recorded() if r.status == 200)
        return sum(n - 1 for n in seen.values())

    def most_in_window(self, window_s: float, *, tokens: bool = False) -> int:
        """The most answered requests (or their tokens) whose arrivals fall within any
        half-open window of `window_s` seconds."""
        ok = sorted((r.at, r.tokens) for r in self.recorded() if r.status == 200)
        best = total = lo = 0
        for at, n in ok:
            total += n if tokens else 1
            while ok[lo][0] <= at - window_s:
                total -= ok[lo][1] if tokens else 1
                lo += 1
            best = max(best, total)
        return best

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path_end: str = "") -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith(path_end)]


class _Window:
    """The sliding one-second window of answered requests (the `rps` limit)."""

    def __init__(self, rps: float) -> None:
        self.rps = rps
        self.arrivals: deque[float] = deque()

    def admit(self, now: float) -> float | None:
        """None when a request arriving at `now` is within the limit (it is counted), else
        the seconds until a slot frees."""
        while self.arrivals and self.arrivals[0] <= now - 1.0:
            self.arrivals.popleft()
        if len(self.arrivals) < self.rps:
            self.arrivals.append(now)
            return None
        return self.arrivals[0] + 1.0 - now


@contextmanager
def serve(
    script: Script,
    *,
    latency: float = 0.0,
    rps: float | None = None,
    faults: Faults | None = None,
) -> Iterator[ModelServer]:
    """Run a `ModelServer` on 127.0.0.1 (a free port) for the block (see the module
    docstring for `latency`, `rps` and `faults`)."""
    server = ModelServer(script)
    lock = server.lock
    window = None if rps is None else _Window(rps)
    draw = random.Random(faults.seed if faults is not None else 0)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _drop(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _reject(self, status: int, headers: dict[str, str]) -> None:
            payload = json.dumps({"error": {"type": "rate_limit_error" if status == 429 else "server_error",
                                            "message": f"loopback {status}"}}).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            body = json.loads(raw or b"{}")
            rec = Recorded(self.path, dict(self.headers), body, at=time.monotonic(), raw=raw)
            with lock:
                server.requests.append(rec)
                wait = None if window is None else window.admit(rec.at)
                fault = None
                if wait is None and faults is not None:
                    x = draw.random()
                    fault = ("drop" if x < faults.drop_rate
                             else "error" if x < faults.drop_rate + faults.error_rate else None)
                if wait is not None:
                    rec.status = 429
                elif fault == "drop":
                    rec.status = DROPPED
                elif fault == "error" and faults is not None:
                    rec.status = faults.status
            if wait is not None:
                self._reject(429, {"retry-after": str(max(1, math.ceil(wait))),
                                   "retry-after-ms": f"{wait * 1000.0:.0f}"})
                return
            if fault == "drop":
                self._drop()
                return
            if fault == "error" and faults is not None:
                self._reject(faults.status, {})
                return
            canned = server.script(self.path, body)
            if latency or canned.delay:
                with lock:
                    server.in_flight += 1
                    server.most_in_flight = max(server.most_in_flight, server.in_flight)
                try:
                    time.sleep(latency + canned.delay)
                finally:
                    with lock:
                        server.in_flight -= 1
            with lock:
                rec.status = DROPPED if canned.drop else canned.status
            if canned.drop:
                self._drop()
                return
            prompt = json.dumps(body.get("messages", [])) + json.dumps(body.get("system", ""))
            if canned.body is not None:
                payload = canned.body
            elif canned.status != 200:
                payload = json.dumps({"error": {"type": "server_error", "message": "loopback failure"}}).encode()
            elif self.path.endswith("/chat/completions"):
                answer = openai_body(body.get("model", ""), canned, prompt)
                rec.tokens = _total(answer["usage"], "prompt_tokens", "completion_tokens")
                payload = json.dumps(answer).encode()
            elif self.path.endswith("/messages"):
                answer = anthropic_body(body.get("model", ""), canned, prompt)
                rec.tokens = _total(answer["usage"], "input_tokens", "output_tokens", "cache_read_input_tokens",
                                    "cache_creation_input_tokens")
                payload = json.dumps(answer).encode()
            else:
                with lock:
                    rec.status = 404
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            try:
                self.send_response(canned.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for k, v in canned.headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    server.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
