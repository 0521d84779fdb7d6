"""The parser, error rate and trust warnings on what the real genai-bench 0.0.5 wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_dpd.benchmark import BenchmarkResults, ResultsError, Scenario, Trust, trust_warnings
from hyperpod_dpd.benchmark.results import RUN_FILE, collect, parse_run, read_directory
from hyperpod_dpd.load_point import Load

LEVELS = tuple(Load(concurrency=level) for level in (2, 4))
SCENARIO = Scenario(isl=64, osl=16, concurrency=(2, 4), requests=8, max_seconds=60)


def codes(results: BenchmarkResults) -> set[Trust]:
    return {w.code for w in trust_warnings(results, SCENARIO)}


def test_a_healthy_run_is_read_per_level_and_trusted(healthy_run: Any) -> None:
    assert healthy_run.returncode == 0, healthy_run.stderr
    results = read_directory(healthy_run.folder, expected=LEVELS)
    assert [level.load.concurrency for level in results.levels] == [2, 4]
    assert results.missing == ()
    for level in results.levels:
        assert level.scenario == "D(64,16)"
        assert level.failed == 0 and level.error_rate == 0.0
        assert level.completed >= 8  # genai-bench overshoots its request bound, never undershoots it
        assert level.mean_output_tokens == 16.0
        assert level.ttft.p50 is not None and 0.015 < level.ttft.p50 < level.e2e.p50  # type: ignore[operator]
        # 16 tokens, 5 ms apart after the first: TPOT near 5 ms, far below TTFT + 15 x 5 ms end to end
        assert level.tpot.p50 is not None and 0.004 < level.tpot.p50 < 0.05
        assert level.output_tokens_per_s > 0
        assert level.ttft.p50 <= level.ttft.p90 <= level.ttft.p99  # type: ignore[operator]
    assert trust_warnings(results, SCENARIO) == []
    assert sum(level.requests for level in results.levels) <= healthy_run.served


def test_injected_errors_are_counted_and_the_rate_computed(erroring_run: Any) -> None:
    assert erroring_run.returncode == 0, erroring_run.stderr
    results = read_directory(erroring_run.folder, expected=LEVELS)
    raw = json.loads(next(text for name, text in erroring_run.files().items() if RUN_FILE.match(name)))
    assert raw["aggregated_metrics"]["error_rate"] == 0  # genai-bench 0.0.5's bug, which is why we compute it
    for level in results.levels:
        assert level.failed > 0 and level.completed > 0
        assert level.error_codes.keys() == {"500"}
        assert level.error_rate == pytest.approx(level.failed / (level.failed + level.completed))
        assert 0.15 < level.error_rate < 0.55  # every third request
        assert level.first_error is not None and "injected failure" in level.first_error
    warnings = trust_warnings(results, SCENARIO)
    assert {w.code for w in warnings} == {Trust.FAILED_REQUESTS}
    assert "HTTP 500" in warnings[0].render()


def test_a_run_where_every_request_fails_is_reported_not_crashed(failing_run: Any) -> None:
    assert failing_run.returncode == 1  # genai-bench exits 1 and writes a debug file instead of a run file
    names = list(failing_run.files())
    assert any(name.startswith("debug_for_run_") for name in names)
    results = read_directory(failing_run.folder, expected=LEVELS)
    (first,) = results.levels
    assert first.load == Load(concurrency=2) and first.completed == 0 and first.failed > 0
    assert first.error_codes.keys() == {"404"} and first.error_rate == 1.0
    assert first.ttft.p50 is None and first.output_tokens_per_s == 0.0
    assert results.missing == (Load(concurrency=4),)  # genai-bench stops after the failed level
    # the planned levels, from its metadata file
    assert read_directory(failing_run.folder).missing == (Load(concurrency=4),)
    assert codes(results) == {Trust.LEVEL_FAILED, Trust.LEVEL_NOT_RUN}


def test_answers_shorter_than_osl_are_flagged(short_run: Any) -> None:
    results = read_directory(short_run.folder, expected=LEVELS)
    assert all(level.mean_output_tokens == 4.0 for level in results.levels)
    warnings = trust_warnings(results, SCENARIO)
    assert {w.code for w in warnings} == {Trust.OUTPUT_LENGTH}
    assert "not --osl 16" in warnings[0].message


def _one_level(**changes: Any) -> dict[str, Any]:
    stats = {name: {"p50": 0.5, "p90": 0.6, "p99": 0.7, "mean": 0.5} for name in ("ttft", "tpot", "e2e_latency")}
    stats["num_input_tokens"] = {"mean": 64.0}
    stats["num_output_tokens"] = {"mean": 16.0}
    metrics = {"scenario": "D(64,16)", "num_concurrency": 2, "mean_output_throughput_tokens_per_s": 10.0,
               "num_completed_requests": 5, "num_error_requests": 0, "num_requests": 5, "error_codes_frequency": {},
               "run_duration": 1.0, "stats": stats}
    return {"aggregated_metrics": {**metrics, **changes}, "_time_unit": "s"}


def test_a_buffered_stream_is_flagged() -> None:
    data = _one_level()
    data["aggregated_metrics"]["stats"]["ttft"]["p50"] = 0.95
    data["aggregated_metrics"]["stats"]["e2e_latency"]["p50"] = 1.0
    data["aggregated_metrics"]["stats"]["tpot"]["p50"] = 0.0002  # every token arrived with the first
    results = BenchmarkResults(levels=(parse_run(data),))
    assert codes(results) == {Trust.BUFFERED_STREAM}


def test_a_long_queue_before_a_short_answer_is_not_a_buffered_stream() -> None:
    """--osl 16 at high load: TTFT 3 s of queueing, then 15 tokens 20 ms apart (E2E 3.3 s) is real."""
    data = _one_level()
    data["aggregated_metrics"]["stats"]["ttft"]["p50"] = 3.0
    data["aggregated_metrics"]["stats"]["e2e_latency"]["p50"] = 3.3
    data["aggregated_metrics"]["stats"]["tpot"]["p50"] = 0.02
    assert codes(BenchmarkResults(levels=(parse_run(data),))) == set()


def test_milliseconds_are_read_as_seconds() -> None:
    data = _one_level()
    data["_time_unit"] = "ms"
    level = parse_run(data)
    assert level.ttft.p50 == pytest.approx(0.0005) and level.e2e.p99 == pytest.approx(0.0007)


@pytest.mark.parametrize(("files", "message"), [
    ({"D64_16_text-to-text_num_concurrency_2_time_1s.json": "{not json"}, "not JSON"),
    ({"D64_16_text-to-text_num_concurrency_2_time_1s.json": '{"aggregated_metrics": {}}'}, "'stats'"),
    ({"D64_16_text-to-text_num_concurrency_2_time_1s.json": json.dumps({**_one_level(), "_time_unit": "h"})},
     "_time_unit"),
])
def test_a_file_that_is_not_genai_bench_output_names_the_file(files: dict[str, str], message: str) -> None:
    with pytest.raises(ResultsError, match=message) as caught:
        collect(files)
    assert "num_concurrency_2_time_1s.json" in str(caught.value)


def test_other_files_are_ignored_and_levels_sorted() -> None:
    level = json.dumps(_one_level())
    bigger = json.dumps(_one_level(num_concurrency=8))
    results = collect({"experiment_metadata.json": "{}", "D64_16_text-to-text_num_concurrency_8_time_3s.json": bigger,
                       "D64_16_text-to-text_num_concurrency_2_time_1s.json": level},
                      expected=tuple(Load(concurrency=c) for c in (2, 8, 16)))
    assert [lv.load.concurrency for lv in results.levels] == [2, 8] and results.missing == (Load(concurrency=16),)


def _genai_bench_level(tokens: list[int], *, measured: int, duration: float) -> dict[str, Any]:
    """A genai-bench 0.0.5 run file: its throughput is the measured requests' tokens over the whole level's time."""
    stats = {name: {"p50": 0.5, "p90": 0.6, "p99": 0.7} for name in ("ttft", "tpot", "e2e_latency")}
    stats |= {"num_input_tokens": {"mean": 4304.0}, "num_output_tokens": {"mean": 256.0}}
    return {"aggregated_metrics": {
        "stats": stats, "num_concurrency": 32, "scenario": "D(4352,256)", "num_completed_requests": measured,
        "mean_output_throughput_tokens_per_s": sum(tokens[-measured:]) / duration, "run_duration": duration},
        "individual_request_metrics": [{"ttft": 0.5, "tpot": 0.02, "num_output_tokens": n, "error_code": None}
                                       for n in tokens]}


def test_output_throughput_counts_the_tokens_of_the_same_window_as_the_time() -> None:
    """96 answered requests of 256 tokens in a 22.9 s level, 9 of them warm-up: genai-bench divides the 87 measured
    ones' 22,272 tokens by the whole 22.9 s (972.6 tok/s). Every answered request's tokens over that time are
    24,576 / 22.9 = 1,073.2 tok/s, what the server streamed for them (the truth, less requests cut at the bound)."""
    level = parse_run(_genai_bench_level([256] * 96, measured=87, duration=22.9))
    assert round(22272 / 22.9, 1) == 972.6  # genai-bench's own figure, the one reported before
    assert round(level.output_tokens_per_s, 1) == round(96 * 256 / 22.9, 1) == 1073.2


def test_the_server_counts_its_own_output_tokens_per_level(healthy_run: Any) -> None:
    """The stub counted every token it streamed (vllm:generation_tokens_total): SRV tok/s is that increase over
    the level's time, beside the client's figure, which counts only what it received whole."""
    from hyperpod_dpd.benchmark.report import server_output_tokens_per_s

    results = read_directory(healthy_run.folder, expected=LEVELS)
    routing = healthy_run.routing()
    streamed = [level.generation_tokens for level in routing.values()]
    assert 0 < sum(t or 0 for t in streamed) <= healthy_run.served * 16  # requests cut at the bound streamed fewer
    for level in results.levels:
        seen = routing[level.load]
        served = server_output_tokens_per_s(level, seen)
        assert seen.generation_tokens is not None and served == seen.generation_tokens / level.duration_s
        assert served >= level.output_tokens_per_s * 0.999  # the client cannot receive more than was streamed
