"""The emulator on synthetic traces, with the product's queueing model (and an analytic stand-in where only the
control loop is under test)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import fuzz_examples, poisson_trace

from hyperpod_dpd.advisor import Traffic, advise
from hyperpod_dpd.advisor.autoscaling import EmulatedDay, LatencyPoint, QueueingLatency, emulate
from hyperpod_dpd.advisor.autoscaling.hpa import MetricSample, TargetType, replicas_for_metric
from hyperpod_dpd.advisor.autoscaling.workload import workload
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, Signal
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.autoscaling import MetricType
from hyperpod_dpd.traces.model import Trace, TraceRequest


@dataclass
class Analytic:
    """A stand-in latency: each prefiller completes 5 requests/s, each decoder 10; M/M/1-like TTFT growth."""

    def capacity(self, prefill: int, decode: int) -> float:
        return min(5.0 * prefill, 10.0 * decode)

    def at(self, prefill: int, decode: int, rate: float) -> LatencyPoint:
        load = rate / self.capacity(prefill, decode)
        return LatencyPoint(ttft_p90_s=0.2 / (1 - load), tpot_s=0.01, tpot_p90_s=0.011, queue_s=0.1 * load)


def test_the_slo_holds_on_a_steady_trace(slo_spec: DpdSpec, latency: QueueingLatency,
                                         prefill_scaling: CompiledScaling) -> None:
    trace = poisson_trace(lambda _t: 2.0, duration_s=3600, seed=1)
    day = emulate(slo_spec, trace, scaling={"prefill": prefill_scaling}, latency=latency)
    # the spec's default objective (slo.objective 0.99): at 2 requests/s one prefiller runs at 37 % of its capacity
    assert day.slo_attainment is not None and day.slo_attainment >= 0.99
    assert max(day.ttft_p90_s) < 1.0


def test_replicas_follow_a_diurnal_trace_within_the_control_lag(slo_spec: DpdSpec, latency: QueueingLatency,
                                                                 prefill_scaling: CompiledScaling) -> None:
    period = 7200.0  # a compressed day: trough at 0 and 7,200 s, peak at 3,600 s
    trace = poisson_trace(lambda t: 4.0 - 3.0 * math.cos(2 * math.pi * t / period), duration_s=period, seed=2)
    # demand alone, so that the lag is the control loop's (the SLO-ratio floor reacts to latency, not to demand)
    only_demand = replace(prefill_scaling, triggers=prefill_scaling.triggers[:1])
    target, start_up_s = prefill_scaling.capacity.tokens_per_s, prefill_scaling.start_up_s
    day = emulate(slo_spec, trace, scaling={"prefill": only_demand}, latency=latency)
    ready = day.roles["prefill"].ready
    at = {round(t): k for k, t in enumerate(day.times_s)}
    assert ready[at[3900]] > ready[at[300]]  # 300 s after the peak against 300 s after the trough
    peak = max(ready)
    window = 4  # the query's [1m] in 15 s steps
    # when the HPA's own law (tolerance band included) first asks for the peak from one fewer, on the trace's
    # trailing-minute prompt tokens: what an instant, exact KEDA would have seen
    demand = [sum(day.arrivals_per_s[max(0, k - window + 1):k + 1]) / min(window, k + 1) * 4096
              for k in range(len(ready))]
    first_needed = next(k for k, tokens in enumerate(demand) if replicas_for_metric(
        MetricSample(value=tokens, target=target, target_type=TargetType.AVERAGE_VALUE),
        spec_replicas=peak - 1, status_replicas=peak - 1, ready_replicas=peak - 1) >= peak)
    first_ready = next(k for k, r in enumerate(ready) if r >= peak)
    lag_s = (first_ready - first_needed) * day.step_s
    # start-up 300 s + scale-up stabilisation 0 + polling 30 + the HPA's 15 s sync + a step for the pod to be
    # counted; 60 s more for Poisson noise: a noisy minute can cross the line between two polls and fall back
    assert 0 <= lag_s <= start_up_s + 0 + 30 + 15 + 15 + 60, lag_s
    assert ready[-1] < peak  # and it comes down again by the next trough


def test_a_bursty_trace_raises_the_sizing_above_a_steady_one_of_the_same_mean(
        slo_spec: DpdSpec, latency: QueueingLatency, prefill_scaling: CompiledScaling) -> None:
    steady = poisson_trace(lambda _t: 4.0, duration_s=7200, seed=3)
    bursty = poisson_trace(lambda t: 7.0 if (t // 600) % 2 == 0 else 1.0, duration_s=7200, seed=3)
    assert abs(len(bursty.requests) / len(steady.requests) - 1) < 0.05  # the same mean rate, 4 requests/s
    calm = emulate(slo_spec, steady, scaling={"prefill": prefill_scaling}, latency=latency)
    burst = emulate(slo_spec, bursty, scaling={"prefill": prefill_scaling}, latency=latency)
    assert burst.roles["prefill"].peak_replicas > calm.roles["prefill"].peak_replicas


@pytest.mark.parametrize("rate", [2.0, 3.5])
def test_a_fixed_layout_on_a_steady_poisson_trace_reproduces_advise(slo_spec: DpdSpec, rate: float) -> None:
    day = emulate(slo_spec, poisson_trace(lambda _t: rate, duration_s=3600, seed=7))  # the product path, no scaling
    point = advise(slo_spec, Traffic(isl=4096, osl=256, request_rate=rate), thorough=False).points[0].disaggregated
    # The curve is advise's own simulation (same stations, seed and 4,000 arrivals) at grid shares of capacity;
    # measured misses at 37 % and 65 % of capacity: p90 TTFT +1.5 % and +3.2 % (linear interpolation between
    # grid points of a convex curve, and the 5-minute rate's remaining Poisson noise), mean TPOT +0.1 %.
    assert day.mean_ttft_p90_s == pytest.approx(point.ttft_p90_s, rel=0.05)
    assert day.mean_tpot_s == pytest.approx(point.tpot_s, rel=0.01)
    assert set(day.roles["prefill"].desired) == {1} and set(day.roles["decode"].desired) == {1}


def test_the_same_inputs_give_the_same_day(slo_spec: DpdSpec, latency: QueueingLatency,
                                           prefill_scaling: CompiledScaling) -> None:
    trace = poisson_trace(lambda t: 2.0 + math.sin(t / 300), duration_s=900, seed=4)

    def fresh() -> QueueingLatency:  # new curves each time (1,000 arrivals a point, to keep the test short)
        return QueueingLatency(stations=latency.stations, osl=latency.osl, requests=1000)

    first = emulate(slo_spec, trace, scaling={"prefill": prefill_scaling}, latency=fresh())
    second = emulate(slo_spec, trace, scaling={"prefill": prefill_scaling}, latency=fresh())
    assert first.to_json() == second.to_json() and first.roles["prefill"].peak_replicas > 1


def test_a_new_pod_serves_only_after_its_start_up(slo_spec: DpdSpec, prefill_scaling: CompiledScaling) -> None:
    trace = poisson_trace(lambda t: 1.0 if t < 600 else 8.0, duration_s=1800, seed=5, peak=8.0)
    day = emulate(slo_spec, trace, scaling={"prefill": replace(prefill_scaling, start_up_s=120.0)}, latency=Analytic())
    role = day.roles["prefill"]
    asked = next(k for k, d in enumerate(role.desired) if d > 1)  # the HPA wrote more replicas at this step's end
    serving = next(k for k, r in enumerate(role.ready) if r > 1)
    assert (serving - asked) * day.step_s == pytest.approx(120.0 + day.step_s)  # ready 120 s after that step's end


def test_the_day_is_json_and_its_costs_add_up(slo_spec: DpdSpec, prefill_scaling: CompiledScaling) -> None:
    trace = poisson_trace(lambda t: 1.0 if t < 900 else 9.0, duration_s=1800, seed=6, peak=9.0)
    day: EmulatedDay = emulate(slo_spec, trace, scaling={"prefill": prefill_scaling}, latency=Analytic(),
                               price_per_node_hour=10.0)
    found = json.loads(json.dumps(day.to_json(), allow_nan=False))
    prefill = day.roles["prefill"]
    assert found["roles"]["prefill"]["peak_replicas"] == prefill.peak_replicas > 1
    assert prefill.usd == pytest.approx(prefill.node_hours * 10.0)  # one TP8 pod fills one 8-GPU node
    assert prefill.node_hours == pytest.approx(prefill.replica_hours)
    assert prefill.provisioned_nodes == 4 and day.roles["decode"].provisioned_nodes == 1
    assert prefill.provisioned_usd == pytest.approx(4 * len(day.times_s) * day.step_s / 3600 * 10.0)
    assert len(found["series"]["ttft_p90_s"]) == len(day.times_s) == len(prefill.ready)


def test_an_overload_builds_a_backlog_that_lengthens_ttft(slo_spec: DpdSpec) -> None:
    trace = poisson_trace(lambda t: 2.0 if t < 300 else 12.0, duration_s=900, seed=8, peak=12.0)
    day = emulate(slo_spec, trace, latency=Analytic())  # one prefiller holds 5 requests/s, 12 arrive
    assert day.queue[-1] > day.queue[5] and day.ttft_p90_s[-1] > 10 * day.ttft_p90_s[5]
    assert day.slo_attainment is not None and day.slo_attainment < 0.6


def test_prefix_hits_and_routing_reduce_the_prefill_work() -> None:
    requests = (TraceRequest(at_s=0.0, input_tokens=2048, output_tokens=10, prefix_blocks=(1, 2, 3, 4)),
                TraceRequest(at_s=1.0, input_tokens=2048, output_tokens=10, prefix_blocks=(1, 2, 9, 9)),
                TraceRequest(at_s=2.0, input_tokens=100, output_tokens=10))
    shape = workload(Trace(requests=requests, source="test", block_tokens=512), threshold=1000, step_s=15)
    # the second prompt's first two blocks were seen: 2,048 - 2 x 512 computed; the 100-token one skips prefill
    assert shape.prefill_tokens == (2048 + 1024,)
    assert shape.routed_share == pytest.approx(2 / 3) and shape.cached_share == pytest.approx(1024 / 4096)
    assert shape.arrivals == (3,) and shape.output_tokens == (30,)
    everything = workload(Trace(requests=requests, source="test"), threshold=0, step_s=15)  # 0: the router sends all
    assert everything.routed_share == 1 and everything.prefill_tokens == (2048 + 2048 + 100,)


def test_bad_inputs_are_refused_with_the_field(slo_spec: DpdSpec, prefill_scaling: CompiledScaling) -> None:
    trace = poisson_trace(lambda _t: 1.0, duration_s=60, seed=9)
    cases = [
        (dict(trace=Trace(requests=(), source="empty")), "trace"),
        (dict(step_s=30.0), "step_s"),
        (dict(step_s=0.0), "step_s"),
        (dict(scaling={"prefill": replace(prefill_scaling, min_replicas=0)}), "scaling.prefill.min_replicas"),
        (dict(scaling={"decode": prefill_scaling}), "scaling"),
        (dict(spec=replace(slo_spec, slo=None), scaling={"prefill": prefill_scaling}), "scaling.prefill.triggers"),
    ]
    for options, field in cases:
        arguments = {"spec": slo_spec, "trace": trace, "latency": Analytic(), **options}
        with pytest.raises(SpecError) as raised:
            emulate(arguments.pop("spec"), arguments.pop("trace"), **arguments)
        assert field in [problem.field for problem in raised.value.problems], options


def test_the_hpa_sees_the_value_keda_polled_last(slo_spec: DpdSpec, prefill_scaling: CompiledScaling) -> None:
    trace = poisson_trace(lambda t: 0.5 + t / 300, duration_s=1800, seed=10, peak=6.5)  # demand rising all along
    demand = replace(prefill_scaling.triggers[0], target=5000.0)  # up to 6.5 x 4,096 / 5,000: 6 replicas
    polled = replace(prefill_scaling, polling_interval_s=60, max_replicas=8, triggers=(demand,))
    day = emulate(slo_spec, trace, scaling={"prefill": polled}, latency=Analytic())
    desired = day.roles["prefill"].desired
    ups = [k for k in range(1, len(desired)) if desired[k] > desired[k - 1]]
    assert len(ups) >= 3
    # KEDA polls at the end of the first step and every 60 s after: a rise is decided only on a fresh value
    assert all(((k + 1) * day.step_s - day.step_s) % 60 == 0 for k in ups), ups


def test_a_queue_trigger_scales_on_the_requests_waiting(slo_spec: DpdSpec, prefill_scaling: CompiledScaling) -> None:
    queue = CompiledTrigger(name="prefill-queue", signal=Signal.QUEUE, query="sum(vllm:num_requests_waiting)",
                            target=20.0, metric_type=MetricType.AVERAGE, fallback=0.0)
    trace = poisson_trace(lambda t: 2.0 if t < 300 else 12.0, duration_s=1200, seed=11, peak=12.0)
    day = emulate(slo_spec, trace, scaling={"prefill": replace(prefill_scaling, triggers=(queue,))},
                  latency=Analytic())
    prefill = day.roles["prefill"]
    assert prefill.desired[10] == 1 and prefill.peak_replicas > 1  # no queue at 2/s; a growing one at 12/s
    assert max(day.queue[:20]) < 20 < max(day.queue)


def test_the_decode_role_scales_on_the_output_tokens(slo_spec: DpdSpec, prefill_scaling: CompiledScaling) -> None:
    tokens = CompiledTrigger(name="decode-demand", signal=Signal.DEMAND, query="sum(rate(generation_tokens[1m]))",
                             target=500.0, metric_type=MetricType.AVERAGE, fallback=0.0)
    decode = replace(prefill_scaling, role="decode", triggers=(tokens,), max_replicas=3)
    day = emulate(slo_spec, poisson_trace(lambda _t: 4.0, duration_s=900, seed=12), scaling={"decode": decode},
                  latency=Analytic())
    # 4 requests/s x 256 output tokens = 1,024 tokens/s over 500 per replica: ceil(2.05) = 3
    assert day.roles["decode"].peak_replicas == 3 and set(day.roles["prefill"].desired) == {1}


CASES = st.fixed_dictionaries({
    "gaps": st.lists(st.floats(min_value=0.0, max_value=120.0), min_size=1, max_size=60),
    "length": st.integers(min_value=1, max_value=8000), "low": st.integers(min_value=1, max_value=3),
    "extra": st.integers(min_value=0, max_value=4), "polling": st.integers(min_value=1, max_value=300),
    "start_up": st.floats(min_value=0.0, max_value=900.0), "step": st.sampled_from([1.0, 5.0, 7.5, 15.0])})


@settings(max_examples=fuzz_examples(40), deadline=None)  # the rest from the fuzz profile (conftest.py)
@given(case=CASES)
def test_any_trace_and_scaling_keep_the_replicas_within_their_bounds(
        slo_spec: DpdSpec, prefill_scaling: CompiledScaling, case: dict[str, Any]) -> None:
    times = [sum(case["gaps"][:i]) for i in range(len(case["gaps"]))]
    length, low, high = case["length"], case["low"], case["low"] + case["extra"]
    trace = Trace(requests=tuple(TraceRequest(at_s=t - times[0], input_tokens=length, output_tokens=1 + length % 300)
                                 for t in times), source="fuzz")
    bounded = replace(prefill_scaling, min_replicas=low, max_replicas=high, polling_interval_s=case["polling"],
                      start_up_s=case["start_up"])
    day = emulate(slo_spec, trace, scaling={"prefill": bounded}, latency=Analytic(), step_s=case["step"])
    prefill = day.roles["prefill"]
    assert all(low <= d <= high for d in prefill.desired) and all(r <= high for r in prefill.ready)
    assert len(prefill.ready) == len(day.times_s) == len(day.ttft_p90_s)
    json.dumps(day.to_json(), allow_nan=False)
