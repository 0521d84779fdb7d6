"""``bench --trace`` without a cluster: windows, the options' and the trace's refusals, the ConfigMap and its limit,
and each window's proof against recorded counters."""

from __future__ import annotations

import base64
import gzip
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import fuzz_examples

from hyperpod_dpd.benchmark.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.replay import (
    CONFIG_MAP_LIMIT,
    MAX_WINDOWS,
    Replay,
    config_map,
    hash_problems,
    option_problems,
    plan_replay,
    size_problems,
    window_files,
)
from hyperpod_dpd.benchmark.replay_proof import Expected, WindowResult, proof_warnings, window_results
from hyperpod_dpd.benchmark.trust import Trust
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.traces import BLOCK_TOKENS, Trace, TraceRequest

THRESHOLD = 4096


def trace(*requests: TraceRequest) -> Trace:
    return Trace(requests=tuple(requests), source="test.jsonl (mooncake)")


def poisson(count: int, *, seed: int = 0, hashes: bool = False) -> Trace:
    """``count`` Poisson arrivals at 1/s with the lengths of chat traffic, and prefix hashes when asked."""
    rng, at, requests = random.Random(seed), 0.0, []
    for index in range(count):
        tokens = rng.randint(100, 8000)
        blocks = tuple(rng.randrange(10**9) for _ in range(-(-tokens // BLOCK_TOKENS))) if hashes else ()
        requests.append(TraceRequest(at_s=round(at, 3), input_tokens=tokens, output_tokens=rng.randint(10, 800),
                                     prefix_blocks=blocks))
        at += rng.expovariate(1.0) if index else 0.0
    return Trace(requests=tuple(requests), source="poisson", block_tokens=BLOCK_TOKENS if hashes else None)


def test_windows_run_on_the_replay_clock_and_the_last_holds_the_last_request() -> None:
    replay = plan_replay(trace(*(TraceRequest(at_s=at, input_tokens=5000, output_tokens=100)
                                 for at in (0.0, 59.9, 60.0, 200.0))), speedup=2.0, window_s=30.0)
    assert [len(w.requests) for w in replay.windows] == [2, 1, 0, 1]  # 0 and 29.95 s; 30 s; none; 100 s
    assert [w.trace_start_s for w in replay.windows] == [0.0, 60.0, 120.0, 180.0]
    assert replay.windows[1].requests[0].at_s == 0.0 and replay.windows[3].requests[0].at_s == 10.0
    assert replay.windows[0].arrivals_per_s == 2 / 30


def test_requests_the_model_cannot_hold_are_left_out_and_counted() -> None:
    replay = plan_replay(trace(TraceRequest(at_s=0.0, input_tokens=9000, output_tokens=100),
                               TraceRequest(at_s=1.0, input_tokens=100, output_tokens=100)), max_model_len=8192)
    assert (replay.requests, replay.too_long) == (1, 1)
    with pytest.raises(SpecError, match="no request to replay within max_model_len 100"):
        plan_replay(trace(TraceRequest(at_s=0.0, input_tokens=100, output_tokens=100)), max_model_len=100)


@pytest.mark.parametrize(("speedup", "window", "field"), [
    (0.0, 300.0, "--trace-speedup"), (-1.0, 300.0, "--trace-speedup"), (float("nan"), 300.0, "--trace-speedup"),
    (float("inf"), 300.0, "--trace-speedup"), (1001.0, 300.0, "--trace-speedup"), (1.0, 0.5, "--trace-window"),
    (1.0, float("inf"), "--trace-window"), (1.0, float("nan"), "--trace-window")])
def test_options_that_cannot_be_replayed_are_refused_with_the_fix(speedup: float, window: float, field: str) -> None:
    (problem,) = option_problems(speedup=speedup, window_s=window)
    assert problem.field == field and problem.fix


def test_too_many_windows_are_refused() -> None:
    far = trace(TraceRequest(at_s=0.0, input_tokens=1, output_tokens=1),
                TraceRequest(at_s=MAX_WINDOWS * 10.0, input_tokens=1, output_tokens=1))
    with pytest.raises(SpecError, match="--trace-window") as raised:
        plan_replay(far, window_s=10.0)
    assert "higher --trace-speedup" in raised.value.problems[0].fix
    assert len(plan_replay(far, window_s=20.0).windows) == MAX_WINDOWS // 2 + 1


def test_hashes_aiperf_cannot_build_are_refused() -> None:
    """aiperf's rule (prompt.py:629-669): a last block outside (0, 512] tokens, or one hash at two sizes."""
    fine = (TraceRequest(at_s=0, input_tokens=600, output_tokens=2, prefix_blocks=(1, 2)),
            TraceRequest(at_s=1, input_tokens=1200, output_tokens=2, prefix_blocks=(1,)))  # prefix-only: 1 is whole
    assert hash_problems(fine, where="w") == []
    (overshoot,) = hash_problems((TraceRequest(at_s=0, input_tokens=600, output_tokens=2, prefix_blocks=(1, 2, 3)),),
                                 where="window 0")
    assert overshoot.field == "--trace" and "3 prefix hashes" in overshoot.message
    (two_sizes,) = hash_problems((*fine, TraceRequest(at_s=2, input_tokens=100, output_tokens=2,
                                                      prefix_blocks=(2,))), where="window 0")
    assert two_sizes.value == "window 0, request 3" and "block of 100 tokens" in two_sizes.message
    with pytest.raises(SpecError, match="two sizes"):
        plan_replay(Trace(requests=(*fine, TraceRequest(at_s=2, input_tokens=100, output_tokens=2,
                                                        prefix_blocks=(2,))), source="t", block_tokens=512))


def test_hashes_of_another_block_size_are_refused() -> None:
    hashed = TraceRequest(at_s=0, input_tokens=640, output_tokens=2, prefix_blocks=(1, 2, 3, 4, 5))
    with pytest.raises(SpecError, match="prefix hashes of 128 tokens each") as raised:
        plan_replay(Trace(requests=(hashed,), source="t", block_tokens=128))
    assert raised.value.problems[0].fix == "regenerate the trace with 512-token blocks"


def test_a_small_trace_travels_in_one_config_map_as_mooncake_rows() -> None:
    first = TraceRequest(at_s=0.0, input_tokens=5000, output_tokens=100, prefix_blocks=tuple(range(1, 11)))
    replay = plan_replay(trace(first, TraceRequest(at_s=0.25, input_tokens=200, output_tokens=7)), window_s=60.0)
    files = window_files(replay)
    assert window_files(replay) == files  # the same bytes every time (gzip without a timestamp)
    made = config_map("bench-x-trace", "default", files)
    assert made["kind"] == "ConfigMap" and made["immutable"] is True and list(made["binaryData"]) == [
        "window-0.jsonl.gz"]
    rows = [json.loads(line) for line in gzip.decompress(base64.b64decode(made["binaryData"]["window-0.jsonl.gz"]))
            .decode().splitlines()]
    assert rows == [{"timestamp": 0, "input_length": 5000, "output_length": 100, "hash_ids": list(range(1, 11))},
                    {"timestamp": 250, "input_length": 200, "output_length": 7}]  # aiperf reads milliseconds


def test_a_trace_above_the_config_map_limit_is_refused_before_anything_is_created() -> None:
    """Random hashes do not compress: 20,000 requests of about 8 hashes each (about 58 bytes a request gzipped) pass
    the 1 MiB of one ConfigMap."""
    files = window_files(plan_replay(poisson(20_000, hashes=True)))
    total = sum(map(len, files.values()))
    assert total > CONFIG_MAP_LIMIT
    (problem,) = size_problems(files)
    assert problem.field == "--trace" and problem.value == f"{total:,} bytes gzipped"
    assert "1,048,576 bytes" in problem.message and "cut it to about" in problem.fix
    with pytest.raises(SpecError, match="does not fit a ConfigMap"):
        config_map("bench-x-trace", "default", files)


def test_a_trace_without_hashes_fits_about_a_hundred_thousand_requests() -> None:
    """What docs/bench.md promises: gzipped Mooncake rows without hashes take about 10 bytes per request."""
    files = window_files(plan_replay(poisson(5000)))
    per_request = sum(map(len, files.values())) / 5000
    assert 8 < per_request < 12, per_request
    assert size_problems(files) == []


# --- each window's proof, against recorded counters -----------------------------------------------------------

def _window(long: int = 30, short: int = 0) -> Replay:
    return plan_replay(trace(*(TraceRequest(at_s=i * 0.1, input_tokens=5000 if i < long else 100, output_tokens=50)
                               for i in range(long + short))), window_s=60.0)


def _proven(replay: Replay, *, disaggregated: int, local: int, kv: int, prompt: int | None = None,
            changes: tuple[str, ...] = ()) -> WindowResult:
    window = replay.windows[0]
    seen = LevelDisaggregation(load=Load(rate=window.arrivals_per_s), disaggregated=disaggregated, local=local,
                               fallback=0, external_kv_tokens=kv, router_ttft_mean_s=None, prompt_tokens=prompt,
                               pod_changes=changes)
    result = WindowResult(window=window, expected=Expected.of(window, THRESHOLD), routing=seen)
    return WindowResult(window=window, expected=result.expected, routing=seen,
                        warnings=tuple(proof_warnings(result, threshold=THRESHOLD)))


def codes(result: WindowResult) -> list[Trust]:
    return [w.code for w in result.warnings]


def test_a_mixed_window_routed_as_the_threshold_says_is_proven() -> None:
    result = _proven(_window(20, 10), disaggregated=20, local=10, kv=20 * 5000, prompt=20 * 5000 + 10 * 100)
    assert (result.expected.above, result.expected.below, result.expected.near) == (20, 10, 0)
    assert codes(result) == [] and result.disaggregated_share == result.direct_share == 1.0


def test_long_prompts_sent_to_the_decoder_are_not_dpd() -> None:
    result = _proven(_window(20, 10), disaggregated=18, local=12, kv=18 * 5000)
    assert codes(result) == [Trust.NOT_DISAGGREGATED] and result.disaggregated_share == 0.9
    assert "at least 90%" in result.warnings[0].message


def test_short_prompts_disaggregated_mean_another_threshold() -> None:
    result = _proven(_window(20, 10), disaggregated=30, local=0, kv=20 * 5000 + 10 * 100)
    assert codes(result) == [Trust.NOT_DIRECT]


def test_kv_failures_in_a_window_are_named() -> None:
    assert codes(_proven(_window(), disaggregated=30, local=0, kv=0)) == [Trust.NO_KV_TRANSFER]
    partial = _proven(_window(), disaggregated=30, local=0, kv=100_000, prompt=30 * 5000)
    assert codes(partial) == [Trust.PARTIAL_KV_TRANSFER] and "67% of the 150,000" in partial.warnings[0].message


def test_a_restarted_pod_and_unread_counters_are_reported() -> None:
    assert codes(_proven(_window(), disaggregated=30, local=0, kv=150_000, changes=("decoder/d-1 restarted",))) == [
        Trust.POD_RESTARTED]
    assert codes(_proven(_window(), disaggregated=0, local=0, kv=0)) == [Trust.ROUTING_UNKNOWN]
    (unread,) = window_results(_window(), {}, {}, threshold=THRESHOLD)
    assert [w.code for w in unread.warnings] == [Trust.LEVEL_NOT_RUN, Trust.ROUTING_UNKNOWN]


def test_a_cut_result_file_makes_its_window_not_run_and_says_why() -> None:
    (result,) = window_results(_window(), {"aiperf_window_0.json": "{cut"}, None, threshold=THRESHOLD)
    assert result.level is None and "aiperf_window_0.json: not JSON" in result.unreadable
    assert [w.code for w in result.warnings] == [Trust.LEVEL_NOT_RUN]


@settings(max_examples=fuzz_examples(50), deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False), st.integers(1, 200_000), st.integers(1, 10_000)),
                min_size=1, max_size=30), st.floats(0.01, 2000), st.floats(0.1, 1e5))
def test_any_trace_and_options_window_or_refuse_cleanly(rows: list[tuple[float, int, int]], speedup: float,
                                                        window: float) -> None:
    requests = tuple(TraceRequest(at_s=at, input_tokens=i, output_tokens=o) for at, i, o in sorted(rows))
    try:
        replay = plan_replay(trace(*requests), speedup=speedup, window_s=window, max_model_len=131_072)
    except SpecError as err:
        assert all(p.field and p.fix for p in err.problems)
        return
    assert replay.requests + replay.too_long == len(requests)
    assert all(0 <= r.at_s <= window + 1e-6 * window for w in replay.windows for r in w.requests)
