"""The advisor's queueing model: a small, seeded event simulation of requests through a serving layout.

Both layouts go through the same code. A request waits for a prefill lane (FCFS), is prefilled, then
decodes ``osl - 1`` more tokens at a step time that depends on how many requests its engine decodes
at once. DPD has separate prefillers (``colocated=False``: a shared queue in front of ``prefill_lanes``
engines, then a hand-off to the least-loaded decoder with a free ``max_num_seqs`` slot); aggregated
vLLM binds each request to one engine (``colocated=True``: a free slot first, then that engine's own
prefill lane), and its prefill steps slow the decodes running beside them (``tpot_s`` says how much).

Closed loop (``concurrency``): genai-bench's ``--num-concurrency`` clients, each sending its next
request when the last one ends. Open loop (``request_rate``): Poisson arrivals; a rate at or above
the layout's capacity is ``saturated`` and has no latency figures, because its queue grows without
bound. Step times carry seeded +-10 % jitter so that the result is deterministic but not phase-locked.
The module knows nothing about AIConfigurator: the step-time functions come from
:mod:`hyperpod_dpd.advisor.steps`, which is what makes it testable against textbook queues.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_JITTER = 0.10
WARM_UP_SHARE = 0.2
SEED = 18
# The probabilities an outcome's TTFT and TPOT distributions are kept at, so that a reader can ask what share
# of requests meets a target (the SLO objective's quantity), not only whether the p90 does.
QUANTILES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0)


@dataclass(frozen=True, kw_only=True)
class Stations:
    """One layout, as the queueing model sees it (times in seconds).

    :param prefill_lanes: engines that prefill, one prompt at a time each.
    :param decoders: engines that decode (for ``colocated`` the same engines as the prefill lanes).
    :param slots: requests one decoder runs at once (``max_num_seqs`` or its KV room).
    :param prefill_s: one prompt's prefill, given the requests decoding on that engine.
    :param tpot_s: one decode step per output token, given the requests decoding on that engine.
    :param handoff_s: from the end of prefill to the decoder (the KV transfer). :default: 0
    :param overhead_s: per request, outside the engines (router and HTTP). :default: 0
    :param colocated: prefill and decode share an engine (aggregated vLLM). :default: False
    """

    prefill_lanes: int
    decoders: int
    slots: int
    prefill_s: Callable[[int], float]
    tpot_s: Callable[[int], float]
    handoff_s: float = 0.0
    overhead_s: float = 0.0
    colocated: bool = False


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What the simulated clients saw, over the requests after the warm-up.

    ``saturated`` (open loop only): the arrival rate is at or above ``capacity_per_s``; the latency
    figures are then ``nan``, because they depend only on how long the run lasted.
    ``tpot_p90_s`` is the 90th percentile of the requests' own TPOT (a request decodes at one step time).
    ``ttft_quantiles`` and ``tpot_quantiles``: the same distributions at :data:`QUANTILES` (empty when saturated).
    """

    requests_per_s: float
    ttft_s: float
    ttft_p90_s: float
    queue_s: float
    tpot_s: float
    e2e_s: float
    decoding: float
    in_flight: float
    capacity_per_s: float
    saturated: bool = False
    tpot_p90_s: float = math.nan
    ttft_quantiles: tuple[float, ...] = ()
    tpot_quantiles: tuple[float, ...] = ()


@dataclass
class _Request:
    arrival: float
    engine: int = -1
    waiting_since: float = 0.0
    wait: float = 0.0
    first_token: float = 0.0
    tpot: float = 0.0
    end: float = 0.0


