#!/usr/bin/env python3
"""Cost of ``hyperpod-dpd advise --trace`` on a one-day synthetic trace, side by side with ``advise --request-rate``.

Writes a one-day diurnal trace with the traces generator (mean 3 requests/s, peak over trough 3, lognormal
lengths of mean 4,096 in and 256 out: about 259,000 requests) and a spec with ``slo:`` and SLO autoscaling
on both roles (capacities not pinned: the advisor computes them, as a user's first run does), then times, in
one run and in fresh processes (AIConfigurator's import and database load counted every time, as on the
command line), interleaved so a noisy moment hits every case alike: ``trace summary`` of the file;
``advise --request-rate 3`` (one open-loop point of the same spec); ``plan --trace``; ``advise --trace``;
``advise --trace --autoscale``. Prints wall-clock and CPU medians (the CPU of the child: on a shared machine
the wall clock also counts other work) and each as a ratio to ``advise --request-rate``. Not part of the
test suite; needs the ``advisor`` extra.

    .venv/bin/python bench/advise_trace_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hyperpod_dpd.spec.defaults import default_spec_text
from hyperpod_dpd.traces import Lengths, LengthShape, generate, write_mooncake

FOLDER = Path(tempfile.gettempdir()) / "hyperpod-dpd-advise-trace-bench"
TRACE = FOLDER / "day.jsonl"
SPEC = FOLDER / "spec.yaml"
WORKSPACE = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1234abcd"
SCALED = ("prefill:\n  replicas: 1\n  autoscaling:\n    max_replicas: 4\n    slo: true\n"
          "decode:\n  replicas: 1\n  autoscaling:\n    max_replicas: 1\n    slo: true\n")

CASES: dict[str, list[str]] = {
    "trace summary (read the day)": ["trace", "summary", str(TRACE)],
    "advise --request-rate 3 (one point)": ["advise", str(SPEC), "--isl", "4096", "--osl", "256", "--request-rate",
                                            "3", "--baseline-nodes", "1"],
    "plan --trace": ["plan", str(SPEC), "--trace", str(TRACE)],
    "advise --trace": ["advise", str(SPEC), "--trace", str(TRACE)],
    "advise --trace --autoscale": ["advise", str(SPEC), "--trace", str(TRACE), "--autoscale"],
}
BASELINE = "advise --request-rate 3 (one point)"
# advise --trace exits 1 when the emulated layout misses slo.objective: a result, not a failure of the run
ANSWERED = (0, 1)


def write_inputs() -> int:
    FOLDER.mkdir(exist_ok=True)
    trace = generate("diurnal", rate_per_s=3.0, duration_s=86_400.0, seed=1,
                     input_tokens=Lengths(mean=4096, shape=LengthShape.LOGNORMAL),
                     output_tokens=Lengths(mean=256, shape=LengthShape.LOGNORMAL))
    write_mooncake(trace, TRACE)
    text = default_spec_text().replace("prefill:\n  replicas: 1\ndecode:\n  replicas: 1\n", SCALED)
    text = text.replace("metrics:\n  enabled: true\n", f"metrics:\n  enabled: true\n  amp_workspace_url: {WORKSPACE}\n")
    SPEC.write_text(text + "slo:\n  ttft_ms: 2000\n  tpot_ms: 50\n", encoding="utf-8")
    return len(trace.requests)


def timed(argv: list[str]) -> tuple[float, float]:
    """One fresh ``python -m hyperpod_dpd.cli`` process: wall clock and the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hyperpod_dpd.cli", *argv], capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ANSWERED:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is shown (default: 3)")
    args = parser.parse_args()
    requests = write_inputs()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, argv in CASES.items():
            runs[name].append(timed(argv))
    base_wall = statistics.median(w for w, _ in runs[BASELINE])
    base_cpu = statistics.median(c for _, c in runs[BASELINE])
    print(f"hyperpod-dpd advise --trace benchmark: a one-day diurnal trace of {requests:,} requests; "
          f"{args.repeat} run(s) per case, fresh process each, medians; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    print()
    width = max(len(name) for name in CASES)
    print(f"{'case':<{width}}  {'wall s':>7}  {'cpu s':>6}  {'x wall':>6}  {'x cpu':>6}")
    print("-" * (width + 33))
    for name, found in runs.items():
        wall = statistics.median(w for w, _ in found)
        cpu = statistics.median(c for _, c in found)
        print(f"{name:<{width}}  {wall:>7.2f}  {cpu:>6.2f}  {wall / base_wall:>6.2f}  {cpu / base_cpu:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
