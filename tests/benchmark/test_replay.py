"""``bench --trace`` without a cluster: windows, the options' and the trace's refusals, the ConfigMap and its limit,
and each window's proof against recorded counters."""

from __future__ import annotations

import base64
import gzip
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import fuzz_examples

from hyperpod_dpd.benchmark.proof.disaggregation import DpdCounters, LevelDisaggregation
from hyperpod_dpd.benchmark.proof.overhead import BOUND_S, quantile
from hyperpod_dpd.benchmark.proof.trust import LOST, Trust
from hyperpod_dpd.benchmark.replay.replay import (
    CHAT_TEMPLATE_TOKENS,
    CONFIG_MAP_LIMIT,
    MAX_WINDOW_S,
    MAX_WINDOWS,
    MIN_SPEEDUP,
    Replay,
    config_map,
    hash_problems,
    option_problems,
    plan_replay,
    size_problems,
    window_files,
)
from hyperpod_dpd.benchmark.replay.replay_job import replay_deadline_seconds
from hyperpod_dpd.benchmark.replay.replay_proof import (
    MIN_WINDOW_REQUESTS,
    Expected,
    ReplayReport,
    WindowResult,
    fewest_above,
    proof_warnings,
    window_results,
)
from hyperpod_dpd.benchmark.replay.replay_run import LOG_SAFE_REQUESTS, log_risk
from hyperpod_dpd.benchmark.run.scenario import SEEDS_PER_RUN, arrival_seed
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
    # vLLM counts the chat template's tokens against the context too: a row that fills it exactly would fail
    edge = plan_replay(trace(TraceRequest(at_s=0.0, input_tokens=8000, output_tokens=192),
                             TraceRequest(at_s=1.0, input_tokens=8000, output_tokens=192 - CHAT_TEMPLATE_TOKENS)),
                       max_model_len=8192)
    assert (edge.requests, edge.too_long) == (1, 1) and edge.windows[0].requests[0].at_s == 1.0
    with pytest.raises(SpecError, match="no request to replay within max_model_len 100"):
        plan_replay(trace(TraceRequest(at_s=0.0, input_tokens=100, output_tokens=100)), max_model_len=100)


@pytest.mark.parametrize(("speedup", "window", "field"), [
    (0.0, 300.0, "--trace-speedup"), (-1.0, 300.0, "--trace-speedup"), (float("nan"), 300.0, "--trace-speedup"),
    (float("inf"), 300.0, "--trace-speedup"), (1001.0, 300.0, "--trace-speedup"), (1e-320, 300.0, "--trace-speedup"),
    (MIN_SPEEDUP / 2, 300.0, "--trace-speedup"), (1.0, 0.5, "--trace-window"), (1.0, float("inf"), "--trace-window"),
    (1.0, float("nan"), "--trace-window"), (1.0, 1e20, "--trace-window"), (1.0, MAX_WINDOW_S + 1, "--trace-window")])
def test_options_that_cannot_be_replayed_are_refused_with_the_fix(speedup: float, window: float, field: str) -> None:
    (problem,) = option_problems(speedup=speedup, window_s=window)
    assert problem.field == field and problem.fix


def test_the_slowest_replay_and_longest_window_allowed_plan_or_refuse_cleanly() -> None:
    """At the bounds a replay still plans: a long trace at the slowest speed-up is too many windows (a clean
    refusal, not an overflow), and the longest window keeps the Job's deadline an integer Kubernetes accepts."""
    far = trace(TraceRequest(at_s=0.0, input_tokens=1, output_tokens=1),
                TraceRequest(at_s=1e305, input_tokens=1, output_tokens=1))
    with pytest.raises(SpecError, match="more than 1,024") as raised:
        plan_replay(far, speedup=MIN_SPEEDUP, window_s=MAX_WINDOW_S)
    assert raised.value.problems[0].field == "--trace-window"
    day = plan_replay(trace(TraceRequest(at_s=0.0, input_tokens=1, output_tokens=1),
                            TraceRequest(at_s=10 * MAX_WINDOW_S, input_tokens=1, output_tokens=1)),
                      window_s=MAX_WINDOW_S)
    assert len(day.windows) == 11
    assert replay_deadline_seconds(day) < 2**31  # activeDeadlineSeconds is an int64; a day per window is far below


