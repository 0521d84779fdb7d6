"""Each replayed window's numbers and its proof of disaggregation, as a load level gets them, and the report.

A window is read like a level: the client's files for its latencies (aiperf's summary and records,
:mod:`hyperpod_dpd.benchmark.run.aiperf_results`), and the router's and decoders' counters in the pauses before and
after it, pod by pod (:class:`~hyperpod_dpd.benchmark.proof.disaggregation.LevelDisaggregation`). What differs is the
expectation: a trace mixes long and short prompts, so the router should disaggregate the window's prompts that
clear ``routing.threshold`` under both of its estimates and send those below it under both to the decoder; prompts
between the two estimates may go either way. The counters do not say which request took which path: a long
prompt sent direct and a short one disaggregated leave both counts as they were. The prompt tokens the decoders
received tell them apart, so the share proven is the fewest long prompts that the counts and those tokens allow
(:func:`fewest_above`). The KV expectation is the decoders' own prompt-token count for the window, shared out by
the trace's prompt lengths (the prompts above the threshold's share of the window's tokens).

A window is **unverified** unless at least :data:`MIN_WINDOW_REQUESTS` of its prompts are above the threshold, or
that many below it, and the counters gave a share for them: with fewer, one misrouted request moves the share by
more than the 5% between :data:`MIN_FRACTION` and all, so the test could not tell one failure from none (prompts
near the threshold prove nothing either way); its latencies are printed, its proof is not claimed.

Per window the JSON carries, under names a comparison with the emulator reads: ``window_start_s`` (replay clock),
``arrivals_per_s``, ``ttft_p90_s`` and ``tpot_p90_s`` (the client's), beside the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from hyperpod_dpd.benchmark.proof.disaggregation import (
    MIN_FRACTION,
    DpdCounters,
    LevelDisaggregation,
    kv_warnings,
)
from hyperpod_dpd.benchmark.proof.overhead import client_overhead, overhead_warnings
from hyperpod_dpd.benchmark.proof.traffic import other_traffic_warnings
from hyperpod_dpd.benchmark.proof.trust import LOST, OUTPUT_TOLERANCE, Trust, TrustWarning, level_warnings
from hyperpod_dpd.benchmark.replay.replay import Replay, Window
from hyperpod_dpd.benchmark.replay.replay_job import WINDOW_RESULT
from hyperpod_dpd.benchmark.report.report import to_json
from hyperpod_dpd.benchmark.run.aiperf_results import parse_aiperf, parse_failed_records
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult, ResultsError
from hyperpod_dpd.benchmark.run.results import _json_object
from hyperpod_dpd.benchmark.run.route import prompt_length
from hyperpod_dpd.benchmark.run.scenario import Scenario
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
    above_lengths: tuple[int, ...] = ()  # the prompts above the threshold, longest first (trace tokens)
    other_lengths: tuple[int, ...] = ()  # the prompts near or below it, longest first

    @classmethod
    def of(cls, window: Window, threshold: int) -> Expected:
        length = prompt_length(Client.AIPERF)  # aiperf builds every prompt from its own corpus, hashed or not
        above: list[int] = []
        other: list[int] = []
        below = near = 0
        for request in window.requests:
            low, high = length.estimates(request.input_tokens)
            if clears(low, threshold):
                above.append(request.input_tokens)
                continue
            other.append(request.input_tokens)
            if stays_below(high, threshold):
                below += 1
            else:
                near += 1
        return cls(above=len(above), below=below, near=near, above_tokens=sum(above),
                   tokens=sum(r.input_tokens for r in window.requests),
                   above_lengths=tuple(sorted(above, reverse=True)), other_lengths=tuple(sorted(other, reverse=True)))


def fewest_above(expected: Expected, *, disaggregated: int, received: float) -> int:
    """The fewest prompts above the threshold that can have been disaggregated, given the router's count and the
    prompt tokens the decoders received (in the trace's tokens).

    ``k`` long prompts and the ``disaggregated - k`` longest of the others bring at most the sum of their lengths;
    the true ``k`` brings at least ``received``, since a decoder receives no more of a prompt than it holds. So the
    answer is the smallest ``k`` whose most cannot fall short of ``received``. Assumed: a prompt sent straight to
    the decoder did not hit its prefix cache (those tokens count as received); a trace whose direct prompts share
    long prefixes makes the bound too kind. Counts and tokens that no ``k`` explains give the most the count allows.
    """
    above = (0, *accumulate(expected.above_lengths))  # above[k]: the k longest prompts' tokens
    other = (0, *accumulate(expected.other_lengths))
    most = min(expected.above, disaggregated)
    for k in range(max(0, disaggregated - len(other) + 1), most + 1):
        if above[k] + other[disaggregated - k] >= received:
            return k
    return most


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
        expected = self.expected
        if not self.window.requests:
            return "no request in this window"
        if max(expected.above, expected.below) < MIN_WINDOW_REQUESTS:
            return (f"only {expected.above} prompts above the threshold and {expected.below} below it "
                    f"({expected.near} near it prove neither path): under {MIN_WINDOW_REQUESTS} a side, one misrouted "
                    f"request moves the share by more than {1 - MIN_FRACTION:.0%}, so the proof cannot tell one "
                    "failure from none")
        if self.disaggregated_share is None and self.direct_share is None:
            return "the counters gave no share of either path (read none around this window)"
        return None

    @property
    def received(self) -> float | None:
        """The prompt tokens the decoders received (from the prefiller or their cache), in the trace's tokens: scaled
        by the window's tokens over the decoders' own count (the chat template's tokens), when they export it."""
        seen = self.routing
        if seen is None:
            return None
        got = seen.external_kv_tokens + seen.cache_hit_tokens
        return got * self.expected.tokens / seen.prompt_tokens if seen.prompt_tokens else float(got)

    def _fewest_above(self) -> int | None:
        seen, received = self.routing, self.received
        if seen is None or received is None:
            return None
        return fewest_above(self.expected, disaggregated=seen.disaggregated, received=received)

    @property
    def disaggregated_share(self) -> float | None:
        """At least this share of the prompts above the threshold were disaggregated (:func:`fewest_above`; None: no
        such prompt, or the counters unread)."""
        fewest = self._fewest_above()
        return None if fewest is None or not self.expected.above else fewest / self.expected.above

    @property
    def direct_share(self) -> float | None:
        """At least this share of the prompts below the threshold went straight to the decoder: the direct count less
        every prompt near the threshold and every long prompt not proven disaggregated."""
        fewest, expected = self._fewest_above(), self.expected
        if fewest is None or self.routing is None or not expected.below:
            return None
        return min(1.0, max(0, self.routing.local - expected.near - (expected.above - fewest)) / expected.below)

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
    received = seen.external_kv_tokens + seen.cache_hit_tokens
    if share is not None and share < MIN_FRACTION:
        found.append(TrustWarning(code=Trust.NOT_DISAGGREGATED, load=load, message=(
            f"the router disaggregated {seen.disaggregated} of {seen.routed} requests; of the {expected.above} "
            f"prompts above the threshold {threshold}, the counts and the {received:,} prompt tokens the decoders "
            f"received prove at least {share:.0%} were ({expected.near} near it may have "
            f"gone either way), below {MIN_FRACTION:.0%}: check the deployed routingThreshold")))
    if direct is not None and direct < MIN_FRACTION:
        found.append(TrustWarning(code=Trust.NOT_DIRECT, load=load, message=(
            f"the router sent {seen.local} requests straight to the decoder; of the {expected.below} prompts below "
            f"the threshold {threshold}, that count, the {expected.near} near it and the long prompts not proven "
            f"disaggregated leave at least {direct:.0%} proven direct, below {MIN_FRACTION:.0%}: short prompts were "
            "disaggregated (is the deployed threshold lower?) or long ones sent direct in their place")))
    if seen.disaggregated:
        found += kv_warnings(seen, load=load, expected=result.kv_expected or None)
    if seen.pod_changes:
        found.append(TrustWarning(code=Trust.POD_RESTARTED, load=load, message=(
            f"{', '.join(seen.pod_changes)} during this window: its requests were served by a changing set of pods")))
    if result.level is not None:
        found += overhead_warnings([result.level], {load: seen})
        found += other_traffic_warnings([result.level], {load: seen})  # a window is one run that waits for its own
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


def _missing_cause(replay: Replay, files: Mapping[str, str], window: Window) -> str:
    """Why a window has no result, from the run order (a level's reasons, :data:`LOST`): the pod runs the windows
    in order and stops after one whose every request failed, so a window before one with a result ran and its
    files were lost on the way to bench."""
    def wrote(other: Window) -> bool:
        stem = WINDOW_RESULT.format(index=other.index)
        return f"{stem}.json" in files or f"{stem}.jsonl" in files

    if any(wrote(later) for later in replay.windows[window.index + 1:]):
        return f"the window ran (a later window has results), but {LOST}"
    return f"no result: either {LOST}, or the run stopped before this window (its deadline, or a window before it " \
        "whose every request failed)"


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
                unreadable or _missing_cause(replay, files, window))))
        else:
            warnings += _client_checks(window, level)
        if taken is not None:
            warnings += proof_warnings(result, threshold=threshold)
        results.append(WindowResult(window=window, expected=expected, level=level, routing=routing,
                                    warnings=tuple(warnings), unreadable=unreadable))
    return results


def _ms(value: float | None) -> str:  # not columns.ms: this table has no thousands separator (1234.5, not 1,234.5)
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
