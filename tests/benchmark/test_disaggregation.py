"""DPD proven or not: the route-length rule, and the router's and decoder's counters around each level.

The counters come from the stub's real runs of the rendered benchmark container (read in each quiet
window the script announced) and, for the cluster path, through the recorded API server proxy.
"""

from __future__ import annotations

import dataclasses
import math
import re
from types import ModuleType
from typing import Any

import pytest
from support import FakeClock

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.proof.disaggregation import (
    KV_MIN_FRACTION,
    DpdCounters,
    LevelDisaggregation,
    LevelSnapshots,
    MetricsSources,
    disaggregation_warnings,
    read_counters,
    restart_warnings,
    sample_sum,
)
from hyperpod_dpd.benchmark.proof.trust import Trust
from hyperpod_dpd.benchmark.run.cluster import run_job
from hyperpod_dpd.benchmark.run.job import JobOptions, render_benchmark_job
from hyperpod_dpd.benchmark.run.route import (
    RoutePath,
    default_isl,
    isl_for_model,
    largest_direct_isl,
    prompt_length,
    route_problems,
)
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
    before = DpdCounters.parse({"r": "dpd_routing_disaggregated_total 500\ndpd_routing_local_total 3\n"},
                               {"d": f"{KV_IN} {10**6}\n"})
    after = DpdCounters.parse({"r": "dpd_routing_disaggregated_total 40\ndpd_routing_local_total 0\n"},
                              {"d": f"{KV_IN} 9000\n"})
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert (seen.disaggregated, seen.local, seen.external_kv_tokens) == (40, 0, 9000)
    assert seen.pod_changes == ("router/r restarted", "decoder/d restarted")


KV_IN = 'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}'


def _router(disaggregated: int, local: int) -> str:
    return f"dpd_routing_disaggregated_total {disaggregated}\ndpd_routing_local_total {local}\n"


def test_one_of_two_routers_restarting_does_not_count_the_others_lifetime() -> None:
    """Router a carries 10,000 decisions from before the level; router b restarts. The level itself routed 100
    requests, 40 of them disaggregated (the truth). On the sum over pods the total went down, so bench read the
    sums after as the level's: 9,040 of 10,100 disaggregated (90%), a's lifetime counted in."""
    before = DpdCounters.parse({"a": _router(9000, 1000), "b": _router(5000, 5000)}, {"d": f"{KV_IN} 0\n"})
    # during the level: a routes 20 disaggregated + 30 local; b restarts, then routes 20 + 30
    after = DpdCounters.parse({"a": _router(9020, 1030), "b": _router(20, 30)}, {"d": f"{KV_IN} 174080\n"})
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert (seen.disaggregated, seen.routed) == (40, 100) and seen.fraction == 0.4
    assert seen.pod_changes == ("router/b restarted",)
    codes = [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], {C8: seen})]
    assert codes == [Trust.NOT_DISAGGREGATED, Trust.POD_RESTARTED]


def test_one_of_two_decoders_restarting_does_not_hide_a_broken_transfer() -> None:
    """Decoder y restarts mid-level and then receives nothing (every transfer failed): its old total is not this
    level's (truth: 0 KV tokens this level). Before, the sum over pods went down and was read whole: KV IN
    600,000, trusted."""
    before = DpdCounters.parse({"r": _router(0, 0)}, {"x": f"{KV_IN} 600000\n", "y": f"{KV_IN} 50000\n"})
    after = DpdCounters.parse({"r": _router(40, 0)}, {"x": f"{KV_IN} 600000\n", "y": f"{KV_IN} 0\n"})
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert seen.external_kv_tokens == 0
    codes = [w.code for w in disaggregation_warnings(RoutePath.DPD, [C8], {C8: seen})]
    assert codes == [Trust.NO_KV_TRANSFER, Trust.POD_RESTARTED]


def test_a_container_restart_counts_from_zero_even_when_its_counters_caught_up() -> None:
    before = DpdCounters.parse({"r": _router(10, 0)}, {"d": f"{KV_IN} 1000\n"}, restarts={"decoder/d": 0})
    after = DpdCounters.parse({"r": _router(20, 0)}, {"d": f"{KV_IN} 1500\n"}, restarts={"decoder/d": 1})
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert seen.external_kv_tokens == 1500 and seen.pod_changes == ("decoder/d restarted",)


def test_a_pod_that_appears_or_goes_away_mid_level_is_reported() -> None:
    before = DpdCounters.parse({"r": _router(10, 0)}, {"x": f"{KV_IN} 1000\n"})
    after = DpdCounters.parse({"r": _router(20, 0)}, {"y": f"{KV_IN} 300\n"})
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert seen.external_kv_tokens == 300
    assert seen.pod_changes == ("decoder/y started", "decoder/x went away")
    (warning,) = [w for w in disaggregation_warnings(RoutePath.DPD, [C8], {C8: seen}) if w.code is Trust.POD_RESTARTED]
    assert "pods changed during this level (decoder/y started; decoder/x went away)" in warning.message


