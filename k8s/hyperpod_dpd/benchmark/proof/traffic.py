"""Whether a level's server counters hold other clients' requests, from the servers' own request counts.

The router and the engines count every request that reaches them, not only the benchmark's: on an
endpoint other clients share, their requests mix into a level's counters (a false
``not-disaggregated`` when they are short, or a KV failure masked by their transfers) and into the
server's TTFT the client's is bounded against. Two counts per level say how many requests the
servers saw: the routers' decisions (``dpd_routing_*_total``, or their routing log lines) and the
engines' finished requests (``vllm:request_success_total``, aborted ones left out: a client that
went away records none). Against them stands every request this client sent, as its own files count
them (:attr:`LevelResult.sent`: warm-up, answered and failed). genai-bench may also leave up to one
request per user unrecorded when it stops a closed-loop level at its bound (it cuts its last wave),
so that many are allowed over; aiperf, closed or open loop, runs each level to a ``--request-count``
and ends it only when every request it sent came back (aiperf==0.13.0
``aiperf/timing/phase/credit_counter.py:397-403``, awaited in ``aiperf/timing/phase/runner.py:686-708``),
so none is. When both servers' counts are read, the level is flagged only by the smaller excess: the
router's counters (its fallback's meaning not settled for requests already local) could count a
request twice, and one ambiguous counter must not fail a healthy run. More than that is traffic
that was not this benchmark's: the level is unverified (``other-traffic``), as any level whose
server figures do not describe its own requests. A level whose client files do not count what it
sent (aiperf's records file missing), or whose servers gave no request count at all, is
``other-traffic-unknown``: the check could not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.load_point import Load


def ours(level: LevelResult) -> tuple[int, int] | None:
    """The requests this client sent in the level (warm-up, answered and failed), and how many more it may have
    sent unrecorded (one per user of a genai-bench level, cut at its end); None when its files do not count them."""
    if level.sent is None:
        return None
    cut = (level.load.concurrency or 0) if level.client == Client.GENAI_BENCH.value else 0
    return level.sent, cut


def counted(seen: LevelDisaggregation) -> dict[str, int]:
    """The level's request counts by the server that made them (a count not exported is left out)."""
    found = {}
    if seen.routed:
        found["the router routed"] = seen.routed
    if seen.finished_requests is not None:
        found["the engines finished"] = seen.finished_requests
    return found


def not_ours(level: LevelResult, seen: LevelDisaggregation) -> int:
    """How many requests the servers counted beyond what this client can have sent (0: none shown, or not
    countable): the smaller excess when both servers counted, so that one ambiguous counter alone flags nothing."""
    mine = ours(level)
    counts = counted(seen).values()
    if mine is None or not counts:
        return 0
    recorded, slack = mine
    return max(0, min(count - recorded - slack for count in counts))


def other_traffic_warnings(levels: Sequence[LevelResult],
                           counters: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    """``other-traffic`` for every level whose server counts exceed this client's requests, and
    ``other-traffic-unknown`` for one whose client files do not count the requests it sent."""
    found = []
    for level in levels:
        seen = counters.get(level.load)
        if seen is None:
            continue  # unread counters are their own warning (routing-unknown, client-overhead-unknown)
        mine = ours(level)
        if mine is None:
            found.append(TrustWarning(code=Trust.OTHER_TRAFFIC_UNKNOWN, load=level.load, message=(
                "the client's files do not count every request it sent (aiperf's profile_export.jsonl, which holds "
                "the warm-up and the failed requests, is missing), so the servers' request counts could not be set "
                "against them: whether another client shared the endpoint is unchecked. Keep the records file "
                "beside the summary")))
            continue
        if not counted(seen):
            found.append(TrustWarning(code=Trust.OTHER_TRAFFIC_UNKNOWN, load=level.load, message=(
                "neither server counted this level's requests (the router routed none it counted, and the engines "
                "export no vllm:request_success_total), so this client's requests could not be set against theirs: "
                "whether another client shared the endpoint is unchecked")))
            continue
        extra = not_ours(level, seen)
        if extra:
            recorded, slack = mine
            sent = f"{recorded}" + (f" (and at most {slack} more cut at the level's end)" if slack else "")
            servers = " and ".join(f"{who} {count}" for who, count in counted(seen).items())
            found.append(TrustWarning(code=Trust.OTHER_TRAFFIC, load=level.load, message=(
                f"other traffic: {extra} requests not ours. During this level {servers} requests, but this client "
                f"sent {sent}: another client shares the endpoint, so the level's server counters (routing, KV, "
                "server TTFT) mix its requests with these. Benchmark an endpoint no one else is using")))
    return found
