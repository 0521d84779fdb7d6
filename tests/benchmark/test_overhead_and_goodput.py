"""The client's own share of TTFT, measured against the stub's server-side TTFT, and goodput under an SLO."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from hyperpod_dpd.benchmark.proof.disaggregation import DpdCounters, LevelDisaggregation, bucket_quantile
from hyperpod_dpd.benchmark.proof.overhead import (
    BOUND_S,
    TAIL_BOUND_RATIO,
    client_overhead,
    order_statistic,
    overhead_bound,
    overhead_warnings,
    quantile,
    quantile_overheads,
    resolution_notes,
    router_ttft,
    tail_bound,
)
from hyperpod_dpd.benchmark.proof.trust import Trust
from hyperpod_dpd.benchmark.report.report import render_results
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.results import BenchmarkResults, parse_run, read_directory
from hyperpod_dpd.load_point import Load


def test_the_client_overhead_is_measured_and_bounded_at_each_level(healthy_run: Any) -> None:
    """genai-bench, run as the Job runs it, against a stub that timed its own first tokens (20 ms).

    The overhead is what genai-bench measured beyond the server, request for request; at these levels it
    stays under the stated bound on this machine (docs/bench.md quotes the figures)."""
    results = read_directory(healthy_run.folder)
    routing = healthy_run.routing()
    for level in results.levels:
        seen = routing[level.load]
        assert seen.router_ttft_mean_s is not None and 0.019 < seen.router_ttft_mean_s < 0.05
        overhead = client_overhead(level, seen)
        assert overhead is not None and level.client_ttft_mean is not None
        assert overhead == level.client_ttft_mean - seen.router_ttft_mean_s
        assert 0 < overhead < BOUND_S, f"{level.load.describe()}: {overhead * 1e3:.1f} ms"
    # p50 and p99: with a handful of requests per level the p99 is the slowest request, which genai-bench on a busy
    # machine sometimes holds 100 ms or more (136 ms against the stub's 20 ms, seen here). Such a flag is right, so
    # what is asserted is that every flag is borne out by the stub's own clock for the same requests.
    truth = dict(zip(healthy_run.loads, healthy_run.server_ttfts_by_level(), strict=True))
    for warning in overhead_warnings(results.levels, routing):
        level = next(lv for lv in results.levels if lv.load == warning.load)
        assert warning.code is Trust.CLIENT_OVERHEAD and "TTFT p" in warning.message, warning.render()
        over = [q for q in quantile_overheads(level, router_ttft(routing[level.load])).figures.values()
                if q.verdict == "over"]
        assert over, warning.render()
        for figure in over:
            q = {"p50": 0.5, "p99": 0.99}[figure.name]
            stub = order_statistic(list(truth[level.load]), q)  # the same rank of the stub's own TTFTs
            assert stub is not None
            assert figure.client_s - stub > figure.limit_s, (warning.render(), stub)


def test_an_overhead_above_the_bound_is_flagged(healthy_run: Any) -> None:
    """The same client numbers against a router that answered 100 ms faster than the client saw."""
    results = read_directory(healthy_run.folder)
    level = results.levels[0]
    assert level.client_ttft_mean is not None
    server = level.client_ttft_mean - 0.1
    seen = LevelDisaggregation(load=level.load, disaggregated=10, local=0, fallback=0,
                               external_kv_tokens=500, router_ttft_mean_s=server)
    (warning,) = overhead_warnings([level], {level.load: seen})
    assert warning.code is Trust.CLIENT_OVERHEAD and "100 ms above the router's own" in warning.message
    assert overhead_bound(2.0) == 0.2 and overhead_bound(0.1) == BOUND_S


def test_goodput_counts_requests_within_both_targets(healthy_run: Any) -> None:
    """Recounted here from genai-bench's own per-request records."""
    for name, text in healthy_run.files().items():
        if "_num_concurrency_" not in name:
            continue
        data = json.loads(text)
        level = parse_run(data, where=name)
        answered = [r for r in data["individual_request_metrics"] if r["error_code"] is None]
        assert len(level.answered) == len(answered) >= level.completed > 0  # the warm-up is answered too
        assert 0 <= level.warmup_answered < len(answered)
        answered = answered[level.warmup_answered:]  # GOOD leaves out the leading requests genai-bench drops
        for ttft_s, tpot_s in ((0.1, 0.05), (0.03, None), (None, 0.006), (0.001, None)):
            good = sum(1 for r in answered if (ttft_s is None or r["ttft"] <= ttft_s)
                       and (tpot_s is None or (r["tpot"] is not None and r["tpot"] <= tpot_s)))
            assert level.goodput(ttft_s=ttft_s, tpot_s=tpot_s) == (good, good / level.duration_s)
        assert level.goodput(ttft_s=0.001, tpot_s=None)[0] == 0
        assert level.goodput(ttft_s=None, tpot_s=None)[0] == len(answered)


