"""When a measurement cannot be trusted, and why: what a healthy run through the DPD router looks like.

A router that drops ``ignore_eos`` (or ``max_tokens``) makes requests stop early, so every
per-token figure is about shorter answers than asked for; a proxy that buffers the stream makes the
first token arrive with the last, so TTFT is really end-to-end latency and TPOT is near zero; failed
requests leave the latencies of the survivors only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.run.twin_identity import IdentityDifference, refusal
from hyperpod_dpd.load_point import Load

BUFFERED_RATIO = 0.8  # TTFT p50 at 80% of end-to-end p50 or more...
BUFFERED_TPOT_S = 0.001  # ...and tokens under 1 ms apart: the stream arrived in one piece. TTFT near E2E alone
# is also a long queue before a short answer (--osl 16 at high concurrency), which is real.
OUTPUT_TOLERANCE = 0.02  # mean output tokens within 2% of --osl


class Trust(Enum):
    FAILED_REQUESTS = "failed-requests"
    LEVEL_FAILED = "level-failed"
    LEVEL_NOT_RUN = "level-not-run"
    OUTPUT_LENGTH = "output-length"
    BUFFERED_STREAM = "buffered-stream"
    NOT_DISAGGREGATED = "not-disaggregated"
    NO_KV_TRANSFER = "no-kv-transfer"
    PARTIAL_KV_TRANSFER = "partial-kv-transfer"
    POD_RESTARTED = "pod-restarted"
    NOT_DIRECT = "not-direct"
    ROUTING_UNKNOWN = "routing-unknown"
    CLIENT_OVERHEAD = "client-overhead"
    OVERHEAD_UNKNOWN = "client-overhead-unknown"
    OTHER_TRAFFIC = "other-traffic"
    OTHER_TRAFFIC_UNKNOWN = "other-traffic-unknown"
    UNCHECKED = "unchecked"
    TWIN_DIFFERS = "twin-differs"
    PROMPT_LENGTH = "prompt-length"
    SERVER_COUNT_SHORT = "server-count-short"
    SUMMARY_LOST = "summary-lost"
    POD_OUTLIER = "pod-outlier"


@dataclass(frozen=True, kw_only=True)
class TrustWarning:
    """One reason not to believe a level's numbers, with what to check."""

    code: Trust
    load: Load
    message: str

    def render(self) -> str:
        return f"[{self.code.value}] {self.load.describe()}: {self.message}"

    def as_dict(self) -> dict[str, object]:
        return {"code": self.code.value, **self.load.as_dict(), "message": self.message}


def level_warnings(level: LevelResult, scenario: Scenario) -> list[TrustWarning]:
    """Every reason to distrust one level."""
    found: list[TrustWarning] = []
    codes = ", ".join(f"HTTP {code} x{count}" for code, count in sorted(level.error_codes.items())) or "no codes"
    sample = f"; first error: {level.first_error}" if level.first_error else ""
    if level.summary_lost:
        found.append(TrustWarning(code=Trust.SUMMARY_LOST, load=level.load, message=(
            f"the client's summary of this level is missing: its records show {level.completed} of {level.requests} "
            "requests answered, so the level ran, but its throughput and latency percentiles were lost with the "
            "summary (aiperf's .json; the Job's log loses its oldest part once kubelet rotates it past 10 MiB). "
            "Its figures are unknown, not 0. Fix: keep the S3 upload (the default) and read the run from there")))
        return found
    if level.completed == 0:
        found.append(TrustWarning(code=Trust.LEVEL_FAILED, load=level.load, message=(
            f"every request failed ({level.failed}: {codes}){sample}. Check the endpoint is ready "
            "(`hyperpod-dpd verify --smoke`) and the Job's --api-base")))
        return found
    if level.failed:
        found.append(TrustWarning(code=Trust.FAILED_REQUESTS, load=level.load, message=(
            f"{level.failed} of {level.requests} requests failed ({level.error_rate:.1%}: {codes}){sample}; the "
            "latencies describe the survivors only")))
    out = level.mean_output_tokens
    if out is not None and abs(out - scenario.osl) > OUTPUT_TOLERANCE * scenario.osl:
        found.append(TrustWarning(code=Trust.OUTPUT_LENGTH, load=level.load, message=(
            f"requests produced {out:.1f} output tokens on average, not --osl {scenario.osl}: the router or server "
            "dropped ignore_eos or max_tokens, so TPOT and throughput describe shorter answers")))
    ttft, e2e, tpot = level.ttft.p50, level.e2e.p50, level.tpot.p50
    if ttft is not None and e2e and ttft >= BUFFERED_RATIO * e2e and tpot is not None and tpot < BUFFERED_TPOT_S:
        found.append(TrustWarning(code=Trust.BUFFERED_STREAM, load=level.load, message=(
            f"TTFT p50 {ttft * 1e3:.0f} ms is {ttft / e2e:.0%} of end-to-end p50 {e2e * 1e3:.0f} ms: the stream "
            "arrived in one piece (a proxy buffered it), so TTFT is really end-to-end latency and TPOT is wrong")))
    return found


