"""Chunked prefill of a long prompt in an aggregated engine: each chunk attends over the chunks before it."""

from __future__ import annotations

import pytest

from hyperpod_dpd.advisor import systems
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.advisor.steps import PhaseFactors, aggregated_stations, dpd_stations
from hyperpod_dpd.spec.architecture import PRESETS
from hyperpod_dpd.spec.instances import InstanceType


@pytest.fixture(scope="module")
def llama() -> dict[int, Estimator]:
    arch = PRESETS["llama-3.3-70b"]
    target = systems.target_for(InstanceType.P5_48XLARGE, arch)
    return {isl: Estimator(target, arch, isl=isl, osl=256, gpus_per_node=8) for isl in (8192, 32768)}


def _aggregated_prefill_s(estimator: Estimator) -> float:
    stations = aggregated_stations(estimator.steps(8), PhaseFactors(), replicas=1, slots=8, isl=estimator.isl, osl=256)
    return stations.prefill_s(0)


def test_a_32k_prompt_costs_more_than_four_8k_prefills(llama: dict[int, Estimator]) -> None:
    """Four 8,192-token chunks of a 32,768-token prompt: the later ones attend over up to 24k earlier tokens."""
    short, long = _aggregated_prefill_s(llama[8192]), _aggregated_prefill_s(llama[32768])
    assert long > 4.2 * short  # superlinear: before, it was exactly 4 x prefill(8192)


def test_the_chunked_prefill_is_about_the_whole_prompts_prefill(llama: dict[int, Estimator]) -> None:
    """The same work on the same GPUs: the aggregated engine's chunks together and DPD's one prefill agree."""
    estimator = llama[32768]
    aggregated = _aggregated_prefill_s(estimator)
    dpd = dpd_stations(estimator.steps(8), PhaseFactors(), prefill_replicas=1, decode_replicas=1, decode_slots=8,
                       transfer_s=0.0, isl=32768).prefill_s(0)
    assert aggregated == pytest.approx(dpd, rel=0.05)
    assert aggregated >= dpd * 0.999  # each chunk's fixed cost only adds
