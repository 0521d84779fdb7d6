#!/usr/bin/env python3
"""Cost of emulating a day of traffic through KEDA, the HPA and the queueing model, against one ``advise``.

In this process, after one warm-up (so AIConfigurator's import, database load and step times are paid once,
as ``advise --trace`` pays them once): one ``advise --request-rate`` point; then a one-day diurnal Poisson
trace (mean 3 requests/s, 4,096 in and 256 out) emulated with the layout fixed, and with the prefill role
autoscaled on a demand trigger (fresh latency curves each time). Prints wall and CPU seconds, the layouts
whose curves were simulated, and each wall time as a ratio to the ``advise`` point. Not part of the test
suite; needs the ``advisor`` extra.

    .venv/bin/python bench/emulator_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

from hyperpod_dpd.advisor import Traffic, advise
from hyperpod_dpd.advisor.emulator import emulate
from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, RoleCapacity, Signal
from hyperpod_dpd.spec.autoscaling import MetricType
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.observability import SloSpec
from hyperpod_dpd.traces import Lengths, at_rate

DAY_S = 86_400.0
SPEC = replace(default_spec(), slo=SloSpec(ttft_ms=1000, tpot_ms=30))
DEMAND = CompiledTrigger(name="prefill-demand", signal=Signal.DEMAND, query="sum(rate(prompt_tokens[1m]))",
                         target=12_000.0, metric_type=MetricType.AVERAGE, fallback=0.0)
PREFILL = CompiledScaling(role="prefill", min_replicas=1, max_replicas=4, polling_interval_s=30, cooldown_s=300,
                          initial_cooldown_s=300, scale_up_stabilisation_s=0, scale_down_stabilisation_s=300,
                          start_up_s=300.0, capacity=RoleCapacity(tokens_per_s=12_000.0, source="bench"),
                          triggers=(DEMAND,))


def timed(run: Callable[[], object]) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    found = run()
    return time.perf_counter() - wall, time.process_time() - cpu, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    fixed = {"input_tokens": Lengths(mean=4096), "output_tokens": Lengths(mean=256)}
    trace = at_rate(lambda t: 3.0 - 2.0 * math.cos(2 * math.pi * t / DAY_S), peak=5.0, duration_s=DAY_S, seed=1,
                    **fixed)
    advise(SPEC, Traffic(isl=4096, osl=256, request_rate=3.0))  # warm-up
    emulate(SPEC, at_rate(lambda _t: 1.0, peak=1.0, duration_s=60, seed=0, **fixed))
    cases: dict[str, Callable[[], object]] = {
        "advise --request-rate 3 (one point)": lambda: advise(SPEC, Traffic(isl=4096, osl=256, request_rate=3.0)),
        "emulate a day, fixed layout": lambda: emulate(SPEC, trace),
        "emulate a day, prefill autoscaled": lambda: emulate(SPEC, trace, scaling={"prefill": PREFILL}),
    }
    print(f"trace: {len(trace.requests):,} requests over {DAY_S / 3600:.0f} h; median of {repeat}")
    baseline = None
    for name, run in cases.items():
        runs = [timed(run) for _ in range(repeat)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        baseline = baseline or wall
        layouts = getattr(runs[-1][2], "layouts", None)
        extra = f", layouts {list(layouts)}" if layouts is not None else ""
        print(f"{name:40s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  x{wall / baseline:5.2f}{extra}")


if __name__ == "__main__":
    main()
