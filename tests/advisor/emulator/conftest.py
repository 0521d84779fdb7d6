"""Shared emulator inputs: the default spec with an SLO, one latency model for the test traces' shape, and a
prefill role compiled the way the SLO compiler compiles it (built by hand until the compiler lands)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import poisson_trace

from hyperpod_dpd.advisor.emulator import QueueingLatency, queueing_latency
from hyperpod_dpd.advisor.emulator.workload import workload
from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, RoleCapacity, Signal
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.autoscaling import MetricType
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.observability import SloSpec

# One prefiller of the default spec completes about 5.3 requests of 4,096 tokens per second (the queueing model's
# capacity); 12,000 prompt tokens per second is about 55 % of that, a target that keeps p90 TTFT far below 1 s.
PREFILL_TARGET = 12_000.0
START_UP_S = 300.0


@pytest.fixture(scope="session")
def slo_spec() -> DpdSpec:
    return replace(default_spec(), slo=SloSpec(ttft_ms=1000, tpot_ms=30))


@pytest.fixture(scope="session")
def latency(slo_spec: DpdSpec) -> QueueingLatency:
    """The product's latency model for 4,096-in, 256-out requests, shared so each layout's curve is simulated once."""
    shape = workload(poisson_trace(lambda _t: 1.0, duration_s=60, seed=0), threshold=slo_spec.routing.threshold,
                     step_s=15)
    model = queueing_latency(slo_spec, shape)
    model.capacity(1, 1)  # AIConfigurator's step times are computed once per process, here rather than in a test
    return model


@pytest.fixture(scope="session")
def prefill_scaling() -> CompiledScaling:
    demand = CompiledTrigger(name="prefill-demand", signal=Signal.DEMAND,
                             query="sum(rate(vllm:prompt_tokens_total{role=\"prefill\"}[1m])) or vector(0)",
                             target=PREFILL_TARGET, metric_type=MetricType.AVERAGE, fallback=0.0)
    ttft = CompiledTrigger(name="prefill-ttft", signal=Signal.SLO_RATIO,
                           query="histogram_quantile(0.9, sum by (le) (rate(ttft_bucket[5m]))) / 1.0 or vector(0)",
                           target=1.0, metric_type=MetricType.VALUE, fallback=0.0)
    return CompiledScaling(role="prefill", min_replicas=1, max_replicas=4, polling_interval_s=30, cooldown_s=300,
                           initial_cooldown_s=300, scale_up_stabilisation_s=0, scale_down_stabilisation_s=300,
                           start_up_s=START_UP_S, capacity=RoleCapacity(tokens_per_s=PREFILL_TARGET, source="test"),
                           triggers=(demand, ttft))
