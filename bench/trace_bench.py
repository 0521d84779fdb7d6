#!/usr/bin/env python3
"""Cost of one day of traffic as data: generating it, writing and reading it as Mooncake JSONL, summarising it.

A diurnal day at 3 requests/s (about 260,000 requests), the trace ``advise --trace`` and ``plan --trace`` size
for. Prints the wall and CPU seconds of each step (the medians of ``--repeat`` runs); CPU seconds are the figure
to compare on a shared machine. Not part of the test suite: ``make bench``.

    .venv/bin/python bench/trace_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hyperpod_dpd.traces import generate, read_trace, summarise, write_mooncake


def _timed(step: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "day.jsonl"
        steps: dict[str, Callable[[], Any]] = {
            "generate": lambda: generate("diurnal", rate_per_s=3.0, duration_s=86_400, seed=0),
            "write": lambda: write_mooncake(generate_once, path),
            "read": lambda: read_trace(path),
            "summarise": lambda: summarise(read_once),
        }
        generate_once = steps["generate"]()
        write_mooncake(generate_once, path)
        read_once = read_trace(path)
        print(f"one diurnal day: {len(generate_once.requests):,} requests, {path.stat().st_size / 1e6:.1f} MB")
        print(f"{'step':<10} {'wall s':>8} {'cpu s':>8}")
        for name, step in steps.items():
            runs = [_timed(step) for _ in range(args.repeat)]
            print(f"{name:<10} {statistics.median(r[0] for r in runs):>8.2f} "
                  f"{statistics.median(r[1] for r in runs):>8.2f}")


if __name__ == "__main__":
    main()
