"""Shared, session-cached advisor results: AIConfigurator loads its database once per test session."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hyperpod_dpd.advisor import Advice, Traffic, advise
from hyperpod_dpd.benchmark.report.report import results_object
from hyperpod_dpd.benchmark.run.results import BenchmarkResults, LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.session import run_layouts
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.defaults import default_spec

# The AWS blog's benchmark: genai-bench, 4,096 input and 256 output tokens, concurrency 8, 16 and 32.
BLOG_TRAFFIC = Traffic(isl=4096, osl=256, concurrency=(8, 16, 32))


@pytest.fixture(scope="session")
def blog_advice() -> Advice:
    """The default spec against one aggregated node, as the blog compared them."""
    return advise(default_spec(), BLOG_TRAFFIC, baseline_nodes=1)


@pytest.fixture(scope="session")
def equal_cost_advice() -> Advice:
    """The default spec against as many aggregated nodes as it uses (two)."""
    return advise(default_spec(), BLOG_TRAFFIC)


# What bench --json records of the default spec's runs (the model, its architecture, the instance type); each run's
# layout is bench's own (run_layouts: the DPD endpoint's, the twin's).
DEFAULT_IDENTITY: dict[str, Any] = {"model": "Llama-3.3-70B-Instruct", "architecture": "llama-3.3-70b",
                                    "instance_type": "ml.p5.48xlarge"}


def _run(advice: Advice, side: str, *, endpoint: str, failed: int, identity: dict[str, Any] | None,
         means: bool) -> dict[str, Any]:
    levels = tuple(
        LevelResult(load=Load(concurrency=p.concurrency), scenario=f"D({advice.isl},{advice.osl})",
                    ttft=Percentiles(e.ttft_s, e.ttft_p90_s, None), tpot=Percentiles(e.tpot_s, None, None),
                    e2e=Percentiles(e.e2e_s, None, None), output_tokens_per_s=e.output_tokens_per_s,
                    completed=10 * p.concurrency, failed=failed, duration_s=600.0, mean_input_tokens=advice.isl,
                    mean_output_tokens=advice.osl, answered=((e.ttft_s, e.tpot_s),) if means else ())
        for p in advice.points for e in [getattr(p, side)])
    scenario = Scenario(isl=advice.isl, osl=advice.osl, concurrency=tuple(p.concurrency for p in advice.points))
    label = "dpd" if side == "disaggregated" else "aggregated"
    run = results_object(endpoint=endpoint, scenario=scenario, results=BenchmarkResults(levels=levels), warnings=[],
                         job="hyperpod-dpd-bench-20261201-000000", identity=identity,
                         layout=None if identity is None else run_layouts(default_spec())[label])
    return {**run, "problem": None}


def bench_document(advice: Advice, *, endpoint: str = "dpd-test", failed: int = 0,
                   identity: dict[str, Any] | None = DEFAULT_IDENTITY, means: bool = True,
                   aggregated: Advice | None = None) -> dict[str, Any]:
    """The DPD side of ``advice`` as ``hyperpod-dpd bench --json`` prints a run of ``endpoint``.

    Built with the benchmark's own writer (``results_object``): means and p50 = the predicted means
    (``means=False``: a bench older than the client means), so a calibration on it must find the
    factors the advice was made with. ``aggregated``: also a ``runs.aggregated`` (the twin,
    ``<endpoint>-agg``) from that advice's baseline side.
    """
    runs = {"dpd": _run(advice, "disaggregated", endpoint=endpoint, failed=failed, identity=identity, means=means)}
    if aggregated is not None:
        runs["aggregated"] = _run(aggregated, "aggregated", endpoint=f"{endpoint}-agg", failed=failed,
                                  identity=identity, means=means)
    return {"runs": runs}


@pytest.fixture(scope="session")
def bench_of() -> Callable[..., dict[str, Any]]:
    return bench_document
