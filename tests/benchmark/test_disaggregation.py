"""DPD proven or not: the route-length rule, and the router's and decoder's counters around each level.

The counters come from the stub's real runs of the rendered benchmark container (read in each quiet
window the script announced) and, for the cluster path, through the recorded API server proxy.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from support import FakeClock

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.cluster import run_job
from hyperpod_dpd.benchmark.disaggregation import (
    DpdCounters,
    LevelDisaggregation,
    LevelSnapshots,
    MetricsSources,
    disaggregation_warnings,
    read_counters,
    sample_sum,
)
from hyperpod_dpd.benchmark.job import JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.route import (
    RoutePath,
    default_isl,
    isl_for_model,
    largest_direct_isl,
    prompt_length,
    route_problems,
)
from hyperpod_dpd.benchmark.trust import Trust
from hyperpod_dpd.clients.kube import KubeError
from hyperpod_dpd.clients.wait import Waiter
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec import DpdSpec

LEVELS = (2, 4)
LOADS = tuple(Load(concurrency=level) for level in LEVELS)
C2, C8 = Load(concurrency=2), Load(concurrency=8)


# --- the route-length rule ------------------------------------------------------------------------


def test_the_default_input_clears_the_threshold_under_both_estimates() -> None:
    """The blog's 4,096 is 4,004-4,145 estimated tokens: on the threshold. The default is not."""
    assert prompt_length().estimates(4096)[0] < 4096 <= prompt_length().estimates(4096)[1]
    for threshold in (1024, 4096, 8000):
        isl = default_isl(threshold)
        low, _ = prompt_length().estimates(isl)
        assert low >= threshold * 1.02 and isl % 256 == 0
        assert route_problems(isl=isl, osl=256, path=RoutePath.DPD, threshold=threshold, max_model_len=32768) == []
    assert default_isl(4096) == 4352


@pytest.mark.parametrize("isl", [2000, 4096, 4150])
def test_an_input_near_or_below_the_threshold_is_refused_for_dpd(isl: int) -> None:
    (problem,) = route_problems(isl=isl, osl=256, path=RoutePath.DPD, threshold=4096, max_model_len=16384)
    assert problem.field == "--isl" and problem.value == isl
    assert "--isl 4352" in problem.fix and "--path direct" in problem.fix


def test_the_direct_path_needs_an_input_below_the_threshold() -> None:
    limit = largest_direct_isl(4096)
    assert prompt_length().estimates(limit)[1] < 4096
    assert route_problems(isl=2000, osl=256, path=RoutePath.DIRECT, threshold=4096, max_model_len=16384) == []
    (problem,) = route_problems(isl=4096, osl=256, path=RoutePath.DIRECT, threshold=4096, max_model_len=16384)
    assert problem.field == "--isl" and f"--isl {limit}" in problem.fix
    (zero,) = route_problems(isl=100, osl=256, path=RoutePath.DIRECT, threshold=0, max_model_len=16384)
    assert zero.field == "--path" and "threshold is 0" in zero.message
    assert default_isl(4096, RoutePath.DIRECT) == 3840


def test_input_plus_output_above_max_model_len_is_refused() -> None:
    (problem,) = route_problems(isl=20000, osl=256, path=RoutePath.DPD, threshold=4096, max_model_len=16384)
    assert "max_model_len 16384" in problem.message and "HTTP 400" in problem.message


# --- counters from the stub's runs ----------------------------------------------------------------


def test_a_disaggregating_router_is_proven_per_level(healthy_run: Any) -> None:
    assert sorted(healthy_run.metrics) == [0, 1, 2]  # before level 1, after each level
    levels = healthy_run.routing()
    assert set(levels) == set(LOADS)
    assert sum(level.routed for level in levels.values()) == healthy_run.served
    for level in levels.values():
        assert level.fraction == 1.0 and level.local == 0 and level.external_kv_tokens > 0
    assert disaggregation_warnings(RoutePath.DPD, LOADS, levels) == []


def test_a_silently_direct_router_makes_every_level_untrustworthy(direct_run: Any) -> None:
    levels = direct_run.routing()
    assert all(level.fraction == 0.0 and level.external_kv_tokens == 0 for level in levels.values())
    warnings = disaggregation_warnings(RoutePath.DPD, LOADS, levels)
    assert [(w.code, w.load.concurrency) for w in warnings] == [(Trust.NOT_DISAGGREGATED, 2),
                                                            (Trust.NOT_DISAGGREGATED, 4)]
    assert "0%" in warnings[0].message and "routingThreshold" in warnings[0].message
    # and the same counters are exactly what --path direct wants
    assert disaggregation_warnings(RoutePath.DIRECT, LOADS, levels) == []
    assert [w.code for w in disaggregation_warnings(RoutePath.DIRECT, [C2], _levels_of_healthy_like())] == [
        Trust.NOT_DIRECT]


