"""The instance types that HyperPod DPD supports, with the hardware facts that sizing needs.

DPD moves the KV cache over EFA with GPU-Direct RDMA read and write and relies on NVLink inside a
node; the operator documents exactly these five types. Figures come from EC2 DescribeInstanceTypes
as republished in Karpenter's generated instance reference (GPU memory in MiB, EFA devices,
network bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hyperpod_dpd.spec.units import ByteSize

# HyperPod GPU instance groups run one thread per core (``ThreadsPerCore: 1``, as AWS's HyperPod templates
# set): a 192-vCPU p5.48xlarge node then shows 96 CPUs to Kubernetes.
THREADS_PER_CORE = 1
# Kept free on every GPU node: EKS's kube-reserved CPU (under 0.4 CPU for 96 cores by the EKS AMI formula)
# plus the DaemonSets' requests (VPC CNI, kube-proxy, device plugins, the S3 and FSx CSI node pods, the
# Pod Identity agent, the observability collectors); eight leaves room for ones added later.
NODE_CPU_HEADROOM = 8


@dataclass(frozen=True, kw_only=True)
class InstanceFacts:
    """What one instance type offers; the spec is checked and sized against it."""

    name: str
    gpu_model: str
    gpus: int
    gpu_memory_mib: int
    vcpus: int
    memory_gib: int
    efa_devices: int
    network_gbps: int
    # Regions where HyperPod offers the type (cfn-lint 1.58's pricing-derived list); None = not listed
    # there although the API accepts it (p5e is reached through training plans).
    regions: frozenset[str] | None

    def allocatable_cpus(self, threads_per_core: int = THREADS_PER_CORE) -> int:
        """CPUs a pod can request on one node: the vCPUs the node shows with ``threads_per_core`` (1 halves
        them: SMT off), minus :data:`NODE_CPU_HEADROOM` for the kubelet's reservation and the DaemonSets."""
        return self.vcpus // 2 * threads_per_core - NODE_CPU_HEADROOM

    @property
    def gpu_memory(self) -> ByteSize:
        return ByteSize(self.gpu_memory_mib * 2**20)

    @property
    def network_bytes_per_second(self) -> float:
        return self.network_gbps * 1e9 / 8


_P5_REGIONS = frozenset({
    "ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3",
    "ca-central-1", "eu-central-1", "eu-north-1", "eu-west-1", "eu-west-2", "sa-east-1", "us-east-1",
    "us-east-2", "us-west-1", "us-west-2",
})
_P5EN_REGIONS = frozenset({
    "ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-southeast-3", "eu-north-1", "eu-south-2",
    "us-east-1", "us-east-2", "us-west-1", "us-west-2",
})
_P6_B200_REGIONS = frozenset({"ap-south-1", "ap-south-2", "us-east-1", "us-east-2", "us-west-2"})
_P6_B300_REGIONS = frozenset({"ap-south-2", "ap-southeast-3", "us-east-1", "us-west-2"})


class InstanceType(Enum):
    """A DPD-capable SageMaker HyperPod instance type. ``InstanceType("ml.p5.48xlarge")`` parses one."""

    P5_48XLARGE = InstanceFacts(
        name="ml.p5.48xlarge", gpu_model="H100", gpus=8, gpu_memory_mib=81_920, vcpus=192,
        memory_gib=2048, efa_devices=32, network_gbps=3200, regions=_P5_REGIONS)
    P5E_48XLARGE = InstanceFacts(
        name="ml.p5e.48xlarge", gpu_model="H200", gpus=8, gpu_memory_mib=144_384, vcpus=192,
        memory_gib=2048, efa_devices=32, network_gbps=3200, regions=None)
    P5EN_48XLARGE = InstanceFacts(
        name="ml.p5en.48xlarge", gpu_model="H200", gpus=8, gpu_memory_mib=144_384, vcpus=192,
        memory_gib=2048, efa_devices=16, network_gbps=3200, regions=_P5EN_REGIONS)
    P6_B200_48XLARGE = InstanceFacts(
        name="ml.p6-b200.48xlarge", gpu_model="B200", gpus=8, gpu_memory_mib=183_359, vcpus=192,
        memory_gib=2048, efa_devices=8, network_gbps=3200, regions=_P6_B200_REGIONS)
    P6_B300_48XLARGE = InstanceFacts(
        name="ml.p6-b300.48xlarge", gpu_model="B300", gpus=8, gpu_memory_mib=275_040, vcpus=192,
        memory_gib=4096, efa_devices=16, network_gbps=6400, regions=_P6_B300_REGIONS)

    @property
    def facts(self) -> InstanceFacts:
        facts: InstanceFacts = self.value
        return facts

    @property
    def api_name(self) -> str:
        return self.facts.name

    @classmethod
    def from_name(cls, name: str) -> InstanceType:
        """The type for ``ml.p5.48xlarge`` (the ``ml.`` prefix may be left out); ``ValueError`` if unsupported."""
        wanted = name if name.startswith("ml.") else f"ml.{name}"
        for member in cls:
            if member.facts.name == wanted:
                return member
        raise ValueError(f"{name!r} is not a DPD instance type; supported: {', '.join(supported_names())}")

    def __str__(self) -> str:
        return self.facts.name


def supported_names() -> list[str]:
    return [member.facts.name for member in InstanceType]
