"""The summary of a trace, against figures worked out by hand, with the router's own length rule."""

from __future__ import annotations

import json

import pytest

from hyperpod_dpd.contracts.router import PrefillRule
from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.traces import Trace, TraceRequest, summarise
from hyperpod_dpd.traces.summary import NO_HASHES


def _trace(*rows: tuple[float, int, int], blocks: tuple[tuple[int, ...], ...] = ()) -> Trace:
    hashes = blocks or ((),) * len(rows)
    return Trace(requests=tuple(TraceRequest(at_s=at, input_tokens=i, output_tokens=o, prefix_blocks=h)
                                for (at, i, o), h in zip(rows, hashes, strict=True)),
                 source="by hand", block_tokens=512 if blocks else None)


HAND = _trace((0, 100, 1), (10, 2000, 2), (299, 50, 3), (300, 4000, 4), (650, 10, 5))


def test_windows_rates_and_lengths_are_the_hand_figures() -> None:
    summary = summarise(HAND, window_s=300, routing=PrefillRule(threshold=1000))
    assert [(w.start_s, w.requests) for w in summary.windows] == [(0, 3), (300, 1), (600, 1)]
    assert [w.prefill_tokens_per_s for w in summary.windows] == pytest.approx([2000 / 300, 4000 / 300, 0])
    assert [w.decode_tokens_per_s for w in summary.windows] == pytest.approx([6 / 300, 4 / 300, 5 / 300])
    assert summary.peak.start_s == 0 and summary.peak.arrivals_per_s == pytest.approx(3 / 300)
    # the p99 of [1, 1, 3] windows, interpolated: 1 + 0.98 x (3 - 1) = 2.96 requests per window
    assert summary.p99_arrivals_per_s == pytest.approx(2.96 / 300)
    assert (summary.input_tokens.mean, summary.input_tokens.p50, summary.input_tokens.p99) == pytest.approx(
        (1232, 100, 3920))  # p99 of [10, 50, 100, 2000, 4000]: 2000 + 0.96 x 2000
    assert summary.prefilled_share == pytest.approx(2 / 5) and summary.routing_threshold == 1000
    assert summary.mean_arrivals_per_s == pytest.approx(5 / 900)


def test_the_router_rule_counts_a_prompt_at_the_threshold_and_zero_counts_every_prompt() -> None:
    at = summarise(HAND, routing=PrefillRule(threshold=2000))
    assert at.prefilled_share == pytest.approx(2 / 5)  # 2,000 and 4,000: ">=" disaggregates
    assert summarise(HAND, routing=PrefillRule(threshold=2001)).prefilled_share == pytest.approx(1 / 5)
    every = summarise(HAND, routing=PrefillRule(threshold=0))
    assert every.prefilled_share == 1.0 and every.windows == summarise(HAND).windows


def test_an_arrival_on_the_last_boundary_opens_its_own_window() -> None:
    summary = summarise(_trace((0, 1, 1), (600, 1, 1)), window_s=300)
    assert [w.requests for w in summary.windows] == [1, 0, 1]


def test_prefix_reuse_is_the_share_of_blocks_seen_before_and_none_without_hashes() -> None:
    hashed = _trace((0, 1024, 1), (1, 1024, 1), (2, 1536, 1), blocks=((1, 2), (1, 3), (1, 2, 4)))
    summary = summarise(hashed)
    assert summary.prefix_reuse == pytest.approx(3 / 7)  # 0 of 2, then 1 of 2, then 2 of 3
    assert summary.prefix_reuse_per_request == pytest.approx((0 + 1 / 2 + 2 / 3) / 3)
    assert "3 of 7 prompt blocks of 512 tokens lead with a prefix seen before" in summary.prefix_reuse_note
    after_a_miss = summarise(_trace((0, 512, 1), (1, 1024, 1), blocks=((5,), (6, 5))))
    assert after_a_miss.prefix_reuse == 0.0  # block 5 was seen, but after the miss on 6: no prefix to reuse
    plain = summarise(HAND)
    assert plain.prefix_reuse is None and plain.prefix_reuse_per_request is None
    assert plain.prefix_reuse_note == NO_HASHES


def test_a_single_request_is_one_window_and_its_own_quantiles() -> None:
    summary = summarise(_trace((0, 7, 3)))
    assert len(summary.windows) == 1 and summary.input_tokens.p99 == 7 and summary.p99_arrivals_per_s == 1 / 300


def test_the_json_holds_every_figure_and_every_window() -> None:
    data = json.loads(json.dumps(summarise(HAND, routing=PrefillRule(threshold=1000)).to_json()))
    assert data["peak_window"] == {"start_s": 0, "requests": 3, "arrivals_per_s": 0.01,
                                   "prefill_tokens_per_s": 6.667, "decode_tokens_per_s": 0.02}
    assert len(data["windows"]) == 3 and data["routing_threshold"] == 1000 and data["prefix_reuse"] is None
    assert data["input_tokens"] == {"mean": 1232, "p50": 100, "p99": 3920}


def test_the_tables_show_the_busiest_windows_first_as_a_clock() -> None:
    day = _trace((0, 1, 1), (90_000, 5, 5), (90_001, 5, 5))
    headers, rows = summarise(day, window_s=300).busiest(2)
    assert headers[0] == "from first arrival" and [row[0] for row in rows] == ["1+01:00:00", "00:00:00"]


@pytest.mark.parametrize("window", [0.0, -1.0, float("nan"), float("inf"), 1e-320, 9e-4])
def test_a_window_that_is_no_duration_is_refused(window: float) -> None:
    """Below a millisecond 1e-320 reads as an infinite rate (aiperf schedules in ms)."""
    with pytest.raises(UsageError, match=r"window: must be at least 0\.001 s, a finite number"):
        summarise(HAND, window_s=window)


def test_an_empty_trace_and_too_many_windows_are_refused() -> None:
    with pytest.raises(UsageError, match="the trace has no requests"):
        summarise(Trace(requests=(), source="nothing"))
    with pytest.raises(UsageError, match="give a longer window"):
        summarise(_trace((0, 1, 1), (1e7, 1, 1)), window_s=1)


def test_a_tiny_window_over_a_long_trace_is_refused_before_counting() -> None:
    with pytest.raises(UsageError, match="into over 1,000,000 windows"):
        summarise(_trace((0, 1, 1), (3e8, 1, 1)), window_s=1e-3)  # 3e11 windows: refused before a list of them
