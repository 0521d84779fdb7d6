"""A small streaming OpenAI-compatible chat server on 127.0.0.1, for running the real genai-bench.

It answers ``POST /v1/chat/completions`` with chunked server-sent events, the way vLLM does (a
close-delimited body would make any client measure TTFT as the whole request), one token per
event, then a usage event and ``[DONE]``. Failures are injected by request number.

Like vLLM 0.19 behind the DPD router it also checks what a real server would reject or change: a
``model`` other than the served name gets vLLM's 404, and without ``ignore_eos`` the answer stops
early, as a model reaching its end-of-sequence token does. It counts what the router and the
decoder would count, and serves it as Prometheus text: the router's ``dpd_routing_*_total``
(``GET /router/metrics``; names from the HyperPod inference dashboard) decided by its length rule
against ``routing_threshold``, and the decoder's ``vllm:prompt_tokens_by_source_total``
(``GET /decoder/metrics``; vLLM 0.19 ``vllm/v1/metrics/loggers.py``), where a disaggregated
request's prompt arrives as ``external_kv_transfer`` unless ``kv_transfer`` is off. The decoder (for
the aggregated twin: its one engine) also serves vLLM's ``vllm:time_to_first_token_seconds`` histogram,
from the same clock as the router's (with ``engine_ttft``), and
``vllm:request_success_total{finished_reason}`` (``length`` for an answer made whole; nothing for one
its client cut off, as vLLM 0.19's ``OutputProcessor.abort_requests`` counts none, ``loggers.py:645``),
and the router logs its documented ``Conditional routing: estimated_tokens=E, threshold=T,
disaggregate=...`` line per request (:attr:`_Server.router_log`).
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

from hyperpod_dpd.observability.metrics import TTFT, derived_buckets


@dataclass(frozen=True, kw_only=True)
class Behaviour:
    """How the server answers.

    :param first_token_s: delay before the first token. :param per_token_s: delay between tokens.
    :param fail_every: every n-th request gets ``fail_status`` (0: none). :param fail_status: HTTP status.
    :param fail_all: every request fails with ``fail_status``.
    :param max_output_tokens: stop early, as a server that ignores ``ignore_eos`` would (0: honour max_tokens).
    :param served_model: the only ``model`` accepted (vLLM serves the mount path unless --served-model-name).
    :param eos_after: tokens answered when the request lacks ``ignore_eos``.
    :param routing_threshold: prompts estimated at this many tokens or more are disaggregated; the estimate
        is the larger of the word count and characters / 4 (the router's two observed rules).
    :param kv_transfer: a disaggregated prompt reaches the decoder as external KV tokens (off: recomputed).
    :param ttft_buckets: the router TTFT histogram's finite bucket bounds in seconds: by default vLLM 0.19's own
        TTFT buckets (the router's are not published); ``()`` serves ``+Inf`` only, a histogram that cannot place
        any quantile.
    :param prefix_block: the decoder's prefix cache, in blocks of this many words: a prompt's leading whole
        blocks already seen count as ``vllm:prefix_cache_hits_total`` (0: no prefix cache series).
    :param estimate_scale: the router's estimate is this fraction of the rule above, as a router whose
        length rule counts a prompt shorter than bench's shipped lengths assume (characters / 4 of a
        tokenizer whose tokens are shorter than Llama 3's).
    :param engine_ttft: the decoder serves ``vllm:time_to_first_token_seconds``, bucketed by ``ttft_buckets``
        (off by default, so the recorded DPD runs' TTFT decomposition stays what their tests quote).
    :param stage_split: the shares of each request's TTFT (request in to first token, the router's clock) that
        the stub reports as its stages, in the order of :data:`STAGE_SERIES`: the prefiller's queue, its
        prefill step (the KV put inside it), the KV put, the decoder's queue and its first step; served as
        those histograms' ``_sum``/``_count`` (``GET /prefiller/metrics`` and the decoder's), the decoder's
        TTFT as its two stages. A split the test sets, not a model's: (none: no stage series).
    :param kv_fail_every: every n-th disaggregated request's KV transfer fails and the decoder recomputes its prompt
        (``local_compute``, as vLLM 0.19 books it under ``kv_load_failure_policy=recompute``; 0: none fails).
    :param restart_at: the router and the decoder restart just before routing the n-th request: every counter and
        histogram they serve starts again from zero (0: no restart).
    :param restart_in_second_level: as ``restart_at``, at the n-th request after the first level's quiet window
        (:meth:`_Server.quiet`): how many requests a client sends in a level depends on its speed, so a fixed
        index can fall in the first level on a fast machine (0: no restart).
    :param local_cache_hits: a disaggregated prompt's leading blocks the decoder's prefix cache (``prefix_block``)
        already holds count as ``local_cache_hit`` and only the rest arrives as ``external_kv_transfer``, as vLLM 0.19
        books them (``vllm/v1/metrics/stats.py`` l.282-294: the local hit is counted before the connector's tokens);
        off: every disaggregated prompt token arrives as external KV.
    :param held_every: every n-th request waits ``held_s`` before the router's clock starts, as a request held in
        the client or the network would: the client's TTFT holds it, the server's does not (0: none).
    """

    first_token_s: float = 0.02
    per_token_s: float = 0.002
    fail_every: int = 0
    fail_status: int = 500
    fail_all: bool = False
    max_output_tokens: int = 0
    served_model: str = "/opt/ml/model"
    eos_after: int = 3
    routing_threshold: int = 32
    kv_transfer: bool = True
    ttft_buckets: tuple[float, ...] = derived_buckets(TTFT.name)
    prefix_block: int = 0
    estimate_scale: float = 1.0
    engine_ttft: bool = False
    stage_split: tuple[float, float, float, float, float] | tuple[()] = ()
    kv_fail_every: int = 0
    restart_at: int = 0
    restart_in_second_level: int = 0
    local_cache_hits: bool = False
    held_every: int = 0
    held_s: float = 0.0


# (role, family) of each share of Behaviour.stage_split (names: hyperpod_dpd.observability.metrics)
STAGE_SERIES = (("prefiller", "vllm:request_queue_time_seconds"), ("prefiller", "vllm:request_prefill_time_seconds"),
                ("prefiller", "lmcache:store_put_time"), ("decoder", "vllm:request_queue_time_seconds"),
                ("decoder", "vllm:request_prefill_time_seconds"))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test output is genai-bench's."""

    def handle(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()

    def do_GET(self) -> None:
        text = self.server.metrics(self.path.rstrip("/"))
        if text is None:
            self._error(404, f"no route {self.path}")
            return
        payload = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

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
        if body.get("model") != behaviour.served_model:  # vLLM's answer to an unknown model
            self._error(404, f"The model `{body.get('model')}` does not exist.")
            return
        wanted = int(body.get("max_tokens") or 16)
        tokens = min(wanted, behaviour.max_output_tokens) if behaviour.max_output_tokens else wanted
        if body.get("ignore_eos") is not True:
            tokens = min(tokens, behaviour.eos_after)
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        if behaviour.held_every and number % behaviour.held_every == 0:
            time.sleep(behaviour.held_s)
        routed = self.server.route(prompt)
        received = time.perf_counter()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(behaviour.first_token_s)
        # a client that goes away before the last token is counted under no finished_reason (vLLM counts none)
        self._stream(body, number, tokens, received=received, prompt_tokens=len(prompt.split()), routed=routed)

    def _stream(self, body: dict[str, Any], number: int, tokens: int, *, received: float, prompt_tokens: int,
                routed: int) -> None:
        behaviour = self.server.behaviour
        for index in range(tokens):
            if index:
                time.sleep(behaviour.per_token_s)
            self._event({"id": f"r{number}", "object": "chat.completion.chunk", "model": body.get("model"),
                         "choices": [{"index": 0, "delta": {"content": "word "}, "finish_reason": None}]})
            self.server.generated(routed, received)
            if not index:  # the router's TTFT: request in, first token out
                self.server.first_token(time.perf_counter() - received)
        # vLLM counts a request finished when its last token is made, read or not
        self.server.finished("length")
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens,
                 "total_tokens": prompt_tokens + tokens}
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
        self.restart_index = behaviour.restart_at  # the request before which the router and decoder restart
        self.requests = 0
        self._lock = threading.Lock()

        self.counters = {"disaggregated": 0, "local": 0, "external": 0, "computed": 0, "prompt": 0, "generated": 0,
                         "cache_queries": 0, "cache_hits": 0, "hit": 0}
        self.ttft_sum, self.ttft_count = 0.0, 0
        self.ttfts: list[float] = []  # the router's TTFT of every request, in seconds
        self.blocks: set[tuple[str, ...]] = set()  # every prefix of whole blocks the decoder has cached
        self.prompts: list[str] = []  # every routed prompt, in arrival order
        self.estimates: list[int] = []  # the router's estimate of every routed prompt, in arrival order
        self.router_log: list[str] = []  # the router's routing line of every routed prompt
        self.finish_reasons: dict[str, int] = {}  # vllm:request_success_total by finished_reason
        self.stage_sums = [0.0] * len(behaviour.stage_split)  # seconds, per share of Behaviour.stage_split
        # by routed prompt (the index of ``prompts``): when its request was read, when its last token was streamed
        # and how many it streamed, on this server's clock (time.perf_counter)
        self.spans: dict[int, tuple[float, float, int]] = {}
        self._served_from = 0  # the first of :attr:`ttfts` the histograms count (a restart starts them anew)

    def finished(self, reason: str) -> None:
        """One request finished by the engine (``length``: made whole)."""
        with self._lock:
            self.finish_reasons[reason] = self.finish_reasons.get(reason, 0) + 1

    def first_token(self, seconds: float) -> None:
        with self._lock:
            self.ttft_sum += seconds
            self.ttft_count += 1
            self.ttfts.append(seconds)
            for index, share in enumerate(self.behaviour.stage_split):
                self.stage_sums[index] += share * seconds

    def generated(self, routed: int, received: float) -> None:
        """One output token streamed (vLLM's generation_tokens_total counts it when generated) for the routed
        prompt ``routed``, whose request was read at ``received``."""
        now = time.perf_counter()
        with self._lock:
            self.counters["generated"] += 1
            self.spans[routed] = (received, now, self.spans.get(routed, (received, now, 0))[2] + 1)

    def next_number(self) -> int:
        with self._lock:
            self.requests += 1
            return self.requests

    def quiet(self, window: int) -> None:
        """The client's script says level ``window`` is done and nothing is in flight."""
        if window == 1 and self.behaviour.restart_in_second_level:
            with self._lock:
                self.restart_index = len(self.prompts) + self.behaviour.restart_in_second_level

    def route(self, prompt: str) -> int:
        """Count the router's decision and the decoder's prompt tokens by source for one request; its index in
        :attr:`prompts`."""
        words = len(prompt.split())
        estimate = int(max(words, len(prompt) // 4) * self.behaviour.estimate_scale)
        threshold = self.behaviour.routing_threshold
        with self._lock:
            if self.restart_index and len(self.prompts) + 1 == self.restart_index:
                self._restart()
            self.prompts.append(prompt)
            self.estimates.append(estimate)
            self.router_log.append(f"INFO Conditional routing: estimated_tokens={estimate}, threshold={threshold}, "
                                   f"disaggregate={estimate >= threshold}")
            self.counters["prompt"] += words
            hits = self._cache(prompt.split())
            if estimate >= threshold:
                self.counters["disaggregated"] += 1
                every = self.behaviour.kv_fail_every
                failed = bool(every) and self.counters["disaggregated"] % every == 0
                hit = hits if self.behaviour.local_cache_hits else 0
                self.counters["hit"] += hit
                self.counters["external" if self.behaviour.kv_transfer and not failed else "computed"] += words - hit
            else:
                self.counters["local"] += 1
                self.counters["computed"] += words
            return len(self.prompts) - 1

    def _restart(self) -> None:
        """The router and the decoder start again: every series they serve from zero (the records are kept)."""
        self.counters = dict.fromkeys(self.counters, 0)
        self.ttft_sum, self.ttft_count, self._served_from = 0.0, 0, len(self.ttfts)
        self.finish_reasons = {}
        self.stage_sums = [0.0] * len(self.stage_sums)

    def _cache(self, words: list[str]) -> int:
        """vLLM's prefix cache counters: every prompt token is queried, the leading whole blocks cached hit; the
        prompt's hit tokens."""
        size = self.behaviour.prefix_block
        if not size:
            return 0
        self.counters["cache_queries"] += len(words)
        hits = 0
        for end in range(size, len(words) + 1, size):
            key = tuple(words[:end])
            if key in self.blocks:
                hits += size
            self.blocks.add(key)
        self.counters["cache_hits"] += hits
        return hits

    def metrics(self, path: str) -> str | None:
        with self._lock:
            c = dict(self.counters)
            ttft_sum, ttft_count, ttfts = self.ttft_sum, self.ttft_count, self.ttfts[self._served_from:]
            reasons = dict(self.finish_reasons)
            sums = list(self.stage_sums)
        buckets = "".join(f'dpd_e2e_ttft_seconds_bucket{{le="{bound!r}"}} {sum(t <= bound for t in ttfts)}.0\n'
                          for bound in self.behaviour.ttft_buckets)
        labels = 'engine="0",model_name="/opt/ml/model"'
        engine_ttft = "" if not self.behaviour.engine_ttft else (
            "# TYPE vllm:time_to_first_token_seconds histogram\n" + "".join(
                f'vllm:time_to_first_token_seconds_bucket{{{labels},le="{bound!r}"}} '
                f"{sum(t <= bound for t in ttfts)}.0\n" for bound in self.behaviour.ttft_buckets)
            + f'vllm:time_to_first_token_seconds_bucket{{{labels},le="+Inf"}} {ttft_count}.0\n'
            f"vllm:time_to_first_token_seconds_sum{{{labels}}} {ttft_sum!r}\n"
            f"vllm:time_to_first_token_seconds_count{{{labels}}} {ttft_count}.0\n")
        success = "".join(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {count}.0\n'
                          for reason, count in sorted(reasons.items()))
        stages = {role: "".join(f"{family}_sum {total!r}\n{family}_count {ttft_count}.0\n"
                                for (owner, family), total in (zip(STAGE_SERIES, sums, strict=True) if sums else ())
                                if owner == role) for role in ("prefiller", "decoder")}
        if self.behaviour.stage_split:  # the decoder's own TTFT: its queue and first step
            decoder_ttft = sum(sums[3:])
            stages["decoder"] += (f"vllm:time_to_first_token_seconds_sum {decoder_ttft!r}\n"
                                  f"vllm:time_to_first_token_seconds_count {ttft_count}.0\n")
        if path == "/prefiller/metrics":
            return stages["prefiller"] or None
        cache = "" if not self.behaviour.prefix_block else (
            f'vllm:prefix_cache_queries_total{{engine="0",model_name="/opt/ml/model"}} {c["cache_queries"]}.0\n'
            f'vllm:prefix_cache_hits_total{{engine="0",model_name="/opt/ml/model"}} {c["cache_hits"]}.0\n')
        if path == "/router/metrics":
            return "".join(f"# TYPE dpd_routing_{name}_total counter\ndpd_routing_{name}_total {value}.0\n"
                           for name, value in (("disaggregated", c["disaggregated"]), ("local", c["local"]),
                                               ("fallback", 0))) + (
                f"# TYPE dpd_e2e_ttft_seconds histogram\n{buckets}"
                f'dpd_e2e_ttft_seconds_bucket{{le="+Inf"}} {ttft_count}.0\n'
                f"dpd_e2e_ttft_seconds_sum {ttft_sum!r}\ndpd_e2e_ttft_seconds_count {ttft_count}.0\n")
        if path == "/decoder/metrics":
            return ("# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.\n"
                    "# TYPE vllm:prompt_tokens_by_source_total counter\n"
                    f'vllm:prompt_tokens_by_source_total{{{labels},source="local_compute"}} {c["computed"]}.0\n'
                    f'vllm:prompt_tokens_by_source_total{{{labels},source="local_cache_hit"}} {c["hit"]}.0\n'
                    f'vllm:prompt_tokens_by_source_total{{{labels},source="external_kv_transfer"}} {c["external"]}.0\n'
                    f'vllm:prompt_tokens_total{{{labels}}} {c["prompt"]}.0\n'
                    f'vllm:generation_tokens_total{{{labels}}} {c["generated"]}.0\n{cache}{engine_ttft}{success}'
                    f'{stages["decoder"]}')
        return None


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
