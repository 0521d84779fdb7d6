"""How much of the measured TTFT is the benchmark client's own, per level.

genai-bench 0.0.5 samples and tokenizes each prompt inside its single event loop and opens a new
connection per request, so under load a request's first token waits for the client, not the
server (against a stub with a fixed 500 ms TTFT it reported p50 625 ms at concurrency 8). The
router times the same requests itself (``dpd_e2e_ttft_seconds``, summed, counted and bucketed per
level by :mod:`disaggregation`): the client's TTFT minus the router's is what the client and the
network in between added. Three figures are bounded, each over every answered request of the level
(warm-up included, as the router counts them):

- the mean, against the histogram's sum and count: at most :data:`BOUND_S` or :data:`BOUND_RATIO` of
  the router's mean;
- p50 and p99, against the router's histogram for the same requests, as order statistics
  (:class:`QuantileOverhead` says why that is sound): a level is flagged only when the client surely added more
  than :data:`BOUND_S` / :data:`BOUND_RATIO` at p50, or :data:`TAIL_BOUND_S` / :data:`TAIL_BOUND_RATIO` at p99 (a
  tail doubles the room, since few requests make it). A bucket too wide to decide is listed beside the results
  (:func:`resolution_notes`), not flagged; a quantile above the top finite bucket and possibly over is flagged
  unverified, never passed on the mean alone.

A level whose router serves no TTFT histogram is flagged as unmeasured: its TTFT is the client's,
with nothing to show how much of it the server's.

The aggregated twin is bounded the same way (:func:`twin_ttft`): against its router's histogram when
that router serves one, else against its engine pods' own ``vllm:time_to_first_token_seconds``
(vLLM 0.19 ``vllm/v1/metrics/loggers.py:727``), a server clock for an aggregated endpoint, where
prefill and the first token happen in one engine; the difference then also holds the router's hop.
A twin level with neither is flagged unmeasured too, so an A/B never sets a checked DPD TTFT against
an unchecked one.

The engine's clock starts later than the router's: vLLM sets a request's ``arrival_time`` in
``InputProcessor.process_inputs`` (vLLM 0.19 ``vllm/v1/engine/input_processor.py:241``), after the
HTTP handling, the chat template and tokenization, and the frontend's queue before them. So on an
engine clock the difference also holds the twin's own frontend, which a busy twin (32-64 streams)
can make large: the two sides are bounded against different things. The allowance is not widened
for it: by how much the frontend adds is not measured, and a wider bound would pass a client's
overhead unseen; a level over the bound on the engine's clock says that part of it may be the twin's
frontend, and the twin's router clock, the same as the DPD side's, is used whenever it is served.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hyperpod_dpd.benchmark.proof.disaggregation import (
    E2E_TTFT,
    BucketQuantile,
    LevelDisaggregation,
    bucket_at_rank,
    bucket_quantile,
)
from hyperpod_dpd.benchmark.proof.traffic import counted, ours
from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.columns import ms, render_columns
from hyperpod_dpd.load_point import Load, column_header
from hyperpod_dpd.observability.metrics import TTFT

BOUND_S = 0.05  # 50 ms of client and network time per request
BOUND_RATIO = 0.10  # or a tenth of the server's TTFT, whichever is larger
TAIL_BOUND_S = 0.10  # at p99: 100 ms
TAIL_BOUND_RATIO = 0.20  # or a fifth of the router's p99


@dataclass(frozen=True, kw_only=True)
class ServerTtft:
    """One level's TTFT by a server's own clock: its mean and histogram buckets (by upper bound), and whose."""

    clock: str  # "the router" or "the engine": the messages' subject
    series: str  # the histogram it was read from
    mean_s: float | None
    buckets: Mapping[float, float] = field(default_factory=dict)

    def quantile(self, q: float) -> BucketQuantile | None:
        return bucket_quantile(self.buckets, q)

    @property
    def top_finite_s(self) -> float | None:
        return max((bound for bound in self.buckets if not math.isinf(bound)), default=None)

    @property
    def count(self) -> int | None:
        """The requests the histogram counted (its ``+Inf`` bucket); None when it has none."""
        total = self.buckets.get(math.inf)
        return None if total is None else round(total)

    def as_dict(self) -> dict[str, object]:
        return {"clock": self.clock.removeprefix("the "), "series": self.series, "mean_s": self.mean_s}


def router_ttft(seen: LevelDisaggregation) -> ServerTtft:
    """The router's ``dpd_e2e_ttft_seconds``: the DPD endpoint's clock (prefill, KV transfer, first decode step)."""
    return ServerTtft(clock="the router", series=E2E_TTFT, mean_s=seen.router_ttft_mean_s,
                      buckets=seen.router_ttft_buckets)


def twin_ttft(seen: LevelDisaggregation) -> ServerTtft:
    """The twin's clock: its router's histogram when served, else its engine pods' TTFT histogram."""
    if seen.router_ttft_mean_s is not None:
        return router_ttft(seen)
    return ServerTtft(clock="the engine", series=TTFT.name, mean_s=seen.engine_ttft_mean_s,
                      buckets=seen.engine_ttft_buckets)


