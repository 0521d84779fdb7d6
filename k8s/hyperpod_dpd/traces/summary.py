"""What a trace asks of each pool: its lengths, its busiest windows, its prefix reuse, and tokens/s per role.

Sizing for the mean rate under-provisions every busy hour; the p99 five-minute arrival rate is the figure a
capacity plan holds against. The prompt tokens/s counts only the prompts the router sends through the prefiller
(the caller gives the router's rule, :class:`PrefillRule`: the traces sit below the contracts, so the rule is
passed in, not imported); the output tokens/s counts every request, as every request ends on the decoder.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.traces.model import Trace

DEFAULT_WINDOW_S = 300.0  # five minutes: HPA-scale reaction times, and the window public capacity plans quote
MAX_WINDOWS = 1_000_000
MIN_WINDOW_S = 1e-3  # aiperf schedules in milliseconds (models.py:299-302); 1 / 1e-320 is no finite rate
NO_HASHES = "the trace has no prefix hashes (Azure and BurstGPT traces record none; Mooncake's hash_ids do)"


class PrefillRule(Protocol):
    """The router's length rule: ``hyperpod_dpd.contracts.router.PrefillRule`` bound to ``routing.threshold``."""

    @property
    def threshold(self) -> int: ...

    def prefills(self, prompt_tokens: int) -> bool:
        """Does a prompt of this many tokens go through the prefiller?"""
        ...


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """Mean, median and p99 of a length, in tokens."""

    mean: float
    p50: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[int]) -> Lengths:
        return cls(mean=statistics.fmean(values), p50=quantile(values, 0.50), p99=quantile(values, 0.99))

    def to_json(self) -> dict[str, float]:
        return {"mean": round(self.mean, 3), "p50": round(self.p50, 3), "p99": round(self.p99, 3)}


@dataclass(frozen=True, kw_only=True)
class Window:
    """One window of the trace: its arrivals and the tokens/s each role must process.

    :param start_s: the window's start from the first arrival.
    :param requests: arrivals in [start_s, start_s + window_s).
    :param arrivals_per_s: requests / window_s (the last window, if cut short by the trace's end, reads low).
    :param prefill_tokens_per_s: prompt tokens/s of the requests the router sends through the prefiller.
    :param decode_tokens_per_s: output tokens/s of every request.
    """

    start_s: float
    requests: int
    arrivals_per_s: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float

    def to_json(self) -> dict[str, float | int]:
        return {"start_s": self.start_s, "requests": self.requests, "arrivals_per_s": round(self.arrivals_per_s, 6),
                "prefill_tokens_per_s": round(self.prefill_tokens_per_s, 3),
                "decode_tokens_per_s": round(self.decode_tokens_per_s, 3)}


@dataclass(frozen=True, kw_only=True)
class TraceSummary:
    """The figures of one trace; :meth:`to_json` and :func:`render` show them.

    :param prefix_reuse: the share of prompt blocks that lead with a prefix seen earlier in the trace: an upper
        bound of a prefix cache's hit rate (an unbounded cache). None when the trace has no hashes;
        ``prefix_reuse_note`` says why.
    :param prefix_reuse_per_request: the same per request, averaged over the requests with hashes (aiperf's
        ``analyze-trace`` ``cache_hit_rate``).
    :param p99_arrivals_per_s: the p99 of the windows' arrival rates (the p99 five-minute rate, by default).
    :param mean_arrivals_per_s: requests over the windows' span (their count x ``window_s``).
    :param prefilled_share: the share of requests the router sends through the prefiller.
    :param routing_threshold: the threshold the prefill demand was counted with. None: every prompt was counted.
    """

    source: str
    requests: int
    duration_s: float
    window_s: float
    input_tokens: Lengths
    output_tokens: Lengths
    windows: tuple[Window, ...]
    peak: Window
    p99_arrivals_per_s: float
    mean_arrivals_per_s: float
    prefilled_share: float
    prefix_reuse: float | None
    prefix_reuse_per_request: float | None
    prefix_reuse_note: str
    routing_threshold: int | None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "requests": self.requests, "duration_s": round(self.duration_s, 6),
                "window_s": self.window_s, "input_tokens": self.input_tokens.to_json(),
                "output_tokens": self.output_tokens.to_json(),
                "mean_arrivals_per_s": round(self.mean_arrivals_per_s, 6),
                "p99_window_arrivals_per_s": round(self.p99_arrivals_per_s, 6), "peak_window": self.peak.to_json(),
                "prefilled_share": round(self.prefilled_share, 6),
                "prefix_reuse": _rounded(self.prefix_reuse),
                "prefix_reuse_per_request": _rounded(self.prefix_reuse_per_request),
                "prefix_reuse_note": self.prefix_reuse_note, "routing_threshold": self.routing_threshold,
                "windows": [window.to_json() for window in self.windows]}


    def overview(self) -> tuple[Sequence[str], list[Sequence[str]]]:
        """Headers and rows of the lengths and rates, for a plain-text table (``columns.render_columns``)."""
        rows: list[Sequence[str]] = [("input tokens", *_three(self.input_tokens)),
                                     ("output tokens", *_three(self.output_tokens))]
        return ("per request", "mean", "p50", "p99"), rows

    def busiest(self, count: int = 5) -> tuple[Sequence[str], list[Sequence[str]]]:
        """Headers and rows of the ``count`` busiest windows, busiest first (earliest first on a tie)."""
        top = sorted(self.windows, key=lambda w: (-w.requests, w.start_s))[:count]
        rows: list[Sequence[str]] = [(clock(w.start_s), f"{w.requests:,}", f"{w.arrivals_per_s:,.3f}",
                                      f"{w.prefill_tokens_per_s:,.0f}", f"{w.decode_tokens_per_s:,.0f}") for w in top]
        return ("from first arrival", "requests", "requests/s", "prefill tok/s", "decode tok/s"), rows


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 6)


