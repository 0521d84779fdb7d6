"""The open-loop sweep: aiperf, run as the Job runs it, at request rates against the stub.

The stub answers after a fixed 500 ms, so a TTFT near 500 ms says the client adds little; it counts
every request as the router would, so the counters show what reached the server (warm-up included,
no readiness probe) and which path each request took.
"""

from __future__ import annotations

import itertools
import json
import statistics
from typing import Any

import pytest

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario, Trust, trust_warnings
from hyperpod_dpd.benchmark.proof.disaggregation import disaggregation_warnings
from hyperpod_dpd.benchmark.proof.overhead import BOUND_S, client_overhead, overhead_warnings
from hyperpod_dpd.benchmark.run.aiperf_results import parse_aiperf
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.run.levels import ResultsError
from hyperpod_dpd.benchmark.run.results import collect, read_directory
from hyperpod_dpd.benchmark.run.route import RoutePath, default_isl, largest_direct_isl
from hyperpod_dpd.benchmark.run.scenario import arrival_seed
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.defaults import default_spec

RATES = (Load(rate=8.0), Load(rate=16.0))
REQUESTS, WARMUP = 24, 3  # per rate (conftest's open_loop scenario), and its warm-up: ceil(10%)
SCENARIO = Scenario(isl=64, osl=16, request_rates=(8.0, 16.0), requests=REQUESTS, max_seconds=60)


def test_the_scenario_runs_aiperf_with_its_warm_up_and_bound() -> None:
    assert SCENARIO.client is Client.AIPERF and SCENARIO.loads == RATES and SCENARIO.concurrency == ()
    first, second = arrival_seed("", 0), arrival_seed("", 1)
    assert SCENARIO.level_plan() == f"8:{REQUESTS}:{WARMUP}:{first} 16:{REQUESTS}:{WARMUP}:{second}"
    by_default = Scenario(request_rates=(0.5, 4.0))  # 120 s of arrivals, never under the p90 sample
    assert by_default.requests_per_level == [155, 480] and by_default.warmup_at(Load(rate=4.0)) == 48


def test_every_rate_is_read_and_trusted(open_loop_run: Any) -> None:
    assert open_loop_run.returncode == 0, open_loop_run.stdout[-3000:] + open_loop_run.stderr
    results = read_directory(open_loop_run.folder)
    assert results.loads == RATES and results.missing == ()
    for level in results.levels:
        assert (level.completed, level.failed, level.scenario) == (REQUESTS, 0, "D(64,16)")
        assert level.mean_output_tokens == 16 and level.mean_input_tokens == 64
        assert level.ttft.p50 is not None and 0.5 <= level.ttft.p50 < 0.5 + BOUND_S
        assert level.tpot.p50 is not None and 0.005 <= level.tpot.p50 < 0.015
        assert len(level.answered) == REQUESTS + WARMUP  # the records keep the warm-up, which the router counted
        # goodput counts the measured requests only: all meet a TTFT target above the stub's 500 ms, none below
        assert level.goodput(ttft_s=0.55, tpot_s=0.01)[0] == len(level.measured_answered) == REQUESTS
        assert level.goodput(ttft_s=0.45, tpot_s=None)[0] == 0
    assert trust_warnings(results, SCENARIO) == []


def test_arrivals_are_open_loop_at_the_rate(open_loop_run: Any) -> None:
    """Request starts follow a Poisson process: the mean gap is about 1/rate whatever the server does,
    and gaps vary as exponential ones do (a fixed schedule or a closed loop would not)."""
    for rate in (8.0, 16.0):
        records = [json.loads(line) for line in
                   (open_loop_run.folder / f"aiperf_rate_{rate:g}.jsonl").read_text().splitlines() if line]
        starts = sorted(r["metadata"]["request_start_ns"] / 1e9 for r in records
                        if r["metadata"]["benchmark_phase"] == "profiling")
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        assert len(starts) == REQUESTS
        assert 0.5 / rate < statistics.mean(gaps) < 2 / rate, (rate, statistics.mean(gaps))
        assert statistics.stdev(gaps) / statistics.mean(gaps) > 0.4  # exponential gaps: about 1


def test_the_router_saw_every_request_disaggregated_and_the_client_adds_little(open_loop_run: Any) -> None:
    results = read_directory(open_loop_run.folder)
    routing = open_loop_run.routing()
    for level in results.levels:
        seen = routing[level.load]
        # every request the client sent, warm-up included, and nothing else (no readiness probe)
        assert (seen.disaggregated, seen.local, seen.fraction) == (REQUESTS + WARMUP, 0, 1.0)
        assert seen.external_kv_tokens == (REQUESTS + WARMUP) * 64
        overhead = client_overhead(level, seen)
        assert overhead is not None and 0 < overhead < BOUND_S, f"{level.load.describe()}: {overhead}"
    assert open_loop_run.served == 2 * (REQUESTS + WARMUP)
    assert disaggregation_warnings(RoutePath.DPD, list(results.loads), routing) == []
    assert overhead_warnings(results.levels, routing) == []


