#!/usr/bin/env python3
"""Cost of ``hyperpod-dpd advise`` side by side with ``plan``, each as a user runs it.

Times, in one run and in fresh processes (so AIConfigurator's import and database load are counted
every time, as on the command line): ``plan``; ``advise`` for three load points; ``advise --search``
for one load point (operator-runnable layouts, and every layout); ``advise --request-rate``.
Prints wall-clock medians and the ratio of each to ``plan``. Not part of the test suite; needs the
``advisor`` extra.

    .venv/bin/python bench/advise_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

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
}


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