PROMPT = 4304  # the server's prompt tokens per request (the audit's genai-bench prompts)


def _kv_level(kv: int, *, cache_hit: int = 0, prompt_tokens: int | None = 45 * PROMPT) -> LevelDisaggregation:
    return LevelDisaggregation(load=C8, disaggregated=45, local=0, fallback=0, external_kv_tokens=kv,
                               cache_hit_tokens=cache_hit, prompt_tokens=prompt_tokens)


def test_a_partial_kv_failure_is_flagged() -> None:
    """70% of transfers failed: KV IN 60,258 of the 45 x 4,304 = 193,680 prompt tokens the decoder counted. Only
    exactly zero was flagged before."""
    (warning,) = disaggregation_warnings(RoutePath.DPD, [C8], {C8: _kv_level(60258)})
    assert warning.code is Trust.PARTIAL_KV_TRANSFER
    assert "took 60,258 prompt tokens" in warning.message and "31% of the 193,680" in warning.message
    assert "below 90%" in warning.message
    # without the decoder's prompt count, the server's per-request count (usage.prompt_tokens) gives the same
    (same,) = disaggregation_warnings(RoutePath.DPD, [C8], {C8: _kv_level(60258, prompt_tokens=None)},
                                      prompt_tokens={C8: float(PROMPT)})
    assert "31% of the 193,680" in same.message


@pytest.mark.parametrize("kv", [45 * (PROMPT - 15), int(KV_MIN_FRACTION * 45 * PROMPT) + 1])
def test_whole_transfers_less_a_partial_block_pass(kv: int) -> None:
    assert disaggregation_warnings(RoutePath.DPD, [C8], {C8: _kv_level(kv)}) == []


def test_prefix_cache_hits_are_not_failed_transfers() -> None:
    assert disaggregation_warnings(RoutePath.DPD, [C8], {C8: _kv_level(45 * 1000, cache_hit=45 * 3300)}) == []
    assert disaggregation_warnings(RoutePath.DPD, [C8], {C8: _kv_level(0, cache_hit=45 * PROMPT)}) == []


# --- which pods are the endpoint's ----------------------------------------------------------------

def _pods(fakes: ModuleType, *decoders: dict[str, Any], routers: tuple[dict[str, Any], ...] = ()) -> Any:
    texts = {"decode-dpd-test-7c9-xyz": f"{KV_IN} 100\n", "decode-dpd-test-7c9-abc": f"{KV_IN} 200\n",
             "decode-dpd-test-70b-5f4-qrs": f"{KV_IN} 2000000\n"}

    def metrics(namespace: str, pod_port: str) -> str:
        if namespace == "hyperpod-inference-system":
            return _router(5, 0)
        return texts[pod_port.split(":", maxsplit=1)[0]]

    pods = fakes.router_and_decoder()
    pods["hyperpod-inference-system|"] += list(routers)
    pods["default|inference.sagemaker.aws.amazon.com/dpd-role=decode"] += list(decoders)
    core = fakes.FakeCore(pods=[[]], logs={}, other_pods=pods, metrics=metrics)
    return fakes.benchmark_kube(fakes.FakeBatch(states=[]), core), core


def test_another_endpoints_decoders_are_not_counted(spec: DpdSpec, fakes: ModuleType) -> None:
    """Endpoint dpd-test-70b's decoders share the name prefix decode-dpd-test-; they are its Deployment's, not
    this one's (before: KV IN 2,000,100 for this endpoint)."""
    kube, _ = _pods(fakes, fakes.decoder_pod("decode-dpd-test-70b-5f4-qrs"),
                       routers=(fakes.router_pod("dpd-test-default-router-x-9a8-def"),))
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert counters.total("external_kv_tokens") == 100
    assert sorted(counters.pods) == ["decoder/decode-dpd-test-7c9-xyz", "router/dpd-test-default-router-6d5f-abc"]


@pytest.mark.parametrize("other", [{"phase": "Failed"}, {"phase": "Pending"}, {"deleting": True}],
                         ids=["evicted", "pending", "terminating"])
def test_a_pod_that_is_not_running_is_left_out(spec: DpdSpec, fakes: ModuleType, other: dict[str, Any]) -> None:
    """Before, its proxy read failed and every level became routing-unknown."""
    kube, core = _pods(fakes, fakes.decoder_pod("decode-dpd-test-7c9-abc", **other))
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert counters.total("external_kv_tokens") == 100
    assert ("default", "decode-dpd-test-7c9-abc:8000", "metrics") not in core.proxied


