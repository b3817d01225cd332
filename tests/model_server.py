"""A loopback model server for the tests: stdlib `http.server` on 127.0.0.1 speaking the OpenAI
Chat Completions (`POST /v1/chat/completions`) and Anthropic Messages (`POST /v1/messages`)
wire formats, recording every request. No SDK is patched: the real SDKs talk HTTP to it.

Replies come from a `Script`: a function of the parsed request body (stateless, so runs on
asyncio, trio and direct get the same answers), returning a `Canned` reply: the text, the
finish/stop reason, an HTTP status, a delay, a raw body, or usage fields to send verbatim.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Canned:
    text: str = "PASS"
    finish: str | None = None  # None: "stop" / "end_turn"
    status: int = 200
    delay: float = 0.0
    body: bytes | None = None  # sent verbatim (a malformed body)
    usage: dict[str, Any] | None = None  # sent verbatim instead of the default usage
    thinking: str | None = None  # Anthropic: a thinking block before the text


Script = Callable[[str, dict[str, Any]], Canned]


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


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


def openai_body(model: str, c: Canned, prompt: str) -> dict[str, Any]:
    usage = c.usage if c.usage is not None else {
        "prompt_tokens": _tokens(prompt), "completion_tokens": _tokens(c.text),
        "total_tokens": _tokens(prompt) + _tokens(c.text),
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    return {
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": c.finish or "stop",
                     "message": {"role": "assistant", "content": c.text}}],
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
    content.append({"type": "text", "text": c.text})
    return {
        "id": "msg_loopback", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": c.finish or "end_turn", "stop_sequence": None,
        "usage": usage,
    }


@dataclass
class ModelServer:
    script: Script
    requests: list[Recorded] = field(default_factory=list)
    port: int = 0

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bodies(self, path_end: str = "") -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith(path_end)]


@contextmanager
def serve(script: Script) -> Iterator[ModelServer]:
    """Run a `ModelServer` on 127.0.0.1 (a free port) for the block."""
    server = ModelServer(script)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body in two writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            body = json.loads(raw or b"{}")
            with lock:
                server.requests.append(Recorded(self.path, dict(self.headers), body))
            canned = server.script(self.path, body)
            if canned.delay:
                time.sleep(canned.delay)
            prompt = json.dumps(body.get("messages", [])) + json.dumps(body.get("system", ""))
            if canned.body is not None:
                payload = canned.body
            elif canned.status != 200:
                payload = json.dumps({"error": {"type": "server_error", "message": "loopback failure"}}).encode()
            elif self.path.endswith("/chat/completions"):
                payload = json.dumps(openai_body(body.get("model", ""), canned, prompt)).encode()
            elif self.path.endswith("/messages"):
                payload = json.dumps(anthropic_body(body.get("model", ""), canned, prompt)).encode()
            else:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            try:
                self.send_response(canned.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
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