def test_every_window_draws_its_own_seed() -> None:
    """aiperf draws a prompt without hashes from the window's seed: a repeated seed re-sends the same prompts."""
    assert MAX_WINDOWS <= SEEDS_PER_RUN
    assert len({arrival_seed("20261201-0300", index) for index in range(MAX_WINDOWS)}) == MAX_WINDOWS


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


def test_long_prompts_sent_direct_in_place_of_short_ones_disaggregated_are_caught_by_the_tokens() -> None:
    """2 of 20 long prompts sent direct and 2 of 10 short ones disaggregated leave both counts as if all were right;
    the decoders' KV tokens (18 long prompts and 2 short) prove no more than 18 long ones were disaggregated."""
    swapped = _proven(_window(20, 10), disaggregated=20, local=10, kv=18 * 5000 + 2 * 100)
    assert swapped.disaggregated_share == 0.9 and swapped.direct_share == 0.8
    assert codes(swapped) == [Trust.NOT_DISAGGREGATED, Trust.NOT_DIRECT]
    assert "90,200 prompt tokens the decoders received prove at least 90%" in swapped.warnings[0].message
    # the decoders' own count includes the chat template's tokens: the received tokens are scaled back to the trace's
    right = _proven(_window(20, 10), disaggregated=20, local=10, kv=20 * 5100, prompt=20 * 5100 + 10 * 200)
    assert codes(right) == [] and right.disaggregated_share == right.direct_share == 1.0


def test_the_fewest_long_prompts_disaggregated_is_a_true_lower_bound() -> None:
    """Against every way the router could have split a small window: the bound never exceeds the truth."""
    rng = random.Random(3)
    for _ in range(300):
        lengths = [rng.choice((100, 3000, 5000, 9000)) + rng.randrange(50) for _ in range(rng.randint(1, 12))]
        window = plan_replay(trace(*(TraceRequest(at_s=i * 0.1, input_tokens=n, output_tokens=5)
                                     for i, n in enumerate(lengths))), window_s=60.0).windows[0]
        expected = Expected.of(window, THRESHOLD)
        long = set(expected.above_lengths)
        took = [r.input_tokens for r in window.requests if rng.random() < 0.5]
        shortfall = rng.uniform(0.9, 1.0)  # a decoder receives at most the prompt (block rounding, failed transfers)
        fewest = fewest_above(expected, disaggregated=len(took), received=sum(took) * shortfall)
        assert fewest <= sum(1 for n in took if n in long), (lengths, took)


def test_a_window_with_few_prompts_on_either_side_of_the_threshold_is_unverified() -> None:
    """Prompts near the threshold prove neither path, and one long prompt among 24 short proves nothing of the
    long ones: a side needs MIN_WINDOW_REQUESTS prompts, and the counters must give its share."""
    near = plan_replay(trace(*(TraceRequest(at_s=i * 0.1, input_tokens=3800, output_tokens=5) for i in range(30))),
                       window_s=60.0)
    result = _proven(near, disaggregated=0, local=30, kv=0)
    assert (result.expected.near, result.disaggregated_share, result.direct_share) == (30, None, None)
    assert result.warnings == () and result.unverified is not None and "30 near it" in result.unverified
    one_long = _proven(_window(1, 24), disaggregated=1, local=24, kv=5000, prompt=5000 + 2400)
    assert one_long.unverified is None and one_long.direct_share == 1.0  # proven: the 24 short prompts
    few = _proven(_window(1, MIN_WINDOW_REQUESTS - 1), disaggregated=1, local=MIN_WINDOW_REQUESTS - 1, kv=5000)
    assert few.unverified is not None and f"under {MIN_WINDOW_REQUESTS} a side" in few.unverified
    (unread,) = window_results(_window(), {}, None, threshold=THRESHOLD)
    assert unread.unverified == "the counters gave no share of either path (read none around this window)"


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


