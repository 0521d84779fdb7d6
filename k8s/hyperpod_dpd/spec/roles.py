"""One role (prefill or decode): how many pods, on what hardware, with which extra vLLM flags."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hyperpod_dpd.spec._frozen import Frozen
from hyperpod_dpd.spec.autoscaling import AutoscalingSpec
from hyperpod_dpd.spec.fields import REFUSED


@dataclass(frozen=True, kw_only=True)
class Resources(Frozen):
    """Requests (set equal to limits, as GPU pods need) for one pod.

    :param gpus: ``nvidia.com/gpu``. :default: - the tensor parallel size
    :param cpu: a Kubernetes CPU quantity such as ``"96"``. :default: - not requested
    :param memory: a Kubernetes memory quantity such as ``"1024Gi"``. :default: - not requested
    :param efa: ``vpc.amazonaws.com/efa`` devices. :default: - not requested (the operator's
        published example requests none)
    """

    gpus: int | None = None
    cpu: str | None = None
    memory: str | None = None
    efa: int | None = None


@dataclass(frozen=True, kw_only=True)
class RoleSpec(Frozen):
    """Prefill or decode pods.

    :param replicas: pods of this role. :default: 1
    :param gpu_memory_utilization: this role's ``--gpu-memory-utilization``.
        :default: - the endpoint's shared value
    :param max_num_seqs: this role's ``--max-num-seqs``. :default: - the operator's default
        (16 on the prefiller, 32 on the decoder)
    :param args: further vLLM flags for this role only, appended after the shared ones.
    :param node_selector: extra node labels this role's pods must land on.
    :param env: refused: the operator has no per-role environment; kept so that a spec ported from
        per-process LMCache configs gets a precise error instead of an unknown key.
    """

    replicas: int = 1
    resources: Resources = field(default_factory=Resources)
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    args: tuple[str, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    autoscaling: AutoscalingSpec | None = None
    env: Mapping[str, str] = field(default_factory=dict, metadata={
        REFUSED: "the operator has no per-role environment variables; use the endpoint's env"})
