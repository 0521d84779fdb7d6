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
- p50 and p99, against the router's histogram bucket that holds the same quantile. The bucket gives
  the router's quantile only to within its width, so the client's quantile is compared with the
  bucket's *upper* bound (the most the router's could be): a level is flagged only when the client
  surely added more than :data:`BOUND_S` / :data:`BOUND_RATIO` at p50, or :data:`TAIL_BOUND_S` /
  :data:`TAIL_BOUND_RATIO` at p99 (a tail doubles the room, since few requests make it).

A level whose router serves no TTFT histogram is flagged as unmeasured: its TTFT is the client's,
with nothing to show how much of it the server's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hyperpod_dpd.benchmark.client import Client
from hyperpod_dpd.benchmark.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.levels import LevelResult
from hyperpod_dpd.benchmark.trust import Trust, TrustWarning
from hyperpod_dpd.load_point import Load

BOUND_S = 0.05  # 50 ms of client and network time per request
BOUND_RATIO = 0.10  # or a tenth of the server's TTFT, whichever is larger
TAIL_BOUND_S = 0.10  # at p99: 100 ms
TAIL_BOUND_RATIO = 0.20  # or a fifth of the router's p99


def client_overhead(level: LevelResult, seen: LevelDisaggregation | None) -> float | None:
    """The client's mean TTFT minus the router's for the same level, in seconds; None when either is unknown."""
    client = level.client_ttft_mean
    server = seen.router_ttft_mean_s if seen is not None else None
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


def _fix(level: LevelResult) -> str:
    """What lowers the client's share: genai-bench 0.0.5 blocks serially inside one event loop, so more CPU does
    not help it (+500 to +945 ms measured at 64 streams while it used 0.56 cores); aiperf sends from worker
    processes sized to the pod's CPU."""
    if level.client == Client.GENAI_BENCH.value:
        return ("genai-bench waits inside its one event loop, which more CPU does not speed up: leave --client out "
                "to run aiperf, or lower the load")
    return "the pod's client has 2 CPUs (its limit 4), which this load outran: lower the load per level"


def overhead_warnings(levels: Sequence[LevelResult], routing: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    found = []
    for level in levels:
        seen = routing.get(level.load)
        if seen is None or not level.answered:
            continue  # counters unread (routing-unknown says so) or nothing answered (level-failed says so)
        if seen.router_ttft_mean_s is None:
            found.append(TrustWarning(code=Trust.OVERHEAD_UNKNOWN, load=level.load, message=(
                "the router served no dpd_e2e_ttft_seconds for this level, so the client's own share of TTFT could "
                "not be measured: TTFT here is the benchmark pod's, unverified against the server's")))
            continue
        overhead = client_overhead(level, seen)
        bound = overhead_bound(seen.router_ttft_mean_s)
        if overhead is not None and overhead > bound:
            found.append(TrustWarning(code=Trust.CLIENT_OVERHEAD, load=level.load, message=(
                f"the client's mean TTFT is {overhead * 1e3:.0f} ms above the router's own "
                f"({seen.router_ttft_mean_s * 1e3:.0f} ms), over the {bound * 1e3:.0f} ms bound: TTFT here is partly "
                f"the benchmark pod's ({_fix(level)})")))
            continue
        ttfts = [ttft for ttft, _ in level.answered]
        for name, q, limit in (("p50", 0.50, overhead_bound), ("p99", 0.99, tail_bound)):
            bucket, client = seen.router_ttft_bounds(q), quantile(ttfts, q)
            if bucket is None or client is None:
                continue
            router_most = bucket[1]
            if client - router_most > limit(router_most):
                found.append(TrustWarning(code=Trust.CLIENT_OVERHEAD, load=level.load, message=(
                    f"the client's TTFT {name} is {client * 1e3:.0f} ms, at least {(client - router_most) * 1e3:.0f} "
                    f"ms above the router's (at most {router_most * 1e3:.0f} ms by its histogram), over the "
                    f"{limit(router_most) * 1e3:.0f} ms bound: the TTFT {name} here is partly the benchmark pod's "
                    f"({_fix(level)})")))
                break
    return found
