"""Whether a level's server counters hold other clients' requests, from the servers' own request counts.

The router and the engines count every request that reaches them, not only the benchmark's: on an
endpoint other clients share, their requests mix into a level's counters (a false
``not-disaggregated`` when they are short, or a KV failure masked by their transfers) and into the
server's TTFT the client's is bounded against. Two counts per level say how many requests the
servers saw: the routers' decisions (``dpd_routing_*_total``, or their routing log lines) and the
engines' finished requests (``vllm:request_success_total``, aborted ones left out: a client that
went away records none). Against them stands what this client sent and recorded: every answered
request (warm-up included) and every failed one. A closed-loop client may also leave up to one
request per user unrecorded when it stops a level at its bound (genai-bench cuts its last wave), so
that many are allowed over; an open-loop client (aiperf, ``--request-rate``) waits for every
request it sent, so none is. More than that is traffic that was not this benchmark's: the level is
unverified (``other-traffic``), as any level whose server figures do not describe its own requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperpod_dpd.benchmark.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.levels import LevelResult
from hyperpod_dpd.benchmark.trust import Trust, TrustWarning
from hyperpod_dpd.load_point import Load


def ours(level: LevelResult) -> tuple[int, int]:
    """The requests this client recorded for the level (answered, warm-up included, and failed), and how many more
    it may have sent unrecorded (one per user of a closed-loop level, cut at its end)."""
    return len(level.answered) + level.failed, level.load.concurrency or 0


def counted(seen: LevelDisaggregation) -> dict[str, int]:
    """The level's request counts by the server that made them (a count not exported is left out)."""
    found = {}
    if seen.routed:
        found["the router routed"] = seen.routed
    if seen.finished_requests is not None:
        found["the engines finished"] = seen.finished_requests
    return found


def not_ours(level: LevelResult, seen: LevelDisaggregation) -> int:
    """How many requests the servers counted beyond what this client can have sent (0: none shown)."""
    recorded, slack = ours(level)
    return max([0, *(count - recorded - slack for count in counted(seen).values())])


def other_traffic_warnings(levels: Sequence[LevelResult],
                           counters: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    """``other-traffic`` for every level whose server counts exceed this client's requests."""
    found = []
    for level in levels:
        seen = counters.get(level.load)
        if seen is None:
            continue  # unread counters are their own warning (routing-unknown, client-overhead-unknown)
        extra = not_ours(level, seen)
        if extra:
            recorded, slack = ours(level)
            sent = f"{recorded}" + (f" (and at most {slack} more cut at the level's end)" if slack else "")
            servers = " and ".join(f"{who} {count}" for who, count in counted(seen).items())
            found.append(TrustWarning(code=Trust.OTHER_TRAFFIC, load=level.load, message=(
                f"other traffic: {extra} requests not ours. During this level {servers} requests, but this client "
                f"sent {sent}: another client shares the endpoint, so the level's server counters (routing, KV, "
                "server TTFT) mix its requests with these. Benchmark an endpoint no one else is using")))
    return found
