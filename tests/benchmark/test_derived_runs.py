"""The runs conftest derives from another run's counters are what the stub itself counts under their behaviour.

``direct_run``, ``partial_kv_run``, ``cached_run`` and ``short_estimate_run`` start no client of their own: the stub
answers alike on either path, so only its router and decoder counters differ, and conftest rewrites the recorded run's.
Here the stub's own server routes the same prompts under each behaviour (no client, no network), and the rewritten
counters, routing lines and estimates must be what it counted.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

WINDOWS = (0, 5, 11, 16)  # the prompts routed when each quiet window is read
SHARED = [f"s{i}" for i in range(32)]  # a prefix of four whole cache blocks of 8 words


def _prompts() -> list[str]:
    """64-word prompts with a shared 32-word prefix (the prefix run's shape), two of them too short to disaggregate
    (the estimate is the word count or a quarter of the characters, the larger: words of 3 characters at most keep it
    the word count, as with the suite's tokenizer), the last cut mid-block."""
    prompts = [" ".join([*SHARED, *(f"{n:x}{i}" for i in range(32))]) for n in range(16)]
    prompts[3] = prompts[9] = " ".join(["x"] * 20)
    prompts[-1] = " ".join(prompts[-1].split()[:61])
    return prompts


def _counted(stub_runner: SimpleNamespace, behaviour: Any, prompts: list[str]) -> Any:
    """The stub's server routing ``prompts`` in order, its counters read at each of :data:`WINDOWS`."""
    server = stub_runner.Server(behaviour)
    try:
        metrics, seen = {}, {}
        for window, mark in enumerate(WINDOWS):
            for prompt in prompts[len(server.prompts):mark]:
                server.route(prompt)
            metrics[window] = (server.metrics("/router/metrics") or "", server.metrics("/decoder/metrics") or "")
            seen[window] = len(server.prompts)
        return stub_runner.Run(0, Path("results"), len(prompts), "", metrics, prompts=tuple(server.prompts),
                               prompts_seen=seen, estimates=tuple(server.estimates), behaviour=behaviour,
                               router_log="".join(f"{line}\n" for line in server.router_log))
    finally:
        server.server_close()


CASES = {  # a derived run: the recorded run's behaviour, the derived run's, and whether short prompts are in it
    "direct": ({}, {"routing_threshold": 100_000}, True),
    "short-estimate": ({}, {"estimate_scale": 0.3}, True),
    "partial-kv": ({}, {"kv_fail_every": 2}, True),
    "cached": ({"prefix_block": 8}, {"prefix_block": 8, "local_cache_hits": True}, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_derived_run_is_what_the_stub_counts_under_its_behaviour(name: str, stub_runner: SimpleNamespace) -> None:
    recorded_knobs, derived_knobs, with_short = CASES[name]
    prompts = _prompts() if with_short else [p for p in _prompts() if len(p.split()) > 32]
    healthy = stub_runner.Behaviour(first_token_s=0.02, per_token_s=0.005)
    recorded = _counted(stub_runner, dataclasses.replace(healthy, **recorded_knobs), prompts)
    truth = _counted(stub_runner, dataclasses.replace(healthy, **derived_knobs), prompts)
    assert truth.metrics != recorded.metrics  # the behaviour changes what the stub counts
    derived = stub_runner.derived[name](recorded)
    assert derived.metrics == truth.metrics
    assert (derived.router_log, derived.estimates, derived.behaviour) == (truth.router_log, truth.estimates,
                                                                          truth.behaviour)