class _Run:
    """One simulation: an event heap, the engines' queues and the finished requests."""

    def __init__(self, stations: Stations, *, osl: int, jitter: float, exponential: bool, seed: int) -> None:
        self.s = stations
        self.osl = osl
        self.jitter = jitter
        self.exponential = exponential
        self.random = random.Random(seed)
        self.events: list[tuple[float, int, str, _Request]] = []
        self.sequence = 0
        self.now = 0.0
        self.lane_busy = [False] * stations.prefill_lanes
        self.lane_queue: list[deque[_Request]] = [deque() for _ in range(stations.prefill_lanes)]
        self.prefill_queue: deque[_Request] = deque()  # DPD: one queue in front of every prefiller
        self.slot_queue: deque[_Request] = deque()     # requests waiting for a decoder slot
        self.held = [0] * stations.decoders            # requests bound to each decoder (colocated: engine)
        self.decoding = [0] * stations.decoders        # of which in their decode phase
        self.done: list[_Request] = []
        self.decoding_area = 0.0
        self.in_flight_area = 0.0
        self.in_flight = 0
        self.measuring_from = 0.0

    def draw(self, mean: float) -> float:
        """A service time of ``mean`` with the run's variability."""
        if self.exponential:
            return self.random.expovariate(1 / mean) if mean > 0 else 0.0
        return mean * (1 + self.jitter * (2 * self.random.random() - 1))

    def at(self, when: float, kind: str, request: _Request) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (when, self.sequence, kind, request))

    def next_event(self) -> tuple[str, _Request] | None:
        if not self.events:
            return None
        when, _, kind, request = heapq.heappop(self.events)
        if when > self.measuring_from:
            span = when - max(self.now, self.measuring_from)
            self.decoding_area += span * sum(self.decoding)
            self.in_flight_area += span * self.in_flight
        self.now = when
        return kind, request

    def _wait(self, request: _Request, queue: deque[_Request]) -> None:
        request.waiting_since = self.now
        queue.append(request)

    def _served(self, request: _Request) -> None:
        request.wait += self.now - request.waiting_since
        request.waiting_since = self.now  # a wait is counted once, even when service starts in two steps

    def arrive(self, request: _Request) -> None:
        self.in_flight += 1
        request.waiting_since = self.now
        if self.s.colocated:
            self._bind(request)
            return
        free = next((lane for lane, busy in enumerate(self.lane_busy) if not busy), None)
        if free is None:
            self._wait(request, self.prefill_queue)
        else:
            self._prefill(request, free)

    def _bind(self, request: _Request) -> None:
        """A decoder slot (colocated: an engine) for ``request``, or a place in the slot queue."""
        engine = min(range(self.s.decoders), key=lambda e: self.held[e])
        if self.held[engine] >= self.s.slots:
            self._wait(request, self.slot_queue)
            return
        self._served(request)
        self.held[engine] += 1
        request.engine = engine
        if not self.s.colocated:
            self._decode(request)
        elif self.lane_busy[engine]:
            self._wait(request, self.lane_queue[engine])
        else:
            self._prefill(request, engine)

    def _prefill(self, request: _Request, lane: int) -> None:
        self._served(request)
        self.lane_busy[lane] = True
        load = self.decoding[lane] if self.s.colocated else 0
        self.at(self.now + self.draw(self.s.prefill_s(load)), "prefilled", request)
        request.engine = lane

    def prefilled(self, request: _Request) -> None:
        lane = request.engine
        self.lane_busy[lane] = False
        waiting = self.lane_queue[lane] if self.s.colocated else self.prefill_queue
        if waiting:
            self._prefill(waiting.popleft(), lane)
        if self.s.colocated:
            request.first_token = self.now  # the last prefill step emits the first token
            self._decode(request)
        else:
            request.engine = -1
            self.at(self.now + self.s.handoff_s, "handed_off", request)

    def handed_off(self, request: _Request) -> None:
        request.waiting_since = self.now
        self._bind(request)

    def _decode(self, request: _Request) -> None:
        engine = request.engine
        self.decoding[engine] += 1
        request.tpot = self.draw(self.s.tpot_s(self.decoding[engine]))
        steps = self.osl - 1
        if not self.s.colocated:  # the decoder's first step emits the first token
            request.first_token = self.now + request.tpot
        request.end = request.first_token + request.tpot * steps
        self.at(request.end, "finished", request)

    def finished(self, request: _Request) -> None:
        engine = request.engine
        self.decoding[engine] -= 1
        self.held[engine] -= 1
        self.in_flight -= 1
        self.done.append(request)
        if self.slot_queue:
            self._bind(self.slot_queue.popleft())


def _closed_loop(stations: Stations, *, osl: int, concurrency: int, requests: int, jitter: float,
                 exponential: bool) -> _Run:
    run = _Run(stations, osl=osl, jitter=jitter, exponential=exponential, seed=SEED + concurrency)
    spread = stations.prefill_s(0) * concurrency / stations.prefill_lanes
    for _ in range(concurrency):
        run.at(run.random.random() * spread, "arrive", _Request(arrival=0.0))
    _drive(run, stations, requests=requests, reissue=True)
    return run


def _open_loop(stations: Stations, *, osl: int, rate: float, requests: int, jitter: float,
               exponential: bool) -> _Run:
    run = _Run(stations, osl=osl, jitter=jitter, exponential=exponential, seed=SEED)
    when = 0.0
    for _ in range(requests):
        when += run.random.expovariate(rate)
        run.at(when, "arrive", _Request(arrival=when))
    _drive(run, stations, requests=requests, reissue=False)
    return run


