"""The GPU each instance type's pods see, as vLLM asks for it: its name, compute capability and memory.

vLLM picks attention backends by compute capability and its ``max_num_seqs``/``max_num_batched_tokens``
defaults by the device name and memory, so the oracle fakes each of them. Names are what
``torch.cuda.get_device_name`` reports on the instance type (``nvidia-smi --query-gpu=name``); capabilities
from NVIDIA's CUDA GPU table (Hopper 9.0, Blackwell B200 10.0, B300 10.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.spec.instances import InstanceType

# gpu_model (spec/instances.py) -> (device name, compute capability)
GPU_IDENTITY: dict[str, tuple[str, tuple[int, int]]] = {
    "H100": ("NVIDIA H100 80GB HBM3", (9, 0)),
    "H200": ("NVIDIA H200", (9, 0)),
    "B200": ("NVIDIA B200", (10, 0)),
    "B300": ("NVIDIA B300 SXM6 AC", (10, 3)),
}


@dataclass(frozen=True, kw_only=True)
class FakeGpu:
    """One GPU model as the oracle fakes it; ``count`` is how many a pod sees (the GPUs it requests)."""

    name: str
    capability: tuple[int, int]
    memory_gib: float
    count: int

    @property
    def model_key(self) -> tuple[str, tuple[int, int], float]:
        """What one engine process is started with (the count is set per check)."""
        return (self.name, self.capability, self.memory_gib)


def fake_gpu(instance_type: InstanceType, *, count: int | None = None) -> FakeGpu:
    """The GPU of ``instance_type``, ``count`` of them (default: the node's)."""
    facts = instance_type.facts
    name, capability = GPU_IDENTITY[facts.gpu_model]
    return FakeGpu(name=name, capability=capability, memory_gib=facts.gpu_memory_mib / 1024,
                   count=facts.gpus if count is None else count)
