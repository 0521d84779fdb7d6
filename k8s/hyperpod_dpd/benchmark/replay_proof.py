"""Each replayed window's numbers and its proof of disaggregation, as a load level gets them, and the report.

A window is read like a level: the client's files for its latencies (aiperf's summary and records,
:mod:`hyperpod_dpd.benchmark.aiperf_results`), and the router's and decoders' counters in the pauses before and
after it, pod by pod (:class:`~hyperpod_dpd.benchmark.disaggregation.LevelDisaggregation`). What differs is the
expectation: a trace mixes long and short prompts, so the router should disaggregate the window's prompts that
clear ``routing.threshold`` under both of its estimates and send those below it under both to the decoder; prompts
between the two estimates may go either way. The counters do not say which request took which path, so the share
proven is a lower bound: the disaggregated count less every prompt near the threshold, over the prompts above it.
The KV expectation is the decoders' own prompt-token count for the window, shared out by the trace's prompt lengths
(the prompts above the threshold's share of the window's tokens).

A window with fewer than :data:`MIN_WINDOW_REQUESTS` requests is **unverified**: with so few, one misrouted
request moves the share by more than the 5% between :data:`MIN_FRACTION` and all, so the test could not tell one
failure from none; its latencies are printed, its proof is not claimed.

Per window the JSON carries, under names a comparison with the emulator reads: ``window_start_s`` (replay clock),
``arrivals_per_s``, ``ttft_p90_s`` and ``tpot_p90_s`` (the client's), beside the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.benchmark.aiperf_results import parse_aiperf, parse_failed_records
from hyperpod_dpd.benchmark.client import Client
from hyperpod_dpd.benchmark.disaggregation import (
    KV_MIN_FRACTION,
    MIN_FRACTION,
    DpdCounters,
    LevelDisaggregation,
)
from hyperpod_dpd.benchmark.levels import LevelResult, ResultsError
from hyperpod_dpd.benchmark.overhead import client_overhead, overhead_warnings
from hyperpod_dpd.benchmark.replay import Replay, Window
from hyperpod_dpd.benchmark.replay_job import WINDOW_RESULT
from hyperpod_dpd.benchmark.report import to_json
from hyperpod_dpd.benchmark.results import _json_object
from hyperpod_dpd.benchmark.route import prompt_length
from hyperpod_dpd.benchmark.scenario import Scenario
from hyperpod_dpd.benchmark.trust import OUTPUT_TOLERANCE, Trust, TrustWarning, level_warnings
from hyperpod_dpd.contracts.router import clears, stays_below
from hyperpod_dpd.load_point import Load

MIN_WINDOW_REQUESTS = 20  # one misrouted request of 20 is 5%: the gap between MIN_FRACTION and all
UNVERIFIED = "unverified"


@dataclass(frozen=True, kw_only=True)
class Expected:
    """The window's prompts by the path the router should give them (its two estimates against the threshold)."""

    above: int
    below: int
    near: int
    above_tokens: int
    tokens: int

    @classmethod
    def of(cls, window: Window, threshold: int) -> Expected:
        length = prompt_length(Client.AIPERF)  # aiperf builds every prompt from its own corpus, hashed or not
        above = below = near = above_tokens = 0
        for request in window.requests:
            low, high = length.estimates(request.input_tokens)
            if clears(low, threshold):
                above, above_tokens = above + 1, above_tokens + request.input_tokens
            elif stays_below(high, threshold):
                below += 1
            else:
                near += 1
        return cls(above=above, below=below, near=near, above_tokens=above_tokens,
                   tokens=sum(r.input_tokens for r in window.requests))


