#!/usr/bin/env python3
"""Cost of ``hyperpod-dpd advise`` side by side with ``plan``, each as a user runs it.

Times, in one run and in fresh processes (so AIConfigurator's import and database load are counted
every time, as on the command line): ``plan``; ``advise`` for three load points; ``advise --search``
for one load point (operator-runnable layouts, and every layout); ``advise --request-rate``;
``advise --calibrate`` on a bench file with a DPD and an aggregated run at three levels. Prints
wall-clock medians and the ratio of each to ``plan``, then the calibration alone in this process
(AIConfigurator loaded): wall and CPU seconds and its ratio to one ``advise`` of the same levels.
Not part of the test suite; needs the ``advisor`` extra.

    .venv/bin/python bench/advise_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hyperpod_dpd.advisor import Advice, Traffic, advise
from hyperpod_dpd.advisor.calibration import calibrate, layout_identity, parse_bench
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.benchmark.report.report import results_object
from hyperpod_dpd.benchmark.run.results import BenchmarkResults, LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.defaults import default_spec

TRAFFIC = Traffic(isl=4096, osl=256, concurrency=(8, 16, 32))
BENCH_FILE = Path(tempfile.gettempdir()) / "hyperpod-dpd-advise-bench.json"

CASES: dict[str, list[str]] = {
    "plan": ["plan"],
    "advise (3 load points)": ["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32",
                               "--baseline-nodes", "1"],
    "advise --search (1 load point)": ["advise", "--isl", "8192", "--osl", "512", "--concurrency", "64",
                                       "--ttft-ms", "2000", "--tpot-ms", "30", "--search"],
    "advise --search --any-layout": ["advise", "--isl", "4096", "--osl", "256", "--concurrency", "32",
                                     "--ttft-ms", "1000", "--tpot-ms", "20", "--search", "--any-layout"],
    "advise --request-rate (open loop)": ["advise", "--isl", "4096", "--osl", "256", "--request-rate", "4.5",
                                          "--baseline-nodes", "1"],
    "advise --calibrate (2 runs, 3 levels)": ["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8,16,32",
                                              "--baseline-nodes", "1", "--calibrate", str(BENCH_FILE)],
}


def bench_file(advice: Advice) -> dict[str, Any]:
    """``advice`` as ``bench --json`` would print a run of the default spec and of its aggregated twin."""
    spec = default_spec()
    identity = {"model": spec.model.name, "architecture": "llama-3.3-70b",
                "instance_type": spec.instance_type.facts.name, "layout": layout_identity(spec)}
    scenario = Scenario(isl=advice.isl, osl=advice.osl, concurrency=tuple(p.concurrency for p in advice.points))
    runs = {}
    for label, side, endpoint in (("dpd", "disaggregated", spec.name),
                                  ("aggregated", "aggregated", f"{spec.name}-agg")):
        levels = tuple(LevelResult(
            load=Load(concurrency=p.concurrency), scenario=f"D({advice.isl},{advice.osl})",
            ttft=Percentiles(e.ttft_s, None, None), tpot=Percentiles(e.tpot_s, None, None),
            e2e=Percentiles(e.e2e_s, None, None), output_tokens_per_s=e.output_tokens_per_s, completed=100,
            failed=0, duration_s=600.0, mean_input_tokens=advice.isl, mean_output_tokens=advice.osl,
            answered=((e.ttft_s, e.tpot_s),)) for p in advice.points for e in [getattr(p, side)])
        runs[label] = {**results_object(endpoint=endpoint, scenario=scenario, results=BenchmarkResults(levels=levels),
                                        warnings=[], identity=identity), "problem": None}
    return {"runs": runs}


def calibration_in_process() -> tuple[float, float, float]:
    """Wall and CPU seconds of one ``calibrate`` with AIConfigurator loaded, and one warm ``advise``'s wall."""
    truth = PhaseFactors(prefill=1.4, decode=1.2, aggregated=PhaseFactors(prefill=1.0, decode=1.3))
    document = bench_file(advise(default_spec(), TRAFFIC, baseline_nodes=1, factors=truth))
    BENCH_FILE.write_text(json.dumps(document), encoding="utf-8")
    started = time.perf_counter()
    advise(default_spec(), TRAFFIC, baseline_nodes=1)
    one_advise = time.perf_counter() - started
    wall, cpu = time.perf_counter(), time.process_time()
    calibrate(default_spec(), TRAFFIC, parse_bench(document, where="bench"), source="bench")
    return time.perf_counter() - wall, time.process_time() - cpu, one_advise


def wall_seconds(argv: list[str]) -> float:
    """One fresh ``python -m hyperpod_dpd.cli`` process, wall clock; a failing command stops the bench."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hyperpod_dpd.cli", *argv], capture_output=True, text=True,
                          check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is shown (default: 3)")
    args = parser.parse_args()
    calibrations = [calibration_in_process() for _ in range(args.repeat)]
    runs: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):  # interleaved, so a noisy moment hits every case alike
        for name, argv in CASES.items():
            runs[name].append(wall_seconds(argv))
    floor = statistics.median(runs["plan"])
    print(f"hyperpod-dpd advise benchmark ({args.repeat} run(s) per case, fresh process each, wall clock, medians)")
    print()
    width = max(len(name) for name in CASES)
    print(f"{'case':<{width}}  {'wall s':>7}  {'x plan':>7}  {'min s':>6}  {'max s':>6}")
    print("-" * (width + 34))
    for name, times in runs.items():
        median = statistics.median(times)
        print(f"{name:<{width}}  {median:>7.2f}  {median / floor:>7.2f}  {min(times):>6.2f}  {max(times):>6.2f}")
    wall, cpu, one = (statistics.median(c[i] for c in calibrations) for i in range(3))
    print()
    print(f"calibrate() alone, AIConfigurator loaded: {wall:.2f} s wall, {cpu:.2f} s CPU, {wall / one:.1f}x one advise "
          f"of the same levels ({one:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