def _answering(fakes: ModuleType, *, silent: tuple[str, ...] = (), prefillers: tuple[str, ...] = (),
               routed: int = 0) -> Any:
    """Two running decoders (xyz: 100 KV tokens, abc: 200), the router (``routed`` requests, all direct), and
    ``prefillers``; the pods in ``silent`` are Running but their metrics do not answer, as a crash-looping
    container's."""
    texts = {"decode-dpd-test-7c9-xyz": f"{KV_IN} 100\n", "decode-dpd-test-7c9-abc": f"{KV_IN} 200\n"}

    def metrics(namespace: str, pod_port: str) -> str:
        pod = pod_port.split(":", maxsplit=1)[0]
        if pod in silent:
            raise fakes.api_error(503, "connection refused")
        if namespace == "hyperpod-inference-system":
            return _router(0, routed)
        return texts.get(pod, "vllm:request_prefill_time_seconds_sum 1.0\nvllm:request_prefill_time_seconds_count 4\n")

    pods = fakes.router_and_decoder()
    pods["default|inference.sagemaker.aws.amazon.com/dpd-role=decode"].append(fakes.decoder_pod("decode-dpd-test-7c9-abc"))
    pods["default|inference.sagemaker.aws.amazon.com/dpd-role=prefill"] = [fakes.decoder_pod(p) for p in prefillers]
    core = fakes.FakeCore(pods=[[]], logs={}, other_pods=pods, metrics=metrics)
    return fakes.benchmark_kube(fakes.FakeBatch(states=[]), core)


def test_a_running_decoder_whose_metrics_do_not_answer_is_reported_not_fatal(spec: DpdSpec,
                                                                             fakes: ModuleType) -> None:
    """Decoder abc is Running but its metrics do not answer after the level. Before, read_counters raised and
    every level of both sides became routing-unknown; now the level counts the other decoder and says it misses
    abc (pod-restarted), with why."""
    sources = MetricsSources.for_spec(spec)
    before = read_counters(_answering(fakes), sources)
    after = read_counters(_answering(fakes, silent=("decode-dpd-test-7c9-abc",), routed=8), sources)
    assert after.total("external_kv_tokens") == 100
    assert list(after.unread) == ["decoder/decode-dpd-test-7c9-abc"]
    seen = LevelDisaggregation.between(before, after, load=C8)
    (change,) = seen.pod_changes
    assert change.startswith("decoder/decode-dpd-test-7c9-abc could not be read after this level (its metrics did "
                             "not answer")
    codes = [w.code for w in disaggregation_warnings(RoutePath.DIRECT, [C8], {C8: seen})]
    assert codes == [Trust.POD_RESTARTED]
    (warning,) = restart_warnings({C8: seen})
    assert "decode-dpd-test-7c9-abc could not be read after this level" in warning.message


def test_no_decoder_answering_is_still_no_snapshot(spec: DpdSpec, fakes: ModuleType) -> None:
    silent = ("decode-dpd-test-7c9-abc", "decode-dpd-test-7c9-xyz")
    with pytest.raises(KubeError, match="no running pod of the router or the decoders answered: decoder/"):
        read_counters(_answering(fakes, silent=silent), MetricsSources.for_spec(spec))


def test_an_unread_pod_is_still_missed_when_read_back_from_the_results_folder() -> None:
    """The counters file keeps each pod's sample: an unread pod's mark survives it (its why does not)."""
    before = DpdCounters.parse({"r": _router(0, 0)}, {"x": f"{KV_IN} 0\n", "y": f"{KV_IN} 0\n"})
    after = DpdCounters.parse({"r": _router(8, 0)}, {"x": f"{KV_IN} 400\n"}, unread={"decoder/y": "why"})
    stored = DpdCounters(pods={pod: dict(sample) for pod, sample in after.pods.items()})
    assert LevelDisaggregation.between(before, stored, load=C8).pod_changes == (
        "decoder/y could not be read after this level",)