@dataclass(frozen=True, kw_only=True)
class WindowResult:
    """One window: what the client measured, what the servers counted, what was expected, and why not to trust it."""

    window: Window
    expected: Expected
    level: LevelResult | None = None
    routing: LevelDisaggregation | None = None
    warnings: tuple[TrustWarning, ...] = ()
    unreadable: str = ""

    @property
    def load(self) -> Load:
        """The window as a load point (its arrival rate), the key the level checks use."""
        return Load(rate=self.window.arrivals_per_s)

    @property
    def unverified(self) -> str | None:
        """Why the window's proof is not claimed, or None."""
        sent = len(self.window.requests)
        if not sent:
            return "no request in this window"
        if sent < MIN_WINDOW_REQUESTS:
            return (f"only {sent} requests: under {MIN_WINDOW_REQUESTS}, one misrouted request moves the share by "
                    f"more than {1 - MIN_FRACTION:.0%}, so the proof cannot tell one failure from none")
        return None

    def _share(self, counted: int | None, prompts: int) -> float | None:
        """At least this share of ``prompts`` took the path ``counted`` requests took: every prompt near the
        threshold may be one of them (None: no such prompt, or the counters unread)."""
        if counted is None or not prompts:
            return None
        return min(1.0, max(0, counted - self.expected.near) / prompts)

    @property
    def disaggregated_share(self) -> float | None:
        """At least this share of the prompts above the threshold were disaggregated."""
        return self._share(self.routing.disaggregated if self.routing else None, self.expected.above)

    @property
    def direct_share(self) -> float | None:
        """At least this share of the prompts below the threshold went straight to the decoder."""
        return self._share(self.routing.local if self.routing else None, self.expected.below)

    @property
    def kv_expected(self) -> float | None:
        """Prompt tokens the decoders should have received for the prompts above the threshold."""
        seen, expected = self.routing, self.expected
        if seen is None or not expected.above or not expected.tokens:
            return None
        total = seen.prompt_tokens if seen.prompt_tokens is not None else expected.tokens
        return total * expected.above_tokens / expected.tokens

    def as_dict(self) -> dict[str, Any]:
        window, level, seen = self.window, self.level, self.routing
        overhead = client_overhead(level, seen) if level is not None else None
        generated = seen.generation_tokens if seen is not None else None
        return {
            "window": window.index, "window_start_s": window.start_s, "window_s": window.duration_s,
            "trace_start_s": window.trace_start_s, "requests": len(window.requests),
            "arrivals_per_s": window.arrivals_per_s,
            "ttft_p50_s": level.ttft.p50 if level else None, "ttft_p90_s": level.ttft.p90 if level else None,
            "tpot_p50_s": level.tpot.p50 if level else None, "tpot_p90_s": level.tpot.p90 if level else None,
            "completed": level.completed if level else 0, "failed": level.failed if level else 0,
            "expected": {"above_threshold": self.expected.above, "below_threshold": self.expected.below,
                         "near_threshold": self.expected.near},
            "disaggregated_share": self.disaggregated_share, "direct_share": self.direct_share,
            "kv_expected_tokens": self.kv_expected,
            "server_tokens_per_s": generated / level.duration_s if generated is not None and level is not None
            and level.duration_s else None,
            "client_overhead_s": overhead, "server": seen.as_dict() if seen is not None else None,
            "verified": self.unverified is None and not self.warnings, "unverified": self.unverified,
            "warnings": [{"code": w.code.value, "message": w.message} for w in self.warnings],
            "unreadable": self.unreadable or None}


def window_level(window: Window, files: Mapping[str, str], load: Load) -> tuple[LevelResult | None, str]:
    """The window's client results from the run's files (None when it wrote none), and why a file could not be read."""
    stem = WINDOW_RESULT.format(index=window.index)
    summary, records = files.get(f"{stem}.json"), files.get(f"{stem}.jsonl")
    try:
        if summary is not None:
            return parse_aiperf(_json_object(f"{stem}.json", summary), records, load=load, where=f"{stem}.json"), ""
        if records is not None:
            return parse_failed_records(records, load=load, isl=0, osl=0, where=f"{stem}.jsonl"), ""
    except ResultsError as err:
        return None, str(err)
    return None, ""