def _levels_of_healthy_like() -> dict[int, LevelDisaggregation]:
    return {C2: LevelDisaggregation(load=C2, disaggregated=10, local=0, fallback=0, external_kv_tokens=500)}


def test_the_edges_of_the_verdict() -> None:
    def level(disaggregated: int, local: int, kv: int = 100) -> dict[int, LevelDisaggregation]:
        return {C8: LevelDisaggregation(load=C8, disaggregated=disaggregated, local=local, fallback=0,
                                       external_kv_tokens=kv)}

    assert disaggregation_warnings(RoutePath.DPD, [C8], level(95, 5)) == []
    assert [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], level(94, 6))] == [Trust.NOT_DISAGGREGATED]
    assert [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], level(100, 0, kv=0))] == [Trust.NO_KV_TRANSFER]
    assert [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], {})] == [Trust.ROUTING_UNKNOWN]
    assert [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], level(0, 0))] == [Trust.ROUTING_UNKNOWN]


def test_a_restarted_pod_counts_from_zero() -> None:
    before = DpdCounters(disaggregated=500, local=3, fallback=0, external_kv_tokens=10**6)
    after = DpdCounters(disaggregated=40, local=0, fallback=0, external_kv_tokens=9000)
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert (seen.disaggregated, seen.local, seen.external_kv_tokens) == (40, 0, 9000)


def test_prometheus_text_is_summed_by_label() -> None:
    text = ('vllm:prompt_tokens_by_source_total{engine="0",source="external_kv_transfer"} 4352.0\n'
            'vllm:prompt_tokens_by_source_total{engine="1",source="external_kv_transfer"} 8.0\n'
            'vllm:prompt_tokens_by_source_total{engine="0",source="local_compute"} 99.0\n# comment\n')
    assert sample_sum(text, "vllm:prompt_tokens_by_source_total", {"source": "external_kv_transfer"}) == 4360.0


# --- through the API server, between the levels of a recorded run ---------------------------------


def test_snapshots_are_taken_in_each_quiet_window_through_the_api_server(spec: DpdSpec, fakes: ModuleType,
                                                                          healthy_run: Any) -> None:
    """The benchmark log moves through its markers one poll at a time; the proxy answers with the stub's
    counters of the window the log is in, so the levels come out as the stub counted them."""
    name = "bench-dpd-test-20261201-0300"
    marks = ["quiet=0", "level=2", "quiet=1", "level=4", "quiet=2"]
    polls = iter("".join(f"### hyperpod-dpd-bench {m}\ngenai-bench output\n" for m in marks[:i + 1])
                 for i in range(len(marks)))
    window = [0]

    def benchmark_log() -> str:
        text = next(polls)
        window[0] = int(text.rsplit("quiet=", 1)[1].split()[0])
        return text

    def metrics(namespace: str, pod_port: str) -> str:
        router, decoder = healthy_run.metrics[window[0]]
        return router if namespace == "hyperpod-inference-system" else decoder

    running = fakes.pod(f"{name}-x", init=[fakes.container("benchmark", "running")], main=[])
    core = fakes.FakeCore(pods=[[running]], logs={"benchmark": benchmark_log, "publish": "### hyperpod-dpd-bench "
                                                  "exit=0\n"}, other_pods=fakes.router_and_decoder(), metrics=metrics)
    batch = fakes.FakeBatch(states=[fakes.job(name)] * 5 + [fakes.job(name, condition="Complete")])
    kube = fakes.benchmark_kube(batch, core)
    snapshots = LevelSnapshots(read=lambda: read_counters(kube, MetricsSources.for_spec(spec)))
    manifests = render_benchmark_job(BenchmarkTarget.for_spec(spec), Scenario(
        concurrency=LEVELS, requests=8, max_seconds=60), JobOptions(run_id="20261201-0300"))
    clock = FakeClock()
    run_job(kube, manifests, waiter=Waiter(timeout=600, poll_interval=15, clock=clock, sleep=clock.sleep),
            on_poll=snapshots.observe)
    assert sorted(snapshots.taken) == [0, 1, 2] and snapshots.errors == []
    assert ("hyperpod-inference-system", "dpd-test-default-router-6d5f-abc:8080", "metrics") in core.proxied
    assert ("default", "decode-dpd-test-7c9-xyz:8000", "metrics") in core.proxied
    assert snapshots.levels(LOADS) == healthy_run.routing()


