"""A small streaming OpenAI-compatible chat server on 127.0.0.1, for running the real genai-bench.

It answers ``POST /v1/chat/completions`` with chunked server-sent events, the way vLLM does (a
close-delimited body would make any client measure TTFT as the whole request), one token per
event, then a usage event and ``[DONE]``. Failures are injected by request number.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Behaviour:
    """How the server answers.

    :param first_token_s: delay before the first token. :param per_token_s: delay between tokens.
    :param fail_every: every n-th request gets ``fail_status`` (0: none). :param fail_status: HTTP status.
    :param fail_all: every request fails with ``fail_status``.
    :param max_output_tokens: stop early, as a server that ignores ``ignore_eos`` would (0: honour max_tokens).
    """

    first_token_s: float = 0.02
    per_token_s: float = 0.002
    fail_every: int = 0
    fail_status: int = 500
    fail_all: bool = False
    max_output_tokens: int = 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test output is genai-bench's."""

    def handle(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def do_POST(self) -> None:
        # The client may stop reading: genai-bench ends a run mid-request.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        number = self.server.next_number()
        behaviour = self.server.behaviour
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}")
            return
        if behaviour.fail_all or (behaviour.fail_every and number % behaviour.fail_every == 0):
            self._error(behaviour.fail_status, f"injected failure of request {number}")
            return
        wanted = int(body.get("max_tokens") or 16)
        tokens = min(wanted, behaviour.max_output_tokens) if behaviour.max_output_tokens else wanted
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(behaviour.first_token_s)
        for index in range(tokens):
            if index:
                time.sleep(behaviour.per_token_s)
            self._event({"id": f"r{number}", "object": "chat.completion.chunk", "model": body.get("model"),
                         "choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}]})
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": tokens,
                 "total_tokens": len(prompt.split()) + tokens}
        self._event({"id": f"r{number}", "object": "chat.completion.chunk", "model": body.get("model"),
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}], "usage": usage})
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _event(self, data: dict[str, Any]) -> None:
        self._chunk(f"data: {json.dumps(data)}\n\n".encode())

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _error(self, status: int, message: str) -> None:
        payload = json.dumps({"error": {"message": message, "code": status}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default 5 resets connections at concurrency 32

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = behaviour
        self.requests = 0
        self._lock = threading.Lock()

    def next_number(self) -> int:
        with self._lock:
            self.requests += 1
            return self.requests


@contextmanager
def serving(behaviour: Behaviour) -> Iterator[_Server]:
    """The server, listening on a free port of 127.0.0.1 until the block ends."""
    server = _Server(behaviour)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
