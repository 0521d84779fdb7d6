"""The explicit mapping to AIConfigurator's systems and models, and what it refuses."""

from __future__ import annotations

import pytest

from hyperpod_dpd.advisor import Traffic, advise, systems
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.spec.architecture import PRESETS
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType


def test_every_dpd_instance_type_has_a_system() -> None:
    assert set(systems.SYSTEMS) == set(InstanceType)
    assert systems.SYSTEMS[InstanceType.P5_48XLARGE] == "h100_sxm"
    assert systems.SYSTEMS[InstanceType.P5EN_48XLARGE] == "h200_sxm"


@pytest.mark.parametrize("preset", sorted(systems.MODELS))
def test_mapped_presets_match_the_bundled_model_shape(preset: str) -> None:
    target = systems.target_for(InstanceType.P5EN_48XLARGE, PRESETS[preset])
    Estimator(target, PRESETS[preset], isl=1024, osl=128, gpus_per_node=8)  # raises on a shape mismatch


def test_unmapped_moe_model_is_refused_with_the_supported_list() -> None:
    with pytest.raises(SpecError) as caught:
        systems.target_for(InstanceType.P5_48XLARGE, PRESETS["mixtral-8x7b"])
    (problem,) = caught.value.problems
    assert problem.field == "model.architecture"
    assert problem.value == "mixtral-8x7b"
    assert "llama-3.3-70b" in problem.message


def test_unmapped_instance_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(systems.SYSTEMS, InstanceType.P6_B300_48XLARGE)
    with pytest.raises(SpecError) as caught:
        systems.target_for(InstanceType.P6_B300_48XLARGE, PRESETS["llama-3.3-70b"])
    (problem,) = caught.value.problems
    assert (problem.field, problem.value) == ("instance_type", "ml.p6-b300.48xlarge")
    assert "ml.p5.48xlarge" in problem.fix


def test_model_the_database_fails_on_that_gpu_is_refused() -> None:
    """AIConfigurator's own matrix has no passing vLLM run of Llama 3.1 405B on H100."""
    target = systems.target_for(InstanceType.P5_48XLARGE, PRESETS["llama-3.1-405b"])
    with pytest.raises(SpecError, match="support matrix has no passing vllm estimate"):
        Estimator(target, PRESETS["llama-3.1-405b"], isl=1024, osl=128, gpus_per_node=8)


def test_a_custom_architecture_under_a_preset_name_is_not_trusted() -> None:
    from dataclasses import replace

    odd = replace(PRESETS["llama-3.3-70b"], num_layers=60)
    target = systems.target_for(InstanceType.P5_48XLARGE, odd)
    with pytest.raises(SpecError, match="num_layers 60 vs 80"):
        Estimator(target, odd, isl=1024, osl=128, gpus_per_node=8)
    fp8 = replace(PRESETS["llama-3.3-70b"], dtype="fp8")
    with pytest.raises(SpecError, match="dtype fp8 vs bfloat16"):
        Estimator(target, fp8, isl=1024, osl=128, gpus_per_node=8)


def test_advise_refuses_an_unsupported_model() -> None:
    from dataclasses import replace

    from hyperpod_dpd.spec import ModelSpec

    spec = default_spec()
    spec = replace(spec, model=ModelSpec(name="Mixtral-8x7B-Instruct-v0.1", source=spec.model.source,
                                         architecture="mixtral-8x7b"))
    with pytest.raises(SpecError, match=r"model\.architecture"):
        advise(spec, Traffic(isl=4096, osl=256, concurrency=(8,)))