def client_overhead(level: LevelResult, seen: LevelDisaggregation | None,
                    clock: Callable[[LevelDisaggregation], ServerTtft] = router_ttft) -> float | None:
    """The client's mean TTFT minus the server's (``clock``) for the same level, in seconds; None when either is
    unknown."""
    client = level.client_ttft_mean
    server = clock(seen).mean_s if seen is not None else None
    return None if client is None or server is None else client - server


def overhead_bound(router_ttft_s: float) -> float:
    return max(BOUND_S, BOUND_RATIO * router_ttft_s)


def tail_bound(router_ttft_s: float) -> float:
    return max(TAIL_BOUND_S, TAIL_BOUND_RATIO * router_ttft_s)


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values``, linearly interpolated (numpy's default, as genai-bench computes its own)."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rank(q: float, n: int) -> int:
    """``ceil(q * n)``, at least 1 and at most ``n`` (the product rounded first: 0.57 * 100 is 56.99999999999999)."""
    return min(n, max(1, math.ceil(round(q * n, 9))))


def order_statistic(values: Sequence[float], q: float) -> float | None:
    """The ``ceil(q * n)``-th smallest of ``values`` (numpy's ``inverted_cdf``): the request at the rank a histogram
    quantile's bucket holds (Prometheus' ``BucketQuantile`` takes the first bucket reaching ``q * n``)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[rank(q, len(ordered)) - 1]


def _fix(level: LevelResult) -> str:
    """What lowers the client's share: genai-bench 0.0.5 blocks serially inside one event loop, so more CPU does
    not help it (+500 to +945 ms measured at 64 streams while it used 0.56 cores); aiperf sends from worker
    processes sized to the pod's CPU."""
    if level.client == Client.GENAI_BENCH.value:
        return ("genai-bench waits inside its one event loop, which more CPU does not speed up: leave --client out "
                "to run aiperf, or lower the load")
    return "the pod's client has 2 CPUs (its limit 4), which this load outran: lower the load per level"


def _frontend(server: ServerTtft) -> str:
    """On the engine's clock, what else the difference holds (see the module's docstring)."""
    if server.series != TTFT.name:
        return ""
    return ("; the engine's clock starts after the twin's HTTP handling, chat template and tokenization, so part of "
            "this may be the twin's own frontend")


# Why a level has no server clock to bound the client against, by the clock that was looked for.
UNMEASURED = {
    "router": "the router served no dpd_e2e_ttft_seconds for this level",
    "twin": ("neither the twin's router (dpd_e2e_ttft_seconds) nor its engine pods (vllm:time_to_first_token_seconds) "
             "served a TTFT histogram for this level")}


# The quantiles bounded beyond the mean, each with its own allowance (a tail doubles the room, since few requests
# make it).
QUANTILES: tuple[tuple[str, float, Callable[[float], float]], ...] = (
    ("p50", 0.50, overhead_bound), ("p99", 0.99, tail_bound))


@dataclass(frozen=True, kw_only=True)
class QuantileOverhead:
    """The client's TTFT at a quantile against the server's histogram for the same requests.

    The proof compares order statistics: if the client added at most ``L`` to every request, its ``k``-th fastest
    answer (``k = ceil(q n)`` of its ``n``) is at most ``L`` slower than the server's ``k``-th fastest of the same
    requests. When the server counted ``e`` more requests than the client answered (a wave the client cut, a
    failure after the first token), the ``k``-th of the client's requests on the server's clock is at most the
    server's ``(k + e)``-th and at least its ``k``-th: ``bound`` is the bucket holding rank ``k + e`` (its upper
    edge the most the server's figure can be), ``floor`` the bucket holding rank ``k`` (its lower edge the least).
    ``least_s`` and ``most_s`` are the overhead those edges prove, each against the bound at its own edge (the
    bound only grows with the server's TTFT); ``shown_s`` is the client's linearly interpolated quantile and
    ``server`` Prometheus' estimate at ``q``, what a table or a dashboard shows."""

    name: str
    client_s: float  # the client's k-th fastest answer, the figure the proof uses
    shown_s: float  # the client's quantile, linearly interpolated, as the table reports it
    server: BucketQuantile  # the histogram at q, for the estimate
    bound: BucketQuantile  # the bucket holding rank k + e: its upper edge
    floor: BucketQuantile  # the bucket holding rank k: its lower edge
    limit: Callable[[float], float]

    @property
    def limit_s(self) -> float:
        """The bound at the most the server's figure can be (the edge ``least_s`` is proven against); above the top
        finite bucket, at that bucket's edge."""
        return self.limit(self.bound.upper if self.bound.finite else self.floor.lower)

    @property
    def least_s(self) -> float | None:
        return self.client_s - self.bound.upper if self.bound.finite else None

    @property
    def most_s(self) -> float:
        return self.client_s - self.floor.lower

    @property
    def estimate_s(self) -> float | None:
        return None if self.server.estimate is None else self.shown_s - self.server.estimate

    @property
    def verdict(self) -> str:
        """``over`` (the client surely added more than the bound), ``within`` (surely not), ``unresolved`` (the
        bucket is too wide to say) or ``unplaced`` (above the top finite bucket and possibly over)."""
        least = self.least_s
        if least is not None and least > self.limit_s:
            return "over"
        if self.most_s <= self.limit(self.floor.lower):
            return "within"
        return "unresolved" if self.bound.finite else "unplaced"

    def as_dict(self) -> dict[str, object]:
        return {"client_s": self.shown_s, "client_rank_s": self.client_s,
                "server_between_s": [self.floor.lower, self.bound.upper if self.bound.finite else None],
                "server_estimate_s": self.server.estimate, "overhead_estimate_s": self.estimate_s,
                "overhead_at_least_s": self.least_s, "overhead_at_most_s": self.most_s, "bound_s": self.limit_s,
                "verdict": self.verdict}


@dataclass(frozen=True, kw_only=True)
class Quantiles:
    """p50 and p99 of one level, or why they cannot be compared at all (``why``, then ``figures`` is empty)."""

    figures: Mapping[str, QuantileOverhead] = field(default_factory=dict)
    why: str = ""


def quantile_overheads(level: LevelResult, server: ServerTtft) -> Quantiles:
    """p50 and p99 of the client's TTFT (every answered request, warm-up included, as the server counts them)
    against the server's histogram."""
    ttfts = [ttft for ttft, _ in level.answered]
    counted, answered = server.count, len(ttfts)
    if not answered:
        return Quantiles(why="the client answered no request")
    if counted is None or counted <= 0:
        return Quantiles(why=_unplaceable(server))
    if counted < answered:
        return Quantiles(why=(f"{server.series} from {server.clock} counted {counted} requests, fewer than the "
                              f"{answered} the client answered, so its quantiles are not of the same requests"))
    figures = {}
    for name, q, limit in QUANTILES:
        client, shown, at_q = order_statistic(ttfts, q), quantile(ttfts, q), server.quantile(q)
        bound = bucket_at_rank(server.buckets, rank(q, answered) + counted - answered)
        floor = bucket_at_rank(server.buckets, rank(q, answered))
        if client is None or shown is None or at_q is None or bound is None or floor is None:
            return Quantiles(why=_unplaceable(server))
        figures[name] = QuantileOverhead(name=name, client_s=client, shown_s=shown, server=at_q, bound=bound,
                                         floor=floor, limit=limit)
    return Quantiles(figures=figures)


def quantiles_dict(level: LevelResult, seen: LevelDisaggregation | None,
                   clock: Callable[[LevelDisaggregation], ServerTtft] = router_ttft) -> dict[str, object] | None:
    """:func:`quantile_overheads` for the results' JSON; None when the counters around the level were not read."""
    if seen is None:
        return None
    found = quantile_overheads(level, clock(seen))
    return {"not_compared": found.why} if found.why else {
        name: figure.as_dict() for name, figure in found.figures.items()}


def resolution_notes(levels: Sequence[LevelResult], routing: Mapping[Load, LevelDisaggregation], *,
                     clock: Callable[[LevelDisaggregation], ServerTtft] = router_ttft) -> list[str]:
    """The quantiles the server's histogram could bound only to its bucket's width: neither surely over the bound
    nor surely within it. Not a reason to distrust the level (nothing shows an excess), but said, never silent."""
    notes = []
    for level in levels:
        seen = routing.get(level.load)
        if seen is None or not level.answered:
            continue
        for figure in quantile_overheads(level, clock(seen)).figures.values():
            if figure.verdict == "unresolved":
                notes.append(
                    f"{level.load.describe()}: the client's TTFT {figure.name} added between "
                    f"{(figure.least_s or 0.0) * 1e3:+.0f} and {figure.most_s * 1e3:+.0f} ms (the server's figure lies "
                    f"in {figure.floor.lower * 1e3:.0f}-{figure.bound.upper * 1e3:.0f} ms), against a "
                    f"{figure.limit_s * 1e3:.0f} ms bound: checked only to the histogram's resolution")
    return notes


def render_resolution_notes(levels: Sequence[LevelResult], routing: Mapping[Load, LevelDisaggregation], *,
                            whose: str, clock: Callable[[LevelDisaggregation], ServerTtft] = router_ttft) -> list[str]:
    """:func:`resolution_notes` as printed lines under a table (a heading naming ``whose`` histogram, then one line
    per note); none when every quantile was decided."""
    notes = resolution_notes(levels, routing, clock=clock)
    if not notes:
        return []
    return [f"the client's share at p50/p99, to {whose} histogram's resolution only:", *(f"  - {n}" for n in notes)]


def _unplaceable(server: ServerTtft) -> str:
    return f"{server.series} from {server.clock} has no finite bucket and +Inf count, so its quantiles cannot be told"


def _unplaced(server: ServerTtft, names: Sequence[str]) -> str:
    """Why these quantiles could not be bounded: above the histogram's top finite bucket, or it has none."""
    top, which = server.top_finite_s, " and ".join(names)
    if top is None:
        return f"{server.series} from {server.clock} has no finite bucket, so its TTFT {which} cannot be placed"
    return (f"{server.clock}'s TTFT {which} lie{'s' if len(names) == 1 else ''} above the top finite bucket of "
            f"{server.series} ({top * 1e3:.0f} ms), and the client's is more than the bound above that edge, so the "
            "histogram cannot say how much of it is the client's")


def overhead_warnings(levels: Sequence[LevelResult], routing: Mapping[Load, LevelDisaggregation], *,
                      clock: Callable[[LevelDisaggregation], ServerTtft] = router_ttft) -> list[TrustWarning]:
    """The client's TTFT against the server's ``clock`` per level: its mean, p50 and p99 over their bounds, or no
    server figure at all, or a quantile the server's histogram cannot place (the level is unverified, never
    silently passed)."""
    found = []
    for level in levels:
        seen = routing.get(level.load)
        if seen is None or (not level.answered and not level.completed):
            continue  # counters unread (routing-unknown says so) or nothing answered (level-failed says so)
        if not level.answered:  # answered, by the summary, but no per-request record of it
            found.append(TrustWarning(code=Trust.OVERHEAD_UNKNOWN, load=level.load, message=(
                f"the client's summary counts {level.completed} answered requests but its files hold no per-request "
                "records of them (aiperf's profile_export.jsonl is missing), so the client's TTFT mean, p50 and p99 "
                "could not be set against the server's: TTFT here is the benchmark pod's, unverified. Keep the "
                "records file beside the summary")))
            continue
        server = clock(seen)
        if server.mean_s is None:
            why = UNMEASURED["twin" if clock is twin_ttft else "router"]
            found.append(TrustWarning(code=Trust.OVERHEAD_UNKNOWN, load=level.load, message=(
                f"{why}, so the client's own share of TTFT could not be measured: TTFT here is the benchmark pod's, "
                "unverified against the server's")))
            continue
        overhead = client_overhead(level, seen, clock)
        bound = overhead_bound(server.mean_s)
        if overhead is not None and overhead > bound:
            found.append(TrustWarning(code=Trust.CLIENT_OVERHEAD, load=level.load, message=(
                f"the client's mean TTFT is {overhead * 1e3:.0f} ms above {server.clock}'s own "
                f"({server.mean_s * 1e3:.0f} ms, {server.series}), over the {bound * 1e3:.0f} ms bound: TTFT here is "
                f"partly the benchmark pod's ({_fix(level)}){_frontend(server)}")))
            continue
        quantiles = quantile_overheads(level, server)
        if quantiles.why:
            found.append(TrustWarning(code=Trust.OVERHEAD_UNKNOWN, load=level.load, message=(
                f"{quantiles.why}: the client's TTFT p50 and p99 here are unverified against the server's (the mean "
                "is within its bound)")))
            continue
        over = next((value for value in quantiles.figures.values() if value.verdict == "over"), None)
        if over is not None and over.least_s is not None:
            found.append(TrustWarning(code=Trust.CLIENT_OVERHEAD, load=level.load, message=(
                f"the client's TTFT {over.name} is {over.client_s * 1e3:.0f} ms, at least {over.least_s * 1e3:.0f} "
                f"ms above {server.clock}'s (at most {over.bound.upper * 1e3:.0f} ms by its histogram), over the "
                f"{over.limit_s * 1e3:.0f} ms bound: the TTFT {over.name} here is partly the benchmark pod's "
                f"({_fix(level)}){_frontend(server)}")))
            continue
        blind = [name for name, value in quantiles.figures.items() if value.verdict == "unplaced"]
        if blind:
            found.append(TrustWarning(code=Trust.OVERHEAD_UNKNOWN, load=level.load, message=(
                f"{_unplaced(server, blind)}: the client's TTFT {' and '.join(blind)} here "
                f"{'is' if len(blind) == 1 else 'are'} unverified against the server's (the mean is within its "
                "bound)")))
    return found


@dataclass(frozen=True, kw_only=True)
class ServerClockRow:
    """One level of an endpoint without DPD columns (the twin): the server's TTFT beside the client's, and the
    request counts the other-traffic check compares."""

    load: Load
    server: ServerTtft | None  # None: the counters around the level were not read
    client_ttft_mean_s: float | None
    overhead_s: float | None
    quantiles: Mapping[str, object] | None
    counted: Mapping[str, int]
    ours: int | None  # None: the client's files do not count what it sent

    def as_dict(self) -> dict[str, object]:
        return {**self.load.as_dict(), "server_ttft": None if self.server is None else self.server.as_dict(),
                "client_ttft_mean_s": self.client_ttft_mean_s, "client_overhead_s": self.overhead_s,
                "client_overhead_quantiles": self.quantiles,
                "server_requests": dict(self.counted), "client_requests": self.ours}


def server_clock_rows(levels: Sequence[LevelResult], counters: Mapping[Load, LevelDisaggregation],
                      clock: Callable[[LevelDisaggregation], ServerTtft]) -> list[ServerClockRow]:
    rows = []
    for level in levels:
        seen = counters.get(level.load)
        rows.append(ServerClockRow(load=level.load, server=None if seen is None else clock(seen),
                                   client_ttft_mean_s=level.client_ttft_mean,
                                   overhead_s=client_overhead(level, seen, clock),
                                   quantiles=quantiles_dict(level, seen, clock),
                                   counted={} if seen is None else counted(seen),
                                   ours=None if (mine := ours(level)) is None else mine[0]))
    return rows


def render_server_clock(label: str, rows: Sequence[ServerClockRow]) -> str:
    """The twin's server clock per level: whose TTFT it is, its mean, the client's, the overhead, the requests."""
    headers = (column_header([row.load for row in rows]), "SERVER CLOCK", "SRV TTFT ms", "CLIENT TTFT ms",
               "CLIENT +ms", "SRV REQ", "OURS")
    table = [[row.load.cell(), "unread" if row.server is None else row.server.series,
              "-" if row.server is None else ms(row.server.mean_s), ms(row.client_ttft_mean_s),
              "-" if row.overhead_s is None else f"{row.overhead_s * 1e3:+.0f}",
              "/".join(str(count) for count in row.counted.values()) or "-",
              "-" if row.ours is None else str(row.ours)] for row in rows]
    return "\n".join([f"{label}: the client's TTFT against the server's own clock, per level (SRV REQ: the router's "
                      "routed and the engines' finished requests)", *render_columns(headers, table)])