def proof_warnings(result: WindowResult, *, threshold: int) -> list[TrustWarning]:
    """The level's checks, against what this window's prompts should have done."""
    seen, expected, load = result.routing, result.expected, result.load
    found: list[TrustWarning] = []
    if seen is None:
        return [TrustWarning(code=Trust.ROUTING_UNKNOWN, load=load, message=(
            "the router's and decoder's counters could not be read before and after this window, so nothing shows "
            "which path its requests took"))]
    if not seen.routed:
        return [TrustWarning(code=Trust.ROUTING_UNKNOWN, load=load, message=(
            "the router counted no requests during this window (are its dpd_routing_* metrics served?)"))]
    share, direct = result.disaggregated_share, result.direct_share
    if share is not None and share < MIN_FRACTION:
        found.append(TrustWarning(code=Trust.NOT_DISAGGREGATED, load=load, message=(
            f"the router disaggregated {seen.disaggregated} of {seen.routed} requests; of the {expected.above} "
            f"prompts above the threshold {threshold}, at least {share:.0%} were ({expected.near} near it may have "
            f"gone either way), below {MIN_FRACTION:.0%}: check the deployed routingThreshold")))
    if direct is not None and direct < MIN_FRACTION:
        found.append(TrustWarning(code=Trust.NOT_DIRECT, load=load, message=(
            f"the router sent {seen.local} requests straight to the decoder, but {expected.below} prompts were below "
            f"the threshold {threshold}: short prompts were disaggregated (is the deployed threshold lower?)")))
    received = seen.external_kv_tokens + seen.cache_hit_tokens
    if seen.disaggregated and received == 0:
        found.append(TrustWarning(code=Trust.NO_KV_TRANSFER, load=load, message=(
            f"the router disaggregated {seen.disaggregated} requests but the decoder received no KV tokens from the "
            "prefiller: it recomputed every prompt (see 'Retrieved 0 out of N' in its log)")))
    elif seen.disaggregated and (wanted := result.kv_expected) and received < KV_MIN_FRACTION * wanted:
        found.append(TrustWarning(code=Trust.PARTIAL_KV_TRANSFER, load=load, message=(
            f"the decoders took {received:,} prompt tokens from the prefiller or their prefix cache, "
            f"{received / wanted:.0%} of the {wanted:,.0f} the prompts above the threshold hold (below "
            f"{KV_MIN_FRACTION:.0%}): some transfers failed and were recomputed")))
    if seen.pod_changes:
        found.append(TrustWarning(code=Trust.POD_RESTARTED, load=load, message=(
            f"{', '.join(seen.pod_changes)} during this window: its requests were served by a changing set of pods")))
    if result.level is not None:
        found += overhead_warnings([result.level], {load: seen})
    return found


def _client_checks(window: Window, level: LevelResult) -> list[TrustWarning]:
    """The level's client checks (failures, a buffered stream), and the answers' length against the trace's."""
    stand_in = Scenario(isl=1, osl=2, request_rates=(1.0,), requests=1)
    found = [w for w in level_warnings(level, stand_in) if w.code is not Trust.OUTPUT_LENGTH]
    wanted = sum(r.output_tokens for r in window.requests) / len(window.requests)
    out = level.mean_output_tokens
    if level.completed and out is not None and abs(out - wanted) > OUTPUT_TOLERANCE * wanted:
        found.append(TrustWarning(code=Trust.OUTPUT_LENGTH, load=level.load, message=(
            f"answers averaged {out:.1f} output tokens, not the trace's {wanted:.1f}: the router or server dropped "
            "ignore_eos or max_tokens, so per-token figures are about shorter answers")))
    return found


def window_results(replay: Replay, files: Mapping[str, str], taken: Mapping[int, DpdCounters] | None, *,
                   threshold: int) -> list[WindowResult]:
    """Every window's result: window ``i`` ran between the pod's pauses ``i`` and ``i + 1`` (``taken``: the
    counter snapshots by pause; None when the counters were not read, as from a results folder)."""
    results = []
    for window in replay.windows:
        expected = Expected.of(window, threshold)
        if not window.requests:
            results.append(WindowResult(window=window, expected=expected))
            continue
        load = Load(rate=window.arrivals_per_s)
        level, unreadable = window_level(window, files, load)
        routing = None
        if taken is not None and window.index in taken and window.index + 1 in taken:
            routing = LevelDisaggregation.between(taken[window.index], taken[window.index + 1], load=load)
        result = WindowResult(window=window, expected=expected, level=level, routing=routing, unreadable=unreadable)
        warnings: list[TrustWarning] = []
        if level is None:
            warnings.append(TrustWarning(code=Trust.LEVEL_NOT_RUN, load=load, message=(
                unreadable or "the pod wrote no result for this window (the run stopped before it)")))
        else:
            warnings += _client_checks(window, level)
        if taken is not None:
            warnings += proof_warnings(result, threshold=threshold)
        results.append(WindowResult(window=window, expected=expected, level=level, routing=routing,
                                    warnings=tuple(warnings), unreadable=unreadable))
    return results


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:.1f}"


