"""How much of the measured TTFT is the benchmark client's own, per level.

genai-bench 0.0.5 samples and tokenizes each prompt inside its single event loop and opens a new
connection per request, so under load a request's first token waits for the client, not the
server (against a stub with a fixed 500 ms TTFT it reported p50 625 ms at concurrency 8). The
router times the same requests itself (``dpd_e2e_ttft_seconds``, summed and counted per level by
:mod:`disaggregation`): the client's mean TTFT minus the router's is what the client and the
network in between added. A level where that exceeds :data:`BOUND_S` or :data:`BOUND_RATIO` of
the router's TTFT is flagged, so a TTFT comparison is never made on the client's overhead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperpod_dpd.benchmark.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.levels import LevelResult
from hyperpod_dpd.benchmark.trust import Trust, TrustWarning
from hyperpod_dpd.load_point import Load

BOUND_S = 0.05  # 50 ms of client and network time per request
BOUND_RATIO = 0.10  # or a tenth of the server's TTFT, whichever is larger


def client_overhead(level: LevelResult, seen: LevelDisaggregation | None) -> float | None:
    """The client's mean TTFT minus the router's for the same level, in seconds; None when either is unknown."""
    client = level.client_ttft_mean
    server = seen.router_ttft_mean_s if seen is not None else None
    return None if client is None or server is None else client - server


def overhead_bound(router_ttft_s: float) -> float:
    return max(BOUND_S, BOUND_RATIO * router_ttft_s)


def overhead_warnings(levels: Sequence[LevelResult], routing: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    found = []
    for level in levels:
        seen = routing.get(level.load)
        overhead = client_overhead(level, seen)
        if overhead is None or seen is None or seen.router_ttft_mean_s is None:
            continue
        bound = overhead_bound(seen.router_ttft_mean_s)
        if overhead > bound:
            found.append(TrustWarning(code=Trust.CLIENT_OVERHEAD, load=level.load, message=(
                f"the client's mean TTFT is {overhead * 1e3:.0f} ms above the router's own "
                f"({seen.router_ttft_mean_s * 1e3:.0f} ms), over the {bound * 1e3:.0f} ms bound: TTFT here is partly "
                "the benchmark pod's (give it more CPU with a larger node, or lower the load)")))
    return found