def _drive(run: _Run, stations: Stations, *, requests: int, reissue: bool) -> None:
    warm_up = int(requests * WARM_UP_SHARE)
    while len(run.done) < requests and (event := run.next_event()) is not None:
        kind, request = event
        if kind == "arrive":
            request.arrival = run.now
            run.arrive(request)
        elif kind == "prefilled":
            run.prefilled(request)
        elif kind == "handed_off":
            run.handed_off(request)
        else:
            run.finished(request)
            if len(run.done) == warm_up:
                run.measuring_from = run.now
                run.decoding_area = run.in_flight_area = 0.0
            if reissue:
                run.at(run.now + stations.overhead_s, "arrive", _Request(arrival=run.now))


def _outcome(run: _Run, stations: Stations, *, osl: int, capacity: float) -> Outcome:
    measured = run.done[int(len(run.done) * WARM_UP_SHARE):]
    count = len(measured)
    ttfts = sorted(r.first_token - r.arrival + stations.overhead_s for r in measured)
    tpots = sorted(r.tpot for r in measured)
    ttft = sum(ttfts) / count
    tpot = sum(r.tpot for r in measured) / count
    elapsed = run.now - run.measuring_from
    return Outcome(requests_per_s=count / elapsed if elapsed > 0 else 0.0, ttft_s=ttft,
                   ttft_p90_s=quantile(ttfts, 0.9), queue_s=sum(r.wait for r in measured) / count, tpot_s=tpot,
                   e2e_s=sum(r.end - r.arrival + stations.overhead_s for r in measured) / count,
                   decoding=run.decoding_area / elapsed if elapsed > 0 else 0.0,
                   in_flight=run.in_flight_area / elapsed if elapsed > 0 else 0.0, capacity_per_s=capacity,
                   tpot_p90_s=quantile(tpots, 0.9), ttft_quantiles=tuple(quantile(ttfts, q) for q in QUANTILES),
                   tpot_quantiles=tuple(quantile(tpots, q) for q in QUANTILES))


def quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted values, interpolated linearly."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _requests(concurrency: int) -> int:
    return max(1000, 4 * concurrency + 1000)


def capacity(stations: Stations, *, osl: int, jitter: float = DEFAULT_JITTER) -> float:
    """Requests per second the layout completes with every decoder slot kept busy (its saturation rate)."""
    full = stations.decoders * stations.slots + stations.prefill_lanes
    run = _closed_loop(stations, osl=osl, concurrency=full, requests=_requests(full), jitter=jitter,
                       exponential=False)
    return _outcome(run, stations, osl=osl, capacity=0.0).requests_per_s


def closed_loop(stations: Stations, *, osl: int, concurrency: int, jitter: float = DEFAULT_JITTER,
                exponential: bool = False, requests: int | None = None) -> Outcome:
    """``concurrency`` clients, each sending its next request as soon as the last one ends."""
    run = _closed_loop(stations, osl=osl, concurrency=concurrency, requests=requests or _requests(concurrency),
                       jitter=jitter, exponential=exponential)
    outcome = _outcome(run, stations, osl=osl, capacity=0.0)
    return Outcome(**{**outcome.__dict__, "capacity_per_s": outcome.requests_per_s})


OPEN_LOOP_REQUESTS = 4000


def open_loop(stations: Stations, *, osl: int, rate: float, jitter: float = DEFAULT_JITTER,
              exponential: bool = False, requests: int = OPEN_LOOP_REQUESTS,
              capacity_per_s: float | None = None) -> Outcome:
    """Poisson arrivals at ``rate`` per second; ``saturated`` (no latency figures) at or above capacity."""
    limit = capacity(stations, osl=osl, jitter=jitter) if capacity_per_s is None else capacity_per_s
    if rate >= limit:
        nan = math.nan
        return Outcome(requests_per_s=limit, ttft_s=nan, ttft_p90_s=nan, queue_s=nan, tpot_s=nan, e2e_s=nan,
                       decoding=nan, in_flight=nan, capacity_per_s=limit, saturated=True)
    run = _open_loop(stations, osl=osl, rate=rate, requests=requests, jitter=jitter, exponential=exponential)
    outcome = _outcome(run, stations, osl=osl, capacity=limit)
    return Outcome(**{**outcome.__dict__, "requests_per_s": rate})
