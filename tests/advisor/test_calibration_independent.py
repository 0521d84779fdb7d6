"""Calibration against a truth the advisor did not generate: an independent event simulation (independent_des.py).

The truth runs the same kernel step times with what the audit found DPD's own costs would be (DPD prefill
x1.40, decode step x1.30; the aggregated twin x1.20 / x1.18), gamma service times (CV 0.3), continuous
batching on every engine (a prefiller takes two 4,096-token prompts into one 8,192-token step; a decoder
admits arrivals at its next step) and vLLM's chunked prefill on the aggregated engine. The advisor is
calibrated per layout on the truth's concurrency 8 and 32 (1P+1D), then predicts what it never saw: the
level 16 of both layouts, and a 2P+1D layout at 16, 32 and 48.

Targets: TTFT within TTFT_TARGET, TPOT and throughput within RATE_TARGET. Where the prediction stays off it
is pinned in MISSES with its size (within PIN_WIDTH) and why, so a model change that closes or widens a
miss fails here and must update the pin, the docs and the reading together. What the pins say: the
advisor's prefiller takes one prompt at a time, the truth's two per step; the fit absorbs the difference
into a slower prefill (x1.57 against the true x1.40), which holds one prefiller at 8 and 32 clients but
not two prefillers, whose queue it overstates at 48 (TTFT +71 %, throughput -12 %) and understates below.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hyperpod_dpd.advisor import Traffic, advise
from hyperpod_dpd.advisor.calibration import Fit, calibrate, parse_bench
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.validation import check


def _load_des() -> Any:
    """The simulation module beside this file (the suite's test folders are not packages)."""
    found = importlib.util.spec_from_file_location("independent_des", Path(__file__).with_name("independent_des.py"))
    assert found is not None and found.loader is not None
    module = importlib.util.module_from_spec(found)
    sys.modules[found.name] = module  # dataclasses look their module up while the class is made
    found.loader.exec_module(module)
    return module


_DES = _load_des()
Kernels, Level, aggregated, dpd = _DES.Kernels, _DES.Level, _DES.aggregated, _DES.dpd
ISL, OSL = 4096, 256
FITTED = (8, 32)
TTFT_TARGET = 0.25
RATE_TARGET = 0.10
PIN_WIDTH = 0.03
TRUE_DPD = (1.40, 1.30)
TRUE_AGGREGATED = (1.20, 1.18)
TRANSFER_S = 0.0034  # the planner's line-rate transfer of the prompt's KV on ml.p5.48xlarge
METRICS = ("ttft_s", "tpot_s", "output_tokens_per_s")
# (layout, concurrency, metric): the measured relative error of the calibrated prediction, and why it stays off.
_BATCHING = "the advisor's prefiller takes one prompt at a time, the truth's two per 8,192-token step"
MISSES: dict[tuple[str, int, str], tuple[float, str]] = {
    ("2P1D", 16, "ttft_s"): (-0.259, f"{_BATCHING}; two prefillers at 16 clients rarely queue in the model"),
    ("2P1D", 32, "ttft_s"): (-0.286, _BATCHING),
    ("2P1D", 48, "ttft_s"): (0.706, f"{_BATCHING}: the fitted x1.57 prefill saturates two prefillers at 48"),
    ("2P1D", 48, "output_tokens_per_s"): (-0.115, "follows from the prefill the fit made too slow"),
}


@pytest.fixture(scope="module")
def kernels() -> dict[str, Any]:
    spec = default_spec()
    architecture = check(spec).architecture
    assert architecture is not None
    steps = Estimator(target_for(spec.instance_type, architecture), architecture, isl=ISL, osl=OSL,
                      gpus_per_node=spec.instance_type.facts.gpus, engine=engine_settings(spec)).steps(
        spec.tensor_parallel_size)

    def scaled(prefill: float, decode: float, transfer_s: float = 0.0) -> Any:
        return Kernels(prefill_s=lambda n: prefill * steps.prefill_s(n),
                       decode_s=lambda b: decode * steps.decode_step_s(b), transfer_s=transfer_s)

    return {"DPD": scaled(*TRUE_DPD, TRANSFER_S), "aggregated": scaled(*TRUE_AGGREGATED)}


def _as_advice(levels: list[tuple[Any, Any]]) -> Any:
    """The truth's levels in the shape the suite's bench writer reads (an Advice's points)."""
    def side(level: Any) -> SimpleNamespace:
        return SimpleNamespace(**{name: getattr(level, name) for name in
                                  ("ttft_s", "ttft_p90_s", "tpot_s", "e2e_s", "output_tokens_per_s")})

    return SimpleNamespace(isl=ISL, osl=OSL, points=[
        SimpleNamespace(concurrency=d.concurrency, disaggregated=side(d), aggregated=side(a)) for d, a in levels])


@pytest.fixture(scope="module")
def fit(kernels: dict[str, Any], bench_of: Any) -> Fit:
    levels = [(dpd(kernels["DPD"], prefillers=1, concurrency=c, isl=ISL, osl=OSL),
               aggregated(kernels["aggregated"], concurrency=c, isl=ISL, osl=OSL)) for c in FITTED]
    measured = _as_advice(levels)
    document = bench_of(measured, aggregated=measured)
    return calibrate(default_spec(), Traffic(isl=ISL, osl=OSL, concurrency=FITTED),
                     parse_bench(document, where="truth.json"), source="truth.json")


def _errors(predicted: Any, truth: Any) -> dict[str, float]:
    return {name: getattr(predicted, name) / getattr(truth, name) - 1 for name in METRICS}


def _check(layout: str, concurrency: int, errors: dict[str, float]) -> None:
    for name, error in errors.items():
        pinned = MISSES.get((layout, concurrency, name))
        target = TTFT_TARGET if name == "ttft_s" else RATE_TARGET
        if pinned is None:
            assert abs(error) <= target, f"{layout} at {concurrency}: {name} off by {error:+.3f}"
        else:
            assert abs(error) > target, f"{layout} at {concurrency}: {name} now within ({error:+.3f}): unpin it"
            assert error == pytest.approx(pinned[0], abs=PIN_WIDTH), f"{layout} at {concurrency}: {name} moved"


def test_the_fit_finds_the_true_decode_step_and_absorbs_the_batching_into_the_prefill(fit: Fit) -> None:
    assert fit.factors.decode == pytest.approx(TRUE_DPD[1], rel=0.02)
    assert fit.factors.prefill == pytest.approx(1.57, abs=0.03)  # the truth's 1.40 and its two-prompt steps


def test_a_held_out_level_of_both_layouts(fit: Fit, kernels: dict[str, Any]) -> None:
    got = advise(default_spec(), Traffic(isl=ISL, osl=OSL, concurrency=(16,)), baseline_nodes=1,
                 factors=fit.factors, thorough=False).points[0]
    _check("1P1D", 16, _errors(got.disaggregated, dpd(kernels["DPD"], prefillers=1, concurrency=16, isl=ISL,
                                                       osl=OSL)))
    _check("aggregated", 16, _errors(got.aggregated, aggregated(kernels["aggregated"], concurrency=16, isl=ISL,
                                                                 osl=OSL)))


@pytest.mark.parametrize("concurrency", [16, 32, 48])
def test_a_held_out_layout(concurrency: int, fit: Fit, kernels: dict[str, Any]) -> None:
    spec = default_spec()
    two = replace(spec, prefill=replace(spec.prefill, replicas=2))
    got = advise(two, Traffic(isl=ISL, osl=OSL, concurrency=(concurrency,)), baseline_nodes=1, factors=fit.factors,
                 thorough=False).points[0]
    _check("2P1D", concurrency, _errors(got.disaggregated, dpd(kernels["DPD"], prefillers=2, concurrency=concurrency,
                                                                isl=ISL, osl=OSL)))