def test_a_window_whose_files_were_lost_on_the_way_is_not_called_unrun() -> None:
    """The pod runs the windows in order: a window before one with results ran, and its files were lost (the log
    rotated, no S3 copy), as a level's are reported."""
    two = plan_replay(trace(*(TraceRequest(at_s=i * 0.1 + (60.0 if i >= 30 else 0.0), input_tokens=5000,
                                           output_tokens=50) for i in range(60))), window_s=60.0)
    late = {"aiperf_window_1.jsonl": ""}
    lost, ran = window_results(two, late, None, threshold=THRESHOLD)
    assert [w.code for w in lost.warnings] == [Trust.LEVEL_NOT_RUN] and ran.level is not None
    assert lost.warnings[0].message == f"the window ran (a later window has results), but {LOST}"
    for unknown in window_results(two, {}, None, threshold=THRESHOLD):
        assert unknown.warnings[0].message.startswith(f"no result: either {LOST}, or the run stopped before")


def test_a_replay_too_large_for_the_log_alone_is_warned_of() -> None:
    many = plan_replay(poisson(LOG_SAFE_REQUESTS + 1))
    risk = log_risk(many, upload=False)
    assert risk is not None and f"--no-upload with {LOG_SAFE_REQUESTS + 1:,} requests" in risk and "drop" in risk
    assert log_risk(many, upload=True) is None
    assert log_risk(plan_replay(poisson(LOG_SAFE_REQUESTS)), upload=False) is None


def test_a_cut_result_file_makes_its_window_not_run_and_says_why() -> None:
    (result,) = window_results(_window(), {"aiperf_window_0.json": "{cut"}, None, threshold=THRESHOLD)
    assert result.level is None and "aiperf_window_0.json: not JSON" in result.unreadable
    assert [w.code for w in result.warnings] == [Trust.LEVEL_NOT_RUN]


@settings(max_examples=fuzz_examples(50), deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False), st.integers(1, 200_000), st.integers(1, 10_000)),
                min_size=1, max_size=30), st.floats(0, 2000) | st.floats(0, 1e-3),
       st.floats(0.1, 1e5) | st.floats(1e4, 1e21))
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


# --- a sparse window, from a real run's recorded files -----------------------------------------------------------

SPARSE = Path(__file__).parent / "data" / "replay-sparse"


def test_a_sparse_window_shows_its_latencies_and_claims_no_proof() -> None:
    """Recorded from the rendered replay Job's container, aiperf 0.13.0 against the stub (50 ms to the first token,
    5 ms a token, threshold 32 words): 3 prompts of 64 tokens at 1, 5 and 10 s of trace time, ten times faster,
    in one 2 s window; the stub's router and decoder counters in the pauses before and after it (``*.prom``) and
    its own TTFTs (``stub.json``). Every request was disaggregated, yet 3 prompts cannot tell one failure from none."""
    sparse = trace(*(TraceRequest(at_s=at, input_tokens=64, output_tokens=10) for at in (1.0, 5.0, 10.0)))
    replay = plan_replay(sparse, speedup=10.0, window_s=2.0, max_model_len=4096)
    files = {path.name: path.read_text() for path in SPARSE.glob("aiperf_window_*")}
    taken = {pause: DpdCounters.parse([(SPARSE / f"router-{pause}.prom").read_text()],
                                      [(SPARSE / f"decoder-{pause}.prom").read_text()]) for pause in (0, 1)}
    (window,) = window_results(replay, files, taken, threshold=32)
    assert window.level is not None and (window.level.completed, window.level.failed) == (3, 0)
    assert window.routing is not None and (window.routing.disaggregated, window.routing.local) == (3, 0)
    assert window.routing.external_kv_tokens == 3 * 64 and window.disaggregated_share == 1.0
    assert window.warnings == () and window.unverified is not None
    assert window.unverified.startswith("only 3 prompts above the threshold and 0 below it")
    stub = json.loads((SPARSE / "stub.json").read_text())
    truth = quantile(stub["server_ttfts_s"], 0.9)
    # the client's p90 is the server's plus the client's own time, which bench bounds at BOUND_S
    assert truth is not None and window.level.ttft.p90 is not None and truth <= window.level.ttft.p90 < truth + BOUND_S
    report = ReplayReport(endpoint="dpd-test", replay=replay, windows=[window], threshold=32)
    assert not report.healthy and json.loads(report.to_json())["windows"][0]["verified"] is False
    table = report.render()
    assert "unverified (latencies shown, proof not claimed):\n  - window 0: only 3 prompts" in table
    assert table.splitlines()[3].split()[-1] == "unverified"  # the title, a blank line, the header, window 0
