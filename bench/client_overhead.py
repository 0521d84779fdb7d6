#!/usr/bin/env python3
"""Client-added TTFT of genai-bench, aiperf and a minimal asyncio client, side by side, against one stub.

Which client ``bench`` runs for closed-loop levels is this measurement. Each client sends closed-loop
levels (default 8, 16, 32 and 64 streams) to the test suite's streaming stub
(``tests/benchmark/fake_openai.py``) with a known TTFT and TPOT; the stub records every request's own
TTFT on its clock. The client-added TTFT at p50 and p99 is the client's quantile minus the stub's for
the same level, printed in milliseconds and as the ratio client / stub, beside bench's bound at that
quantile (:mod:`hyperpod_dpd.benchmark.proof.overhead`). genai-bench and aiperf run as the rendered Job's
``benchmark`` container runs them (``tests/benchmark/conftest.py``'s ``run_client``: its script,
arguments and environment), one level per run; the control is the asyncio client below, a process of
its own so it shares no interpreter with the stub. Not part of the test suite; needs the ``bench``
extra. Numbers depend on the machine's free cores, so compare the clients within one run.

    .venv/bin/python bench/client_overhead.py [--levels 8,16,32,64] [--isl 4352] [--osl 128]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "k8s")]

from support import load_module  # noqa: E402

from hyperpod_dpd.benchmark.proof.overhead import overhead_bound, quantile, tail_bound  # noqa: E402
from hyperpod_dpd.benchmark.run.client import Client  # noqa: E402
from hyperpod_dpd.benchmark.run.results import read_directory  # noqa: E402
from hyperpod_dpd.benchmark.run.scenario import Scenario  # noqa: E402

ROUNDS = 4  # requests per stream and level: enough for the tail, short enough for 64 streams
CONTROL = "asyncio (control)"


@dataclass(frozen=True)
class Row:
    client: str
    level: int
    server: tuple[float, ...]  # the stub's TTFT of each request, seconds
    measured: tuple[float, ...]  # the client's

    def cells(self) -> list[str]:
        server = [quantile(self.server, q) or 0.0 for q in (0.5, 0.99)]
        client = [quantile(self.measured, q) or 0.0 for q in (0.5, 0.99)]
        added = [c - s for c, s in zip(client, server, strict=True)]
        bounds = [overhead_bound(server[0]), tail_bound(server[1])]
        within = all(a <= b for a, b in zip(added, bounds, strict=True))
        return [self.client, str(self.level), str(len(self.measured)),
                "/".join(f"{v * 1e3:.0f}" for v in server), "/".join(f"{v * 1e3:.0f}" for v in client),
                "/".join(f"{v * 1e3:+.0f}" for v in added),
                "/".join(f"{c / s:.2f}" if s else "n/a" for c, s in zip(client, server, strict=True)),
                "yes" if within else "NO"]


async def _control(url: str, concurrency: int, requests: int, isl: int, osl: int) -> list[float]:
    """The control: ``concurrency`` closed-loop streams over one pooled aiohttp session, prompts built before
    the clock starts, TTFT taken at the first content chunk."""
    import aiohttp  # noqa: PLC0415 - only the control process needs it

    rng = random.Random(0)
    prompts = [" ".join(f"w{rng.randrange(50_000)}" for _ in range(isl)) for _ in range(requests)]
    ttfts: list[float] = []
    queue = list(reversed(prompts))
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def stream() -> None:
            while queue:
                body = {"model": "/opt/ml/model", "stream": True, "max_tokens": osl, "ignore_eos": True,
                        "messages": [{"role": "user", "content": queue.pop()}]}
                started = time.perf_counter()
                first = None
                async with session.post(f"{url}/v1/chat/completions", json=body) as answer:
                    async for line in answer.content:
                        if first is None and line.startswith(b"data: {") and b'"content"' in line:
                            first = time.perf_counter() - started
                if first is not None:
                    ttfts.append(first)

        await asyncio.gather(*(stream() for _ in range(concurrency)))
    return ttfts


def control_row(fake: Any, behaviour: Any, *, level: int, isl: int, osl: int) -> Row:
    with fake.serving(behaviour) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = subprocess.run([sys.executable, __file__, "--control", url, "--levels", str(level), "--isl", str(isl),
                               "--osl", str(osl)], capture_output=True, text=True, check=True)
        server_ttfts = tuple(server.ttfts)
    return Row(CONTROL, level, server_ttfts, tuple(json.loads(done.stdout)))


def client_row(conftest: Any, behaviour: Any, tokenizer: Path, client: Client, *, level: int, isl: int,
               osl: int) -> Row:
    scenario = Scenario(isl=isl, osl=osl, concurrency=(level,), requests=ROUNDS * level, max_seconds=600,
                        client=client)
    with tempfile.TemporaryDirectory() as base:
        run = conftest.run_client(behaviour, tokenizer, Path(base), scenario)
        if run.returncode != 0:
            raise SystemExit(f"{client.value} at {level} exited {run.returncode}: {run.stderr[-2000:]}")
        (result,) = read_directory(run.folder).levels
        (server,) = run.server_ttfts_by_level()
    return Row(client.value, level, server, tuple(ttft for ttft, _ in result.answered))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n\n")[0])
    parser.add_argument("--levels", default="8,16,32,64")
    parser.add_argument("--isl", type=int, default=4352)
    parser.add_argument("--osl", type=int, default=128)
    parser.add_argument("--ttft", type=float, default=0.5, help="the stub's TTFT in seconds (default: 0.5)")
    parser.add_argument("--tpot", type=float, default=0.02, help="the stub's TPOT in seconds (default: 0.02)")
    parser.add_argument("--control", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    if args.control:  # the control client's own process
        print(json.dumps(asyncio.run(_control(args.control, levels[0], ROUNDS * levels[0], args.isl, args.osl))))
        return 0
    conftest = load_module("bench_conftest", ROOT / "tests" / "benchmark" / "conftest.py")
    behaviour = conftest.Behaviour(first_token_s=args.ttft, per_token_s=args.tpot, routing_threshold=0)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = conftest.build_tokenizer(Path(folder))
        for level in levels:
            rows.append(control_row(conftest.fake_openai, behaviour, level=level, isl=args.isl, osl=args.osl))
            for client in (Client.AIPERF, Client.GENAI_BENCH):
                rows.append(client_row(conftest, behaviour, tokenizer, client, level=level, isl=args.isl,
                                       osl=args.osl))
                print(f"done: {client.value} at {level}", file=sys.stderr)
    header = ["CLIENT", "CONC", "N", "STUB p50/p99 ms", "CLIENT p50/p99 ms", "ADDED p50/p99 ms",
              "RATIO p50/p99", "WITHIN BOUND"]
    table = [header, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    print(f"stub: TTFT {args.ttft * 1e3:.0f} ms, TPOT {args.tpot * 1e3:.0f} ms; D({args.isl},{args.osl}); "
          f"{ROUNDS} requests per stream")
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
