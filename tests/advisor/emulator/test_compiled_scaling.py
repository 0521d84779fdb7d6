"""The SLO compiler's output played through the emulator: what synth renders is what the emulator proves."""

from __future__ import annotations

from support import poisson_trace, slo_autoscaled

from hyperpod_dpd.advisor.emulator import QueueingLatency
from hyperpod_dpd.advisor.emulator.emulator import emulate
from hyperpod_dpd.scaling import compile_all
from hyperpod_dpd.scaling.shape import pin_capacities


def test_the_compiled_demand_trigger_adds_prefillers_and_decode_stays_at_one(latency: QueueingLatency) -> None:
    # The default layout and request shape the shared latency model was simulated for; capacities pinned.
    spec = pin_capacities(slo_autoscaled(), {"prefill": 19000.0, "decode": 2300.0})
    compiled = compile_all(spec)
    target = compiled["prefill"].triggers[0].target
    rate = 3 * target / 4096  # three prefillers' worth of prompts after five quiet minutes
    day = emulate(spec, poisson_trace(lambda t: 1.0 if t < 300 else rate, duration_s=900, seed=3), scaling=compiled,
                  latency=latency)
    prefill, decode = day.roles["prefill"], day.roles["decode"]
    assert prefill.autoscaled and decode.autoscaled
    assert prefill.desired[0] == 1 and prefill.peak_replicas >= 3
    assert decode.peak_replicas == 1  # capped at the one decode deployment the operator runs