def test_a_silently_direct_router_is_caught_at_a_rate(open_loop_direct_run: Any) -> None:
    results = read_directory(open_loop_direct_run.folder)
    (load,) = results.loads
    routing = open_loop_direct_run.routing()
    assert routing[load].fraction == 0.0 and routing[load].external_kv_tokens == 0
    (warning,) = disaggregation_warnings(RoutePath.DPD, [load], routing)
    assert warning.code is Trust.NOT_DISAGGREGATED and warning.render().startswith("[not-disaggregated] 8 requests/s")


def test_a_rate_where_every_request_failed_is_reported_and_the_sweep_stops(open_loop_failing_run: Any) -> None:
    """aiperf exits 1 and writes no summary; its records still say what failed, and the pod stops there."""
    assert open_loop_failing_run.returncode == 1
    results = collect(open_loop_failing_run.files(), isl=64, osl=16)
    (level,) = results.levels
    assert (level.load, level.completed, level.failed, dict(level.error_codes)) == (RATES[0], 0, REQUESTS,
                                                                                   {"404": REQUESTS})
    assert level.first_error is not None and "injected failure" in level.first_error
    assert results.missing == (RATES[1],)
    codes = [(w.code, w.load) for w in trust_warnings(results, SCENARIO)]
    assert codes == [(Trust.LEVEL_FAILED, RATES[0]), (Trust.LEVEL_NOT_RUN, RATES[1])]


def test_a_summary_that_is_not_aiperfs_is_refused() -> None:
    with pytest.raises(ResultsError, match="aiperf_version"):
        parse_aiperf({"request_count": {"avg": 3}}, None, rate=1.0, where="x.json")
    with pytest.raises(ResultsError, match="line 1: not JSON"):
        collect({"aiperf_rate_1.json": json.dumps({"aiperf_version": "0.13.0"}), "aiperf_rate_1.jsonl": "{cut"})


def test_aiperf_prompts_need_their_own_direct_bound() -> None:
    """aiperf's prompts are exactly isl tokens but longer in characters than genai-bench's, so the direct
    path's longest input is shorter; the DPD default clears the threshold for both."""
    assert default_isl(4096, client=Client.AIPERF) == default_isl(4096) == 4352
    assert largest_direct_isl(4096, Client.AIPERF) < largest_direct_isl(4096)


def test_each_level_and_each_run_sends_aiperf_a_seed_of_its_own() -> None:
    """aiperf 0.13 draws its prompts from --random-seed alone: one seed for every level re-sent the previous
    level's prompts (40 of 40 in the audit's run), so levels 2+ timed the prefix cache. The rendered pod now
    passes each level the seed of its plan entry, and another run id moves every seed."""
    scenario = Scenario(isl=4352, osl=256, request_rates=(1.0, 2.0, 4.0))

    def rendered(run_id: str) -> tuple[list[str], str, list[str]]:
        objects = render_benchmark_job(BenchmarkTarget.for_spec(default_spec()), scenario, JobOptions(run_id=run_id))
        pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
        container = next(c for c in pod["initContainers"] if c["name"] == "benchmark")
        levels = next(e["value"] for e in container["env"] if e["name"] == "LEVELS").split()
        return [plan.rsplit(":", 1)[1] for plan in levels], container["command"][2], container["args"]

    seeds, script, args = rendered("20261201-0300")
    assert len(set(seeds)) == 3  # one per level
    assert "--random-seed" not in args  # no seed shared by every level
    assert '--random-seed "${rest##*:}"' in script
    other, _, _ = rendered("20261201-0400")
    assert not set(seeds) & set(other)


def test_the_second_rate_sends_none_of_the_first_rates_prompts(open_loop_run: Any) -> None:
    """The stub kept every prompt it was sent, by level (the quiet windows split them)."""
    first, second = open_loop_run.prompts_by_level()
    assert len(first) == len(second) == REQUESTS + WARMUP
    assert not set(first) & set(second)
    assert len(set(first)) == len(set(second)) == REQUESTS + WARMUP  # the warm-up re-sends no measured prompt


# The stub's clock runs from reading a request to its last token, aiperf's benchmark_duration from sending the first
# measured request to reading the last one's end: a loopback round trip and two events apart at each end, a few ms
# of a level of 2 s or more, so 2%. (Before the fix SRV tok/s read 12.5% high: the warm-up's 48 of 432 tokens.)
SERVER_RATE_TOLERANCE = 0.02


def test_the_servers_tokens_per_second_at_each_rate_are_what_the_stub_streamed(open_loop_run: Any) -> None:
    """SRV tok/s against the stub's own tokens per second over the measured requests (the warm-up's left out)."""
    for level, served, truth in open_loop_run.server_rates(skip=WARMUP):
        assert served is not None and abs(served / truth - 1) <= SERVER_RATE_TOLERANCE, (
            level.load.describe(), served, truth)


def test_aiperfs_dataset_files_go_to_the_runs_own_temporary_folder(open_loop_run: Any) -> None:
    """aiperf memory-maps its dataset under the temporary folder and leaves it there: in the pod, its /tmp; here the
    run's own folder (removed after it), never this machine's /tmp, where every run would leave one behind."""
    assert any(name.startswith("aiperf_mmap_") for name in open_loop_run.scratch), open_loop_run.scratch
