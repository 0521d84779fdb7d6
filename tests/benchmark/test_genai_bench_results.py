"""The parser, error rate and trust warnings on what the real genai-bench 0.0.5 wrote."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.benchmark import BenchmarkResults, ResultsError, Scenario, Trust, trust_warnings
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.benchmark.run.results import RUN_FILE, DuplicateLevel, collect, parse_run, read_directory, read_files
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
    from hyperpod_dpd.benchmark.report.report import server_output_tokens_per_s

    results = read_directory(healthy_run.folder, expected=LEVELS)
    routing = healthy_run.routing()
    streamed = [level.generation_tokens for level in routing.values()]
    assert 0 < sum(t or 0 for t in streamed) <= healthy_run.served * 16  # requests cut at the bound streamed fewer
    for level in results.levels:
        seen = routing[level.load]
        served = server_output_tokens_per_s(level, seen)
        assert seen.generation_tokens is not None and served == seen.generation_tokens / level.duration_s
        assert served >= level.output_tokens_per_s * 0.999  # the client cannot receive more than was streamed


# genai-bench 0.0.5's own aggregation of a recorded level's requests with another --warmup-ratio, written by its own
# save(): AggregatedMetricsCollector.aggregate_metrics_data drops the first int(N * ratio) requests from the stats,
# and the run file keeps every request, with no mark on the warm-up ones.
REAGGREGATE = """
import json, sys
from genai_bench.metrics.aggregated_metrics_collector import AggregatedMetricsCollector
from genai_bench.metrics.metrics import RequestLevelMetrics
source, target, ratio = sys.argv[1], sys.argv[2], float(sys.argv[3])
data = json.load(open(source))
collector = AggregatedMetricsCollector()
for request in data["individual_request_metrics"]:
    collector.add_single_request_metrics(RequestLevelMetrics(**request))
metrics = data["aggregated_metrics"]
collector.set_run_metadata(metrics["num_concurrency"], metrics["scenario"])
collector.aggregate_metrics_data(0.0, metrics["run_duration"], ratio, None)
collector.save(target, data["_time_unit"])
"""


def _reaggregated(healthy_run: Any, folder: Path, ratio: float) -> tuple[dict[str, Any], LevelResult]:
    name = next(name for name in healthy_run.files() if RUN_FILE.match(name) and "_concurrency_2_" in name)
    target = folder / name
    # a subprocess: importing genai-bench monkey-patches threading with gevent
    subprocess.run([sys.executable, "-c", REAGGREGATE, str(healthy_run.folder / name), str(target), str(ratio)],
                   check=True, capture_output=True, timeout=120)
    data = json.loads(target.read_text())
    return data, parse_run(data, where=name)


def test_genai_bench_warm_up_is_left_out_of_goodput(healthy_run: Any, tmp_path: Path) -> None:
    """C2: the first int(N x ratio) requests genai-bench aggregated without are its warm-up; GOOD and the measured
    means count the others only, as aiperf's marked warm-up is left out (before: every answered request counted)."""
    data, level = _reaggregated(healthy_run, tmp_path, 0.25)
    requests = data["individual_request_metrics"]
    warmup = int(len(requests) * 0.25)
    assert warmup >= 2 and all(r["error_code"] is None for r in requests)
    assert level.warmup_answered == warmup and len(level.answered) == len(requests)  # the router counted them all
    assert len(level.measured_answered) == len(requests) - warmup
    assert level.goodput(ttft_s=60.0, tpot_s=60.0)[0] == len(requests) - warmup  # before: len(requests)
    # the measured mean is genai-bench's own mean over its measured requests
    assert level.measured_means[0] == pytest.approx(data["aggregated_metrics"]["stats"]["ttft"]["mean"], rel=1e-9)
    # the run as recorded (--warmup-ratio 0.1 over 9 requests): int(0.9), no warm-up
    recorded = read_directory(healthy_run.folder, expected=LEVELS).level(Load(concurrency=2))
    assert recorded is not None and recorded.warmup_answered == int(recorded.completed * 0.1)


def _copy(folder: Path, into: Path) -> Path:
    shutil.copytree(folder, into)
    return into


def test_two_files_for_one_level_are_refused_naming_both(healthy_run: Any, tmp_path: Path) -> None:
    """B6 class: an earlier run's file for concurrency 2 (TTFT p50 9.999 s) beside this run's; before, the later
    name in sort order won in silence (TTFT p50 9,999 ms, trusted)."""
    folder = _copy(healthy_run.folder, tmp_path / "run")
    mine = next(name for name in healthy_run.files() if RUN_FILE.match(name) and "_concurrency_2_" in name)
    stale = json.loads((folder / mine).read_text())
    stale["aggregated_metrics"]["stats"]["ttft"]["p50"] = 9.999
    other = mine.rsplit("_time_", 1)[0] + "_time_99s.json"
    (folder / other).write_text(json.dumps(stale))
    for tolerant in (False, True):
        with pytest.raises(DuplicateLevel) as caught:
            collect(read_files(folder), tolerant=tolerant)
        assert mine in str(caught.value) and other in str(caught.value) and "Fix:" in str(caught.value)
        assert "concurrency 2" in str(caught.value)


def test_two_aiperf_files_for_one_rate_are_refused(open_loop_run: Any, tmp_path: Path) -> None:
    """The same for aiperf's layout: aiperf_rate_8.json and an aiperf_rate_8.0.json of another run, and an aiperf
    file beside a genai-bench file of the same concurrency."""
    files = open_loop_run.files()
    assert "aiperf_rate_8.json" in files
    with pytest.raises(DuplicateLevel, match=r"aiperf_rate_8\.0\.json and aiperf_rate_8\.json|"
                                             r"aiperf_rate_8\.json and aiperf_rate_8\.0\.json"):
        collect({**files, "aiperf_rate_8.0.json": files["aiperf_rate_8.json"]})
    genai = json.dumps(_one_level(num_concurrency=8))
    summary = files["aiperf_rate_8.json"]
    with pytest.raises(DuplicateLevel, match=r"aiperf_concurrency_8\.json"):
        collect({"D64_16_text-to-text_num_concurrency_8_time_3s.json": genai, "aiperf_concurrency_8.json": summary})


def test_a_debug_file_beside_its_levels_run_file_is_not_a_duplicate() -> None:
    """genai-bench's run file is the level's result over a debug file of the same level (as before)."""
    run = json.dumps(_one_level())
    results = collect({"D64_16_text-to-text_num_concurrency_2_time_1s.json": run,
                       "debug_for_run_D64_16_2.json": run})
    assert [lv.load.concurrency for lv in results.levels] == [2]


def test_a_cut_file_names_its_level_among_the_missing_without_a_plan() -> None:
    """tolerant: a level's file cut mid-JSON is listed with why, and its level (from its name) is not run, even
    when no plan file lists the levels."""
    level = json.dumps(_one_level())
    cut = json.dumps(_one_level(num_concurrency=8))[:100]
    results = collect({"D64_16_text-to-text_num_concurrency_2_time_1s.json": level,
                       "D64_16_text-to-text_num_concurrency_8_time_3s.json": cut}, tolerant=True)
    assert [lv.load.concurrency for lv in results.levels] == [2] and results.missing == (Load(concurrency=8),)
    assert "not JSON" in results.unreadable[0]