def unchecked_warnings(results: BenchmarkResults, *, counters_file: str, why: str | None,
                       whose: str = "router and decoder") -> list[TrustWarning]:
    """One :attr:`Trust.UNCHECKED` per level of a results folder without usable counters (``counters_file``, the
    one a live run writes beside its results): the client's files alone cannot show which path the requests took,
    whether the KV cache arrived, or how much of the TTFT is the client's, so no level is verified against the
    servers. ``why`` the folder's counters file was refused, when it was (None: the folder holds none)."""
    cause = f"its {counters_file} was refused ({why})" if why else f"the folder holds no {counters_file}"
    return [TrustWarning(code=Trust.UNCHECKED, load=level.load, message=(
        f"not checked against the servers: {cause}, so the {whose} counters were not read for this level and "
        "its numbers are the client's alone. Fix: re-run it live (hyperpod-dpd bench), or keep the "
        f"{counters_file} the live run wrote beside the results (it uploads it into the run's S3 folder)"))
        for level in results.levels]


def trust_warnings(results: BenchmarkResults, scenario: Scenario) -> list[TrustWarning]:
    """Warnings for every level, in load order, then the levels that never ran."""
    found = [warning for level in results.levels for warning in level_warnings(level, scenario)]
    found += [TrustWarning(code=Trust.LEVEL_NOT_RUN, load=load, message=_missing_cause(results, scenario, load))
              for load in results.missing]
    return found


LOST = ("its result file reached bench in neither copy (the Job's log loses its oldest part once kubelet rotates it "
        "past 10 MiB, and the S3 copy was not read or not written)")


def _missing_cause(results: BenchmarkResults, scenario: Scenario, load: Load) -> str:
    """Why ``load`` has no result, from what the run order shows: the pod runs the levels in order and stops after
    one whose every request failed, so a level with a later level's result ran and was lost on the way to bench."""
    order = scenario.loads if load in scenario.loads else tuple(sorted({*results.loads, load}, key=Load.sort_key))
    place = order.index(load)
    earlier = [level for level in (results.level(other) for other in order[:place]) if level is not None]
    cut = f"; no readable result: {'; '.join(results.unreadable)}" if results.unreadable else ""
    if any(results.level(other) is not None for other in order[place + 1:]):
        return f"the level ran (a later level has results), but {LOST}{cut}"
    failed = next((level for level in reversed(earlier) if level.completed == 0), None)
    if failed is not None:
        return (f"not run: the benchmark stops after a level where every request failed "
                f"({failed.load.describe()}){cut}")
    return f"no result: either {LOST}, or the run hit its deadline before this level{cut}"


def twin_identity_warnings(results: BenchmarkResults,
                           differences: Sequence[IdentityDifference]) -> list[TrustWarning]:
    """One :attr:`Trust.TWIN_DIFFERS` per twin level when the twin serves otherwise than the DPD endpoint
    (:mod:`~hyperpod_dpd.benchmark.run.twin_identity`): its numbers are not "the same model, aggregated"."""
    if not differences:
        return []
    refused = refusal(differences)
    stated = "; ".join(d.render() for d in differences)
    consequence = (f"{refused}: the A/B gives no verdict. Fix: deploy the twin from the same spec "
                   "(hyperpod-dpd synth renders it) and run again" if refused else
                   f"its engine runs otherwise than DPD's ({stated}): the A/B's differences include these")
    return [TrustWarning(code=Trust.TWIN_DIFFERS, load=level.load, message=consequence) for level in results.levels]