def _level(client_ttfts: list[float]) -> LevelResult:
    none = Percentiles(None, None, None)
    return LevelResult(load=C64, scenario="D(4352,256)", ttft=none, tpot=none, e2e=none, output_tokens_per_s=0.0,
                       completed=len(client_ttfts), failed=0, duration_s=30.0, mean_input_tokens=4352.0,
                       mean_output_tokens=256.0, answered=tuple((ttft, 0.02) for ttft in client_ttfts))


C64 = Load(concurrency=64)
# The router's TTFT histogram for 100 requests: 98 at 520 ms, 2 at 730 ms (its buckets as Prometheus text).
ROUTER_TTFT = "".join(f'dpd_e2e_ttft_seconds_bucket{{le="{le}"}} {count}\n' for le, count in (
    ("0.25", 0), ("0.5", 0), ("0.55", 98), ("0.6", 98), ("0.75", 100), ("1.0", 100), ("2.5", 100), ("+Inf", 100)))
ROUTER_TTFT += "dpd_e2e_ttft_seconds_sum 52.42\ndpd_e2e_ttft_seconds_count 100\n"
ROUTING = "dpd_routing_disaggregated_total 100\n"


def _seen(router_text: str) -> LevelDisaggregation:
    before = DpdCounters.parse({"r": ""}, {"d": ""})
    return LevelDisaggregation.between(before, DpdCounters.parse({"r": router_text}, {"d": ""}), load=C64)


def test_the_tail_of_the_client_overhead_is_bounded() -> None:
    """The audit's aiperf level at 64 streams: the mean overhead +39 ms passes its 52 ms bound, but two requests the
    client held 250 ms longer put the client's p99 at 980 ms against the router's at most 750 ms. Before: trusted."""
    seen = _seen(ROUTING + ROUTER_TTFT)
    assert seen.router_ttft_mean_s is not None and abs(seen.router_ttft_mean_s - 0.5242) < 1e-9
    assert seen.router_ttft_bounds(0.99) == (0.6, 0.75) and seen.router_ttft_bounds(0.5) == (0.5, 0.55)
    level = _level([0.555] * 98 + [0.98] * 2)
    overhead = client_overhead(level, seen)
    assert overhead is not None and overhead < overhead_bound(seen.router_ttft_mean_s)  # the mean passes
    (warning,) = overhead_warnings([level], {C64: seen})
    assert warning.code is Trust.CLIENT_OVERHEAD
    assert "TTFT p99 is 980 ms, at least 230 ms above the router's (at most 750 ms" in warning.message
    assert f"{tail_bound(0.75) * 1e3:.0f} ms bound" in warning.message and tail_bound(0.75) == TAIL_BOUND_RATIO * 0.75


def test_a_client_within_the_bounds_at_every_quantile_passes() -> None:
    seen = _seen(ROUTING + ROUTER_TTFT)
    level = _level([0.53] * 98 + [0.74] * 2)
    assert overhead_warnings([level], {C64: seen}) == []
    found = quantile_overheads(level, router_ttft(seen))
    p50, p99 = found.figures["p50"], found.figures["p99"]
    # Prometheus' linear estimate inside (0.5, 0.55]: rank 50 of the bucket's 98 requests
    assert p50.server.estimate == pytest.approx(0.5 + 0.05 * 50 / 98)
    assert p50.least_s == pytest.approx(0.53 - 0.55) and p50.most_s == pytest.approx(0.03)
    assert p50.verdict == "within"
    # the 99th fastest (740 ms) against the bucket (600, 750]: between -10 and +140 ms, the bound 120-150 ms
    assert p99.verdict == "unresolved" and p99.most_s == pytest.approx(0.14)
    assert p99.as_dict()["server_between_s"] == [0.6, 0.75]


def _histogram(*buckets: tuple[str, int], total_s: float) -> LevelDisaggregation:
    count = dict(buckets)["+Inf"]
    return _seen(ROUTING + "".join(f'dpd_e2e_ttft_seconds_bucket{{le="{le}"}} {n}\n' for le, n in buckets)
                 + f"dpd_e2e_ttft_seconds_sum {total_s}\ndpd_e2e_ttft_seconds_count {count}\n")


