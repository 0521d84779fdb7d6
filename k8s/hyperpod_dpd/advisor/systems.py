"""Which AIConfigurator system and model stand for a spec's instance type and architecture.

The mapping is explicit. An instance type without measured vLLM data is refused. A dense model
outside AIConfigurator's data is estimated *by analogy* (:mod:`hyperpod_dpd.advisor.analogy`): the
nearest measured model (:func:`nearest_measured`) lends its kernel timings, scaled by the roofline
of the two shapes, and every figure says so. A mixture-of-experts model is refused: a dense
reference cannot show its routing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.architecture import PRESETS, ModelArchitecture
from hyperpod_dpd.spec.instances import InstanceType

BACKEND = "vllm"

# The GPU of each DPD instance type, as AIConfigurator names its measured systems (SXM parts, 8 per node).
SYSTEMS: dict[InstanceType, str] = {
    InstanceType.P5_48XLARGE: "h100_sxm",
    InstanceType.P5E_48XLARGE: "h200_sxm",
    InstanceType.P5EN_48XLARGE: "h200_sxm",
    InstanceType.P6_B200_48XLARGE: "b200_sxm",
    InstanceType.P6_B300_48XLARGE: "b300_sxm",
}

# Our architecture presets whose shape matches a model config that AIConfigurator ships and has vLLM
# results for on every system above. Llama 3.3 70B has the layers, heads and widths of Llama 3.1 70B.
MODELS: dict[str, str] = {
    "llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.3-70b": "meta-llama/Meta-Llama-3.1-70B",
    "llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
}


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the estimates run on: an AIConfigurator system, backend and bundled model.

    :param analogy_of: the spec's architecture when ``model_path`` only lends its measured efficiency
        (an estimate by analogy). :default: None - the data are the model's own
    :param reference: the preset whose shape ``model_path`` has. :default: "" - the spec's own
    :param gpu_model: the instance type's GPU, for the roofline of an analogy. :default: ""
    """

    system: str
    backend: str
    model_path: str
    analogy_of: str | None = None
    reference: str = ""
    gpu_model: str = ""

    @property
    def label(self) -> str:
        """How every figure names where its kernel data come from."""
        return f"by analogy to {self.model_path}" if self.analogy_of else f"measured data of {self.model_path}"


def analogy_distance(model: ModelArchitecture, reference: ModelArchitecture) -> tuple[float, float]:
    """How far ``reference`` is from ``model``: |ln parameter ratio|, then |ln query-per-KV-head ratio|.

    Parameter count sets the GEMM and weight-read share of a step; the grouped-query ratio sets what
    attention reads per token. Smaller is nearer; the first term decides, the second breaks ties.
    """
    gqa = (model.num_attention_heads / model.num_kv_heads) / (reference.num_attention_heads / reference.num_kv_heads)
    return abs(math.log(model.num_parameters / reference.num_parameters)), abs(math.log(gqa))


def nearest_measured(model: ModelArchitecture) -> str:
    """The preset in :data:`MODELS` nearest to ``model`` by :func:`analogy_distance` (first by name on a tie)."""
    return min(sorted(MODELS), key=lambda name: analogy_distance(model, PRESETS[name]))


def target_for(instance_type: InstanceType, architecture: ModelArchitecture) -> Target:
    """The AIConfigurator target for a spec, or :class:`SpecError` naming the unsupported field."""
    problems: list[Problem] = []
    system = SYSTEMS.get(instance_type)
    if system is None:
        problems.append(Problem(
            field="instance_type", value=instance_type.api_name,
            message="has no AIConfigurator system with vLLM data, so it cannot be estimated",
            fix="use one of " + ", ".join(t.api_name for t in SYSTEMS)))
    model = MODELS.get(architecture.name)
    if model is None and architecture.is_moe:
        problems.append(Problem(
            field="model.architecture", value=architecture.name,
            message="is a mixture-of-experts model and AIConfigurator's vLLM data cover dense models only "
                    "(" + ", ".join(MODELS) + "); a dense model's timings cannot show expert routing",
            fix="size this model with 'hyperpod-dpd plan' and measure it with 'hyperpod-dpd bench'"))
    if problems:
        raise SpecError(problems)
    assert system is not None
    if model is not None:
        return Target(system=system, backend=BACKEND, model_path=model, reference=architecture.name,
                      gpu_model=instance_type.facts.gpu_model)
    reference = nearest_measured(architecture)
    return Target(system=system, backend=BACKEND, model_path=MODELS[reference], analogy_of=architecture.name,
                  reference=reference, gpu_model=instance_type.facts.gpu_model)