def test_a_prefiller_that_does_not_answer_is_named_in_the_ttft_stages(spec: DpdSpec, fakes: ModuleType) -> None:
    """Before, it was dropped from the stages without a note."""
    from hyperpod_dpd.benchmark.proof.decomposition import decompose
    from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles

    sources = MetricsSources.for_spec(spec)
    pair = ("prefill-dpd-test-5b7-aaa", "prefill-dpd-test-5b7-bbb")
    before = read_counters(_answering(fakes, prefillers=pair), sources)
    after = read_counters(_answering(fakes, prefillers=pair, silent=(pair[1],)), sources)
    seen = LevelDisaggregation.between(before, after, load=C8)
    assert seen.pod_changes == ()  # the routing and KV counts are the decoders' and the router's: all read
    (note,) = seen.stage_notes
    assert note.startswith(f"prefiller/{pair[1]} could not be read after this level (its metrics did not answer")
    assert note.endswith("the prefill stages leave its requests out")
    none = Percentiles(None, None, None)
    level = LevelResult(load=C8, scenario="D(64,16)", ttft=none, tpot=none, e2e=none, output_tokens_per_s=0.0,
                        completed=0, failed=0, duration_s=0.0, mean_input_tokens=None, mean_output_tokens=None)
    assert decompose(level, seen).notes == (note,)


def test_every_running_decoder_is_counted_with_its_restarts(spec: DpdSpec, fakes: ModuleType) -> None:
    kube, _ = _pods(fakes, fakes.decoder_pod("decode-dpd-test-7c9-abc", restarts=2))
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert counters.total("external_kv_tokens") == 300
    assert counters.pods["decoder/decode-dpd-test-7c9-abc"]["restarts"] == 2


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
    assert [counters.total(n) for n in ("disaggregated", "local", "external_kv_tokens")] == [2, 1, 9000]
    assert core.log_reads == ["router-container"]


def test_the_router_metrics_win_when_they_carry_the_counters(spec: DpdSpec, fakes: ModuleType) -> None:
    kube, core = _kube(fakes, "dpd_routing_disaggregated_total 40\ndpd_routing_local_total 5\n")
    counters = read_counters(kube, MetricsSources.for_spec(spec))
    assert [counters.total(n) for n in ("disaggregated", "local")] == [40, 5]
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


def test_a_tokenizer_with_shorter_tokens_gets_the_routers_estimate_to_scale_by() -> None:
    """A tokenizer counting about 10% more tokens than Llama 3 on the same text: the server counted 4,400 prompt
    tokens (clear of 4,096) while the router's characters / 4 estimate was 3,978, so every request went local.
    Before, the advice was "Check the deployed routingThreshold against --isl"; the fix is --isl 4608."""
    seen = LevelDisaggregation(load=C8, disaggregated=0, local=45, fallback=0, external_kv_tokens=0)
    (warning,) = disaggregation_warnings(RoutePath.DPD, [C8], {C8: seen}, prompt_tokens={C8: 4400.0}, isl=4352,
                                         threshold=4096)
    assert warning.code is Trust.NOT_DISAGGREGATED and "routingThreshold" not in warning.message
    assert "estimates length from characters" in warning.message
    formula = re.search(r"use --isl (\d+) x (\d+) / E rounded up to (\d+)", warning.message)
    assert formula is not None
    isl, target, step = (int(group) for group in formula.groups())
    assert math.ceil(isl * target / 3978 / step) * step == 4608  # the audit's estimate gives its fix


def test_b7_prefix_cache_hits_never_pass_as_received_kv() -> None:
    """Bench audit B7, §4.4 as recorded: --prefix-share 0.9, every transfer broken, KV IN 0 and 177,540 cache-hit
    tokens on the decoder over 44 disaggregated requests (4,386 prompt tokens each, the server's count). Bench
    said "trusted"; the truth is that every request recomputed what the decoder's cache lacked."""
    prompt, requests, hits = 4386, 44, 177540
    broken = LevelDisaggregation(load=C8, disaggregated=requests, local=0, fallback=0, external_kv_tokens=0,
                                 cache_hit_tokens=hits, prompt_tokens=requests * prompt)
    (warning,) = disaggregation_warnings(RoutePath.DPD, [C8], {C8: broken})
    truth_share, bench_share_before = 0 / (requests * prompt - hits), (0 + hits) / (requests * prompt)
    print(f"B7: received share bench {0:.0%} (before: {bench_share_before:.0%}, trusted), truth {truth_share:.0%}")
    assert warning.code is Trust.NO_KV_TRANSFER
    assert "177,540 prompt tokens, which are not received KV" in warning.message
    # half of what the cache lacked arrives: partial, named as a share of what was needed
    half = dataclasses.replace(broken, external_kv_tokens=(requests * prompt - hits) // 2)
    (partial,) = disaggregation_warnings(RoutePath.DPD, [C8], {C8: half})
    assert partial.code is Trust.PARTIAL_KV_TRANSFER and "50% of the 15,444" in partial.message
    # the healthy twin: all but a last block of what the cache lacked arrives
    healthy = dataclasses.replace(broken, external_kv_tokens=requests * prompt - hits - requests * 15)
    assert disaggregation_warnings(RoutePath.DPD, [C8], {C8: healthy}) == []