def test_short_and_long_prompts_10_ms_apart_are_not_flagged() -> None:
    """Half the requests local (50 ms), half disaggregated (1.2 s), the client 10 ms behind on each. numpy's
    linear p50 sits between the two groups (630 ms), 575 ms above the bucket holding the server's 50th request;
    the order statistic the histogram's rank reads (the 50th fastest, 60 ms) is not. Before: flagged."""
    seen = _histogram(("0.04", 0), ("0.06", 50), ("1.0", 50), ("2.5", 100), ("+Inf", 100), total_s=62.5)
    level = _level([0.06] * 50 + [1.21] * 50)
    assert quantile(list(map(lambda a: a[0], level.answered)), 0.5) == pytest.approx(0.635)
    assert overhead_warnings([level], {C64: seen}) == []
    p50 = quantile_overheads(level, router_ttft(seen)).figures["p50"]
    assert p50.client_s == 0.06 and p50.verdict == "within" and p50.shown_s == pytest.approx(0.635)


def test_one_slow_outlier_is_not_the_p99_of_the_others() -> None:
    """100 requests at 500 ms and one at 30 s on the server, each 10 ms later at the client: the interpolated p99
    leans toward the outlier, the 100th-fastest answer does not."""
    seen = _histogram(("0.5", 0), ("0.75", 100), ("2.5", 100), ("+Inf", 101), total_s=80.0)
    level = _level([0.51] * 100 + [30.01])
    assert overhead_warnings([level], {C64: seen}) == []
    assert quantile_overheads(level, router_ttft(seen)).figures["p99"].client_s == 0.51


def test_requests_the_server_counted_beyond_the_clients_move_the_bound_by_their_number() -> None:
    """The client answered 100; the router counted 110 (a cut wave of 10 fast ones). The client's 99th fastest on
    the server's clock is at most the server's 109th: a fast extra can only lower the server's quantile."""
    seen = _histogram(("0.1", 10), ("0.5", 10), ("0.55", 108), ("0.75", 110), ("+Inf", 110), total_s=55.0)
    level = _level([0.53] * 98 + [0.74] * 2)
    p99 = quantile_overheads(level, router_ttft(seen)).figures["p99"]
    assert (p99.floor.lower, p99.bound.upper) == (0.5, 0.75)  # the buckets of ranks 99 and 109
    assert overhead_warnings([level], {C64: seen}) == []
    fewer = _histogram(("0.55", 90), ("+Inf", 90), total_s=47.0)
    (warning,) = overhead_warnings([level], {C64: fewer})
    assert warning.code is Trust.OVERHEAD_UNKNOWN
    assert "counted 90 requests, fewer than the 100 the client answered" in warning.message


def test_a_histogram_of_one_bucket_leaves_the_quantiles_unverified() -> None:
    """A router that serves only the +Inf bucket says nothing of its quantiles. Before, only the mean was bounded
    and the p99 +425 ms below passed, trusted."""
    coarse = ROUTING + 'dpd_e2e_ttft_seconds_bucket{le="+Inf"} 100\n' + ROUTER_TTFT.split("\n", 8)[-1]
    (warning,) = overhead_warnings([_level([0.555] * 98 + [0.98] * 2)], {C64: _seen(coarse)})
    assert warning.code is Trust.OVERHEAD_UNKNOWN
    assert "has no finite bucket, so its TTFT p50 and p99 cannot be placed" in warning.message
    assert "the mean is within its bound" in warning.message


def test_a_p99_above_the_top_finite_bucket_is_unverified_not_passed() -> None:
    """The router's top finite bucket is 750 ms and 2 of 100 requests took longer: its p99 is only "above 750 ms".
    Before, the p99 check was skipped without a word and the level passed on its mean and p50."""
    seen = _histogram(("0.5", 0), ("0.55", 98), ("0.75", 98), ("+Inf", 100), total_s=53.9)
    level = _level([0.53] * 98 + [1.6] * 2)
    assert seen.router_ttft_bounds(0.99) is None
    (warning,) = overhead_warnings([level], {C64: seen})
    assert warning.code is Trust.OVERHEAD_UNKNOWN
    assert "TTFT p99 lies above the top finite bucket of dpd_e2e_ttft_seconds (750 ms)" in warning.message
    p99 = quantile_overheads(level, router_ttft(seen)).figures["p99"]
    assert p99.verdict == "unplaced" and p99.least_s is None and p99.as_dict()["server_between_s"] == [0.75, None]
    # a client p99 within the bound of the top edge is within the bound of anything above it
    near = _level([0.53] * 98 + [0.8] * 2)
    assert overhead_warnings([near], {C64: seen}) == []
    assert quantile_overheads(near, router_ttft(seen)).figures["p99"].verdict == "within"