def _pair(a: float | None, b: float | None) -> str:
    return f"{_ms(a)}/{_ms(b)}"


@dataclass(frozen=True, kw_only=True)
class ReplayReport:
    """A replay's windows, for the table or the JSON object ``bench --trace`` prints."""

    endpoint: str
    replay: Replay
    windows: Sequence[WindowResult]
    job: str | None = None
    problem: str = ""
    identity: Mapping[str, str | None] = field(default_factory=dict)
    threshold: int = 0

    @property
    def verified(self) -> list[WindowResult]:
        return [w for w in self.windows if w.unverified is None]

    @property
    def healthy(self) -> bool:
        """The Job succeeded, no window has a warning, and at least one window was verified (exit status 0)."""
        return not self.problem and not any(w.warnings for w in self.windows) and bool(self.verified)

    def to_json(self) -> str:
        return to_json({
            "endpoint": self.endpoint, "job": self.job, **dict(self.identity), "replay": self.replay.as_dict(),
            "routing_threshold": self.threshold, "min_window_requests": MIN_WINDOW_REQUESTS,
            "windows": [w.as_dict() for w in self.windows], "trusted": self.healthy,
            "problem": self.problem or None})

    def render(self) -> str:
        replay = self.replay
        title = (f"replay: {self.endpoint}, {replay.source}, {replay.requests:,} requests at {replay.speedup:g}x in "
                 f"{len(replay.windows)} windows of {replay.window_s:g} s" + (f", job {self.job}" if self.job else ""))
        if replay.too_long:
            title += f"\n{replay.too_long:,} requests longer than max_model_len were left out"
        header = ("WIN  START s   REQ   ARR/s  TTFT p50/p90 ms  TPOT p50/p90 ms  DONE  FAILED  DISAGG above  "
                  "KV IN tok  SRV tok/s  CLIENT +ms  STATUS")
        rows = [header]
        for w in self.windows:
            level, seen = w.level, w.routing
            share = w.disaggregated_share
            disagg = "-" if seen is None else f"{seen.disaggregated}/{seen.routed}" + (
                f" {share:.0%}" if share is not None else "")
            overhead = client_overhead(level, seen) if level is not None else None
            generated = seen.generation_tokens if seen is not None else None
            server = (f"{generated / level.duration_s:.1f}" if generated is not None and level is not None
                      and level.duration_s else "-")
            status = ",".join(sorted({x.code.value for x in w.warnings})) or (UNVERIFIED if w.unverified else "ok")
            rows.append(
                f"{w.window.index:<4} {w.window.start_s:>7.0f} {len(w.window.requests):>5} "
                f"{w.window.arrivals_per_s:>7.2f} {_pair(level.ttft.p50, level.ttft.p90) if level else '-':>16} "
                f"{_pair(level.tpot.p50, level.tpot.p90) if level else '-':>16} "
                f"{level.completed if level else 0:>5} {level.failed if level else 0:>7} {disagg:>13} "
                f"{seen.external_kv_tokens if seen is not None else '-':>10} {server:>10} "
                f"{'-' if overhead is None else f'{overhead * 1e3:+.0f}':>11}  {status}")
        blocks = [title, "\n".join(rows)]
        notes = [f"window {w.window.index} ({w.window.start_s:g}-{w.window.start_s + w.window.duration_s:g} s): "
                 f"[{x.code.value}] {x.message}" for w in self.windows for x in w.warnings]
        unverified = [f"window {w.window.index}: {w.unverified}" for w in self.windows
                      if w.unverified and w.window.requests]
        if notes:
            blocks.append("cannot be trusted as measured:\n" + "\n".join(f"  - {n}" for n in notes))
        if unverified:
            blocks.append("unverified (latencies shown, proof not claimed):\n" + "\n".join(
                f"  - {n}" for n in unverified))
        if self.problem:
            blocks.append(f"the job did not succeed:\n{self.problem}")
        return "\n\n".join(blocks)
