"""An event simulation of DPD and aggregated vLLM written apart from the advisor's queueing model, as a truth.

It shares only the kernel step times (AIConfigurator's, as any simulation of these GPUs would) and differs
from :mod:`hyperpod_dpd.advisor.queueing` where a model can be wrong:

- service times are gamma-distributed (coefficient of variation ``cv``), not uniform jitter or exponential;
- engines batch continuously, step by step: a prefiller takes waiting prompts up to its token budget into one
  step (two 4,096-token prompts in an 8,192 budget), and a decoder admits arrivals at its next step boundary;
- the aggregated engine runs vLLM's chunked prefill: each step carries the decodes plus prompt chunks up to
  the budget, and lasts the chunk's prefill plus what the extra decodes add;
- DPD's first token comes from the decoder's first step after the KV transfer, which has its own spread.

Closed loop: ``concurrency`` clients, each sending its next request when the last one ends, as genai-bench does.
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WARM_UP = 0.2


@dataclass(frozen=True, kw_only=True)
class Kernels:
    """Step times in seconds: one prefill of ``n`` tokens, one decode step of ``b`` sequences."""

    prefill_s: Callable[[int], float]
    decode_s: Callable[[int], float]
    transfer_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Level:
    """What genai-bench would report at one concurrency: means over the requests after the warm-up."""

    concurrency: int
    ttft_s: float
    ttft_p90_s: float
    tpot_s: float
    e2e_s: float
    output_tokens_per_s: float


@dataclass
class _Req:
    start: float
    first: float = 0.0
    end: float = 0.0
    left: int = 0
    prompt_left: int = 0


@dataclass
class _Sim:
    kernels: Kernels
    osl: int
    isl: int
    cv: float
    rng: random.Random
    now: float = 0.0
    events: list[tuple[float, int, str, int, object]] = field(default_factory=list)
    seq: int = 0
    done: list[_Req] = field(default_factory=list)
    issued: int = 0
    total: int = 0

    def gamma(self, mean: float) -> float:
        if self.cv <= 0:
            return mean
        shape = 1 / (self.cv * self.cv)
        return self.rng.gammavariate(shape, mean / shape)

    def tick(self, req: _Req, running: list[_Req], send: Callable[[], None]) -> None:
        """One output token for ``req``; after its last, its client sends the next request (``send``)."""
        req.left -= 1
        if req.left == 0:
            req.end = self.now
            running.remove(req)
            self.done.append(req)
            if self.issued < self.total:
                self.issued += 1
                send()

    def at(self, when: float, kind: str, engine: int, payload: object = None) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, kind, engine, payload))


def _summary(done: list[_Req], *, concurrency: int, osl: int) -> Level:
    kept = sorted(done, key=lambda r: r.end)[int(len(done) * WARM_UP):]
    ttfts = sorted(r.first - r.start for r in kept)
    span = kept[-1].end - kept[0].end
    return Level(concurrency=concurrency, ttft_s=statistics.fmean(ttfts), ttft_p90_s=ttfts[int(0.9 * len(ttfts))],
                 tpot_s=statistics.fmean((r.end - r.first) / (osl - 1) for r in kept),
                 e2e_s=statistics.fmean(r.end - r.start for r in kept),
                 output_tokens_per_s=(len(kept) - 1) * osl / span)


def dpd(kernels: Kernels, *, prefillers: int, concurrency: int, isl: int, osl: int, budget: int = 8192,
        max_seqs: int = 256, cv: float = 0.3, requests_per_client: int = 30, seed: int = 7) -> Level:
    """Prefillers batching prompts up to ``budget`` tokens a step, one decoder batching every admitted request."""
    sim = _Sim(kernels=kernels, osl=osl, isl=isl, cv=cv, rng=random.Random(seed), issued=concurrency,
               total=concurrency * requests_per_client)
    waiting: deque[_Req] = deque()
    busy = [False] * prefillers
    arrived: deque[_Req] = deque()  # KV received, waiting for the decoder's next step
    running: list[_Req] = []
    decoding = [False]

    def prefill(lane: int) -> None:
        if busy[lane] or not waiting:
            return
        batch = [waiting.popleft()]
        while waiting and (len(batch) + 1) * isl <= budget:
            batch.append(waiting.popleft())
        busy[lane] = True
        sim.at(sim.now + sim.gamma(kernels.prefill_s(isl * len(batch))), "prefilled", lane, batch)

    def decode() -> None:
        if decoding[0]:
            return
        while arrived and len(running) < max_seqs:
            running.append(arrived.popleft())
        if not running:
            return
        decoding[0] = True
        sim.at(sim.now + sim.gamma(kernels.decode_s(len(running))), "stepped", 0)

    for _ in range(concurrency):
        waiting.append(_Req(start=0.0))
    for lane in range(prefillers):
        prefill(lane)
    while sim.events:
        sim.now, _, kind, lane, payload = heapq.heappop(sim.events)
        if kind == "prefilled":
            busy[lane] = False
            for req in payload:  # type: ignore[attr-defined]
                sim.at(sim.now + sim.gamma(kernels.transfer_s), "transferred", 0, req)
            prefill(lane)
        elif kind == "transferred":
            req = payload
            assert isinstance(req, _Req)
            req.left = osl
            arrived.append(req)
            decode()
        else:
            decoding[0] = False
            for req in list(running):
                if req.left == osl:
                    req.first = sim.now
                sim.tick(req, running, lambda: waiting.append(_Req(start=sim.now)))
            for free in range(prefillers):
                prefill(free)
            decode()
    return _summary(sim.done, concurrency=concurrency, osl=osl)


def aggregated(kernels: Kernels, *, concurrency: int, isl: int, osl: int, budget: int = 8192, max_seqs: int = 256,
               cv: float = 0.3, requests_per_client: int = 30, seed: int = 7) -> Level:
    """One vLLM engine with chunked prefill: every step decodes the running requests and prefills chunks of the
    waiting prompts up to ``budget`` tokens (decodes first, one token each, as vLLM's scheduler counts them)."""
    sim = _Sim(kernels=kernels, osl=osl, isl=isl, cv=cv, rng=random.Random(seed), issued=concurrency,
               total=concurrency * requests_per_client)
    running = [_Req(start=0.0, prompt_left=isl, left=osl) for _ in range(concurrency)]
    while len(sim.done) < sim.total:
        decodes = [r for r in running if r.prompt_left == 0][:max_seqs]
        room = budget - len(decodes)
        chunks: list[tuple[_Req, int]] = []
        for req in running:
            if req.prompt_left and room > 0:
                take = min(room, req.prompt_left)
                chunks.append((req, take))
                room -= take
        tokens = sum(take for _, take in chunks)
        done_before = {id(r): isl - r.prompt_left for r, _ in chunks}
        # A chunk attends over the prompt before it: its cost is what it adds to the whole prefill so far.
        prefill = sum(kernels.prefill_s(done_before[id(r)] + take) - (kernels.prefill_s(done_before[id(r)])
                                                                     if done_before[id(r)] else 0.0)
                      for r, take in chunks)
        extra = kernels.decode_s(len(decodes)) - kernels.decode_s(1) if decodes and tokens else 0.0
        step = prefill + extra if tokens else kernels.decode_s(len(decodes))
        sim.now += sim.gamma(step)
        for req, take in chunks:
            req.prompt_left -= take
            if req.prompt_left == 0:
                req.first = sim.now  # the prompt's last chunk samples the first token
                req.left = osl - 1
        for req in decodes:
            sim.tick(req, running, lambda: running.append(_Req(start=sim.now, prompt_left=isl, left=osl)))
    return _summary(sim.done, concurrency=concurrency, osl=osl)