def test_a_bucket_too_wide_to_decide_is_said_in_the_table() -> None:
    """The server's p99 lies in (1.0, 2.5] s and the client's is 2.4 s: anything from -100 ms to +1,400 ms. No
    flag (nothing shows an excess), but the printed results say the p99 was checked to the bucket's width only."""
    seen = _histogram(("0.5", 0), ("1.0", 98), ("2.5", 100), ("+Inf", 100), total_s=92.0)
    level = _level([0.9] * 98 + [2.4] * 2)
    assert overhead_warnings([level], {C64: seen}) == []
    assert quantile_overheads(level, router_ttft(seen)).figures["p99"].verdict == "unresolved"
    p50_note, note = resolution_notes([level], {C64: seen})
    assert "TTFT p50 added between -100 and +400 ms" in p50_note
    assert "TTFT p99 added between -100 and +1400 ms (the server's figure lies in 1000-2500 ms)" in note
    results = BenchmarkResults(levels=(level,))
    assert note in render_results("dpd", results, [], {C64: seen})


def test_the_bucket_quantile_is_prometheus_histogram_quantile() -> None:
    """Prometheus' BucketQuantile (promql/quantile.go): the first bucket starts at 0, linear inside a bucket, a
    bucket without requests between two counted ones is skipped, and a histogram without +Inf is no histogram."""
    buckets = {0.1: 0.0, 0.2: 10.0, 0.4: 10.0, 0.8: 30.0, math.inf: 30.0}
    low = bucket_quantile(buckets, 0.1)
    assert low is not None and (low.lower, low.upper) == (0.1, 0.2) and low.estimate == pytest.approx(0.13)
    mid = bucket_quantile(buckets, 0.5)
    assert mid is not None and (mid.lower, mid.upper) == (0.4, 0.8) and mid.estimate == pytest.approx(0.5)
    first = bucket_quantile({1.0: 4.0, math.inf: 4.0}, 0.5)
    assert first is not None and first.lower == 0.0 and first.estimate == pytest.approx(0.5)
    assert bucket_quantile({0.5: 3.0}, 0.5) is None and bucket_quantile({math.inf: 0.0}, 0.5) is None


def test_a_router_without_its_ttft_histogram_leaves_the_level_unverified(healthy_run: Any) -> None:
    """The audit's run: the router served its routing counts but no dpd_e2e_ttft_seconds, and a client TTFT p50 of
    979 ms against the server's 505 ms was reported trusted, exit 0. Now the level says it is unverified."""
    results = read_directory(healthy_run.folder)
    seen = _seen(ROUTING)
    assert seen.router_ttft_mean_s is None and client_overhead(results.levels[0], seen) is None
    warnings = overhead_warnings(results.levels, {level.load: seen for level in results.levels})
    assert [w.code for w in warnings] == [Trust.OVERHEAD_UNKNOWN] * len(results.levels)
    assert "client's own share of TTFT could not be measured" in warnings[0].message


def test_genai_benchs_overhead_is_not_told_to_get_more_cpu() -> None:
    """genai-bench blocks inside one event loop: more CPU does not help it, the default client (aiperf) does.
    Before, both clients were told to "give it more CPU with a larger node"."""
    load = Load(concurrency=32)
    none = Percentiles(None, None, None)
    level = LevelResult(load=load, scenario="D(4352,256)", ttft=none, tpot=none, e2e=none, output_tokens_per_s=1.0,
                        completed=1, failed=0, duration_s=1.0, mean_input_tokens=None, mean_output_tokens=None,
                        answered=((0.65, 0.02),), client=Client.GENAI_BENCH.value)
    seen = LevelDisaggregation(load=load, disaggregated=1, local=0, fallback=0, external_kv_tokens=4352,
                               router_ttft_mean_s=0.5)
    (warning,) = overhead_warnings([level], {load: seen})
    assert "leave --client out to run aiperf" in warning.message and "more CPU does not" in warning.message
    (other,) = overhead_warnings([dataclasses.replace(level, client=Client.AIPERF.value)], {load: seen})
    assert "lower the load per level" in other.message and "--client" not in other.message


def test_a_level_without_per_request_records_is_unverified_not_skipped() -> None:
    """aiperf's summary counts 100 answered requests but its profile_export.jsonl is lost: no client TTFT to set
    against the router's. Before, the overhead check skipped the level without a word (trusted on that count)."""
    level = dataclasses.replace(_level([0.53] * 100), answered=())
    (warning,) = overhead_warnings([level], {C64: _seen(ROUTING + ROUTER_TTFT)})
    assert warning.code is Trust.OVERHEAD_UNKNOWN
    assert "counts 100 answered requests but its files hold no per-request records" in warning.message
    assert "profile_export.jsonl" in warning.message
    # a level nothing answered is level-failed's, not this check's
    assert overhead_warnings([dataclasses.replace(level, completed=0)], {C64: _seen(ROUTING + ROUTER_TTFT)}) == []