def test_unreadable_counters_leave_the_level_unmeasured() -> None:
    def fail() -> DpdCounters:
        raise KubeError("get pods/proxy hyperpod-inference-system/r:8080/metrics: forbidden (403)")

    snapshots = LevelSnapshots(read=fail)
    snapshots.observe("### hyperpod-dpd-bench quiet=0\n")
    assert snapshots.taken == {} and "forbidden" in snapshots.errors[0]
    assert [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], snapshots.levels([C8]))] == [
        Trust.ROUTING_UNKNOWN]


# --- a router without the dashboard's counters: its documented log line counts instead -------------

DECODER_METRICS = 'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"} 9000.0\n'
ROUTER_LOG = "".join([
    "[INFO] Conditional routing: estimated_tokens=4180, threshold=4096, disaggregate=True\n",
    "[INFO] Conditional routing: estimated_tokens=4301, threshold=4096, disaggregate=True\n",
    "[INFO] Conditional routing: estimated_tokens=12, threshold=4096, disaggregate=False\n",
    "[INFO] health check ok\n"])


def _kube(fakes: ModuleType, router_metrics: str | None, router_log: str = ROUTER_LOG) -> Any:
    def metrics(namespace: str, pod_port: str) -> str:
        if namespace == "hyperpod-inference-system":
            if router_metrics is None:
                raise KubeError(f"get pods/proxy {namespace}/{pod_port}/metrics: not found (404)")
            return router_metrics
        return DECODER_METRICS

    core = fakes.FakeCore(pods=[[]], logs={"router-container": router_log}, other_pods=fakes.router_and_decoder(),
                          metrics=metrics)
    return fakes.benchmark_kube(fakes.FakeBatch(states=[]), core), core


@pytest.mark.parametrize("router_metrics", [None, "process_cpu_seconds_total 3.0\n"],
                         ids=["metrics-port-silent", "no-routing-counters"])
def test_the_router_log_counts_when_its_metrics_do_not(spec: DpdSpec, fakes: ModuleType,
                                                       router_metrics: str | None) -> None:
    kube, core = _kube(fakes, router_metrics)
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert (counters.disaggregated, counters.local, counters.external_kv_tokens) == (2, 1, 9000)
    assert core.log_reads == ["router-container"]


def test_the_router_metrics_win_when_they_carry_the_counters(spec: DpdSpec, fakes: ModuleType) -> None:
    kube, core = _kube(fakes, "dpd_routing_disaggregated_total 40\ndpd_routing_local_total 5\n")
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert (counters.disaggregated, counters.local) == (40, 5)
    assert core.log_reads == []


def test_a_router_that_logged_nothing_counts_nothing(spec: DpdSpec, fakes: ModuleType) -> None:
    """No counters and no routing lines: zero, so the level is reported as unrouted, never as disaggregated."""
    kube, _ = _kube(fakes, None, router_log="[INFO] started\n")
    before = read_counters(kube, MetricsSources.for_spec(spec))
    level = LevelDisaggregation.between(before, before, load=C8)
    assert level.routed == 0 and level.fraction is None
    assert [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], {C8: level})] != []


def test_a_level_below_the_fraction_names_the_input_length_this_models_tokenizer_needs() -> None:
    """The shipped prompt lengths are Llama 3's; the server counts prompts with the model's own tokenizer,
    so a model whose tokenizer is thriftier gets the --isl that clears the threshold by the margin."""
    assert isl_for_model(isl=4352, prompt_tokens=3900.0, threshold=4096) == 4864  # 4352 x 4177.92 / 3900, rounded up
    assert isl_for_model(isl=4352, prompt_tokens=4400.0, threshold=4096) is None  # already clear
    assert isl_for_model(isl=4352, prompt_tokens=None, threshold=4096) is None
    half = {C8: LevelDisaggregation(load=C8, disaggregated=50, local=50, fallback=0, external_kv_tokens=9)}
    (warning,) = disaggregation_warnings(RoutePath.DPD, [C8], half, prompt_tokens={C8: 3900.0}, isl=4352,
                                         threshold=4096)
    assert warning.code is Trust.NOT_DISAGGREGATED
    assert "counted 3,900 prompt tokens per request against the threshold 4096: use --isl 4864" in warning.message
    (unknown,) = disaggregation_warnings(RoutePath.DPD, [C8], half)
    assert "Check the deployed routingThreshold against --isl" in unknown.message
