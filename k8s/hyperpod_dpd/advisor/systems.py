"""Which AIConfigurator system and model stand for a spec's instance type and architecture.

The mapping is explicit: an instance type or model without measured vLLM data in AIConfigurator's
database is refused with the list of what is covered, never approximated by a neighbour.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.architecture import ModelArchitecture
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
    """What the estimates run on: an AIConfigurator system, backend and bundled model."""

    system: str
    backend: str
    model_path: str


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
    if model is None:
        problems.append(Problem(
            field="model.architecture", value=architecture.name,
            message="has no model in AIConfigurator's database with vLLM results; the advisor does not "
                    "estimate a model from a neighbour's data",
            fix="use one of the presets " + ", ".join(MODELS) + ", or size this model with 'hyperpod-dpd plan'"))
    if problems:
        raise SpecError(problems)
    assert system is not None and model is not None
    return Target(system=system, backend=BACKEND, model_path=model)
