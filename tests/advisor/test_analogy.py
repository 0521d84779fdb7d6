"""Models outside AIConfigurator's data: estimated by analogy to the nearest measured model, and labelled so."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from support import write_spec

from hyperpod_dpd.advisor import Advice, Traffic, advise, systems
from hyperpod_dpd.advisor.analogy import ANALOGY_SPREAD_PER_DISTANCE, AnalogySteps, analogy_spread
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.cli import main
from hyperpod_dpd.spec import ModelSpec
from hyperpod_dpd.spec.architecture import PRESETS
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType

QWEN = ("Qwen2.5-72B-Instruct", "qwen2.5-72b")
MISTRAL = ("Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3")


def _advice(name: str, architecture: str) -> Advice:
    spec = default_spec()
    spec = replace(spec, model=ModelSpec(name=name, source=spec.model.source, architecture=architecture))
    return advise(spec, Traffic(isl=4096, osl=256, concurrency=(16,)))


@pytest.fixture(scope="module")
def qwen() -> Advice:
    return _advice(*QWEN)


@pytest.mark.parametrize(("preset", "nearest"), [("qwen2.5-72b", "llama-3.1-70b"), ("qwen2.5-32b", "llama-3.1-70b"),
                                                 ("mistral-7b-v0.3", "llama-3.1-8b"),
                                                 ("mistral-large-2407", "llama-3.1-70b")])
def test_the_nearest_measured_model_by_parameters_and_attention_shape(preset: str, nearest: str) -> None:
    target = systems.target_for(InstanceType.P5_48XLARGE, PRESETS[preset])
    assert (target.analogy_of, target.reference, target.model_path) == (preset, nearest, systems.MODELS[nearest])
    assert target.label == f"by analogy to {systems.MODELS[nearest]}"


def test_a_measured_model_is_not_an_analogy() -> None:
    target = systems.target_for(InstanceType.P5_48XLARGE, PRESETS["llama-3.3-70b"])
    assert target.analogy_of is None
    assert target.label == "measured data of meta-llama/Meta-Llama-3.1-70B"


def test_a_model_by_analogy_to_itself_keeps_the_measured_times() -> None:
    llama = PRESETS["llama-3.1-70b"]
    estimator = Estimator(systems.target_for(InstanceType.P5_48XLARGE, llama), llama, isl=4096, osl=256,
                          gpus_per_node=8)
    measured = estimator.steps(8)
    same = AnalogySteps(measured, model=llama, reference_model=llama, gpu_model="H100")
    assert same.prefill_s(4096) == pytest.approx(measured.prefill_s(4096))
    assert same.decode_step_s(16) == pytest.approx(measured.decode_step_s(16))
    bigger = AnalogySteps(measured, model=PRESETS["qwen2.5-72b"], reference_model=llama, gpu_model="H100")
    assert 1.0 < bigger.prefill_s(4096) / measured.prefill_s(4096) < 1.1  # 3 % more parameters, longer MLP


@pytest.mark.parametrize(("model", "reference"), [("llama-3.1-70b", "llama-3.1-8b"), ("llama-3.1-8b", "llama-3.1-70b")])
def test_the_analogy_error_on_measured_pairs_is_inside_the_band(model: str, reference: str) -> None:
    """The spread per unit of distance is measured here: the analogy's miss on models AIConfigurator has."""
    arch, ref = PRESETS[model], PRESETS[reference]

    def steps(a: str) -> Estimator:
        return Estimator(systems.target_for(InstanceType.P5_48XLARGE, PRESETS[a]), PRESETS[a], isl=4096, osl=256,
                         gpus_per_node=8)

    direct, by_analogy = steps(model).steps(8), AnalogySteps(steps(reference).steps(8), model=arch,
                                                             reference_model=ref, gpu_model="H100")
    misses = [abs(math.log(by_analogy.prefill_s(n) / direct.prefill_s(n))) for n in (4096, 8192)]
    misses += [abs(math.log(by_analogy.decode_step_s(b) / direct.decode_step_s(b))) for b in (8, 16, 32)]
    distance = sum(systems.analogy_distance(arch, ref))
    assert max(misses) <= ANALOGY_SPREAD_PER_DISTANCE * distance
    assert max(misses) > 0.2  # the pairs are far apart: the analogy really misses, the band is not idle


def test_advise_on_qwen_is_labelled_by_analogy_with_a_wider_band(qwen: Advice, equal_cost_advice: Advice) -> None:
    assert qwen.by_analogy_to == "meta-llama/Meta-Llama-3.1-70B"
    point = qwen.points[0]
    for side in (point.aggregated, point.disaggregated):
        assert side.by_analogy_to == "meta-llama/Meta-Llama-3.1-70B"
        assert side.to_json()["by_analogy_to"] == "meta-llama/Meta-Llama-3.1-70B"
    assert qwen.to_json()["by_analogy_to"] == "meta-llama/Meta-Llama-3.1-70B"
    assert "by analogy" in qwen.assumptions["model_data"]
    llama = next(p for p in equal_cost_advice.points if p.concurrency == 16).disaggregated
    assert llama.ttft_band_s is not None and point.disaggregated.ttft_band_s is not None
    llama_width = llama.ttft_band_s[1] / llama.ttft_band_s[0]
    qwen_width = point.disaggregated.ttft_band_s[1] / point.disaggregated.ttft_band_s[0]
    spread = analogy_spread(PRESETS["qwen2.5-72b"], PRESETS["llama-3.1-70b"])
    assert qwen_width == pytest.approx(llama_width * math.exp(2 * spread), rel=0.15)


def test_a_llama_spec_is_not_labelled(equal_cost_advice: Advice) -> None:
    assert equal_cost_advice.by_analogy_to is None
    assert all(p.disaggregated.by_analogy_to is None and p.aggregated.by_analogy_to is None
               for p in equal_cost_advice.points)
    assert "by analogy" not in equal_cost_advice.assumptions["model_data"]


@pytest.mark.parametrize(("model", "reference"), [(QWEN, "meta-llama/Meta-Llama-3.1-70B"),
                                                  (MISTRAL, "meta-llama/Meta-Llama-3.1-8B")])
def test_cli_labels_qwen_and_mistral_in_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      model: tuple[str, str], reference: str) -> None:
    spec = write_spec(tmp_path, ("  name: Llama-3.3-70B-Instruct\n",
                                 f"  name: {model[0]}\n  architecture: {model[1]}\n"))
    assert main(["advise", spec, "--isl", "4096", "--osl", "256", "--concurrency", "8"]) == 0
    out = capsys.readouterr().out
    assert f"Estimated by analogy to {reference}: {model[0]} is not in AIConfigurator's data" in out
    assert main(["advise", spec, "--isl", "4096", "--osl", "256", "--concurrency", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["by_analogy_to"] == reference
    assert data["points"][0]["disaggregated"]["by_analogy_to"] == reference


def test_a_mixture_of_experts_model_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("  name: Llama-3.3-70B-Instruct\n",
                                 "  name: Mixtral-8x7B-Instruct-v0.1\n  architecture: mixtral-8x7b\n"))
    assert main(["advise", spec, "--isl", "4096", "--osl", "256", "--concurrency", "8"]) == 2
    err = capsys.readouterr().err
    assert "model.architecture: is a mixture-of-experts model" in err and "(got 'mixtral-8x7b')" in err
    assert "Traceback" not in err