def _three(lengths: Lengths) -> tuple[str, str, str]:
    return f"{lengths.mean:,.1f}", f"{lengths.p50:,.0f}", f"{lengths.p99:,.0f}"


def clock(seconds: float, *, with_seconds: bool = True) -> str:
    """``d+hh:mm:ss`` (``d+hh:mm`` without seconds) from the first arrival, not the time of day (BurstGPT has none;
    Azure's is dropped)."""
    whole = int(seconds)
    days, rest = divmod(whole, 86_400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}" + (f":{rest % 60:02d}" if with_seconds else "")
    return f"{days}+{text}" if days else text


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile, interpolated between order statistics (numpy's default, statistics' ``inclusive``)."""
    if len(values) == 1:
        return float(values[0])
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[round(q * 100) - 1]


def summarise(trace: Trace, *, window_s: float = DEFAULT_WINDOW_S, routing: PrefillRule | None = None) -> TraceSummary:
    """The summary of ``trace`` in windows of ``window_s``.

    :param window_s: the window the arrival rates are counted in. :default: 300.0 (five minutes)
    :param routing: the router's rule, counting the prompts that go through the prefiller. :default: None - every
        prompt (a threshold of 0)
    :raises UsageError: an empty trace, or a window that is not a finite number of seconds, at least MIN_WINDOW_S.
    """
    if not (math.isfinite(window_s) and window_s >= MIN_WINDOW_S):
        raise UsageError(f"window: must be at least {MIN_WINDOW_S:g} s, a finite number (got {window_s:.3g}); give "
                         "e.g. 300")
    if not trace.requests:
        raise UsageError(f"{trace.source}: the trace has no requests; give a trace with at least one")
    spans = trace.duration_s / window_s
    if not spans < MAX_WINDOWS:  # a float first: a tiny window over a long trace is no integer to count to
        raise UsageError(f"window: {window_s:g} s cuts {trace.duration_s:g} s into over {MAX_WINDOWS:,} windows; "
                         "give a longer window (e.g. 300)")
    count = max(1, math.ceil(spans))
    if trace.duration_s >= count * window_s:  # the last arrival exactly on a boundary opens one more window
        count += 1
    arrivals, prompt, output = [0] * count, [0] * count, [0] * count
    prefilled = 0
    inputs, outputs = array("q"), array("q")  # one pass: a packed trace makes each request as it is read
    for request in trace.requests:
        index = min(count - 1, int(request.at_s // window_s))
        arrivals[index] += 1
        output[index] += request.output_tokens
        inputs.append(request.input_tokens)
        outputs.append(request.output_tokens)
        if routing is None or routing.prefills(request.input_tokens):
            prompt[index] += request.input_tokens
            prefilled += 1
    windows = tuple(Window(start_s=i * window_s, requests=arrivals[i], arrivals_per_s=arrivals[i] / window_s,
                           prefill_tokens_per_s=prompt[i] / window_s, decode_tokens_per_s=output[i] / window_s)
                    for i in range(count))
    reuse, per_request, note = _reuse(trace)
    return TraceSummary(
        source=trace.source, requests=len(trace.requests), duration_s=trace.duration_s, window_s=window_s,
        input_tokens=Lengths.of(inputs), output_tokens=Lengths.of(outputs), windows=windows,
        peak=max(windows, key=lambda w: w.requests), p99_arrivals_per_s=quantile([w.arrivals_per_s for w in windows],
                                                                                  0.99),
        mean_arrivals_per_s=len(trace.requests) / (count * window_s), prefilled_share=prefilled / len(trace.requests),
        prefix_reuse=reuse, prefix_reuse_per_request=per_request, prefix_reuse_note=note,
        routing_threshold=None if routing is None else routing.threshold)


def _reuse(trace: Trace) -> tuple[float | None, float | None, str]:
    """Blocks a prefix cache that never evicts would hit: per request, the leading run of blocks seen before (a
    cache reuses a prefix, not a block after a miss), as aiperf's trace analyzer counts them
    (``aiperf/dataset/synthesis/prefix_analyzer.py:214-247``, aiperf==0.13.0, "the dynamo algorithm").

    Returns the share of all prompt blocks, the mean over requests with hashes (aiperf's ``cache_hit_rate``), and
    a note.
    """
    seen: set[int] = set()
    hits = total = 0
    rates: list[float] = []
    for request in trace.requests:
        blocks = request.prefix_blocks
        if not blocks:
            continue
        run = next((i for i, block in enumerate(blocks) if block not in seen), len(blocks))
        hits, total = hits + run, total + len(blocks)
        rates.append(run / len(blocks))
        seen.update(blocks)
    if not total:
        return None, None, NO_HASHES
    return hits / total, statistics.fmean(rates), (
        f"{hits:,} of {total:,} prompt blocks of {trace.block_tokens or '?'} tokens lead with a prefix seen before: "
        "an upper bound of the prefix-cache hit rate (a cache that never evicts)")
