"""The DPD endpoint spec: the single source of truth that charts and constructs translate."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from hyperpod_dpd.spec._frozen import Frozen
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.kv_cache import KvCacheSpec
from hyperpod_dpd.spec.model import ModelSpec
from hyperpod_dpd.spec.observability import AlertThresholds, SloSpec
from hyperpod_dpd.spec.roles import Resources, RoleSpec
from hyperpod_dpd.spec.routing import RoutingSpec

# The two worker images the operator documents for DPD; both bundle LMCache 0.4.3 and vLLM 0.19.0. NIXL: the
# DLC image's recipe installs nixl>=1.0.1 (aws/deep-learning-containers PR 6025); the exact version is unverified.
DLC_IMAGE = "public.ecr.aws/deep-learning-containers/vllm:server-hyperpod-cuda-v1.1"
LMCACHE_IMAGE = "lmcache/vllm-openai:v0.4.3"
KNOWN_IMAGES = (DLC_IMAGE, LMCACHE_IMAGE)

DEFAULT_ENV = {"HF_HOME": "/tmp/hf_home"}


@dataclass(frozen=True, kw_only=True)
class RoleUsage:
    """One role's pods, the GPUs each requests, and the whole nodes they occupy."""

    role: str
    pods: int
    gpus_per_pod: int
    nodes: int

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    def pods_per_node(self, gpus_per_node: int) -> int:
        """The most of its pods one node can hold: as many as its GPUs fit, never more than the role has.

        A role's pods share its own instance group, so with TP below the node's GPUs several land on one node.
        """
        if not 1 <= self.gpus_per_pod <= gpus_per_node:
            return 1  # refused by the GPU rules already
        return max(1, min(self.pods, gpus_per_node // self.gpus_per_pod))


@dataclass(frozen=True, kw_only=True)
class NodeUsage:
    """The endpoint's nodes and GPUs: each role gets whole nodes of its own instance group."""

    instance_type: InstanceType
    roles: tuple[RoleUsage, ...]

    @property
    def nodes(self) -> int:
        return sum(r.nodes for r in self.roles)

    @property
    def gpus_used(self) -> int:
        return sum(r.gpus for r in self.roles)

    @property
    def gpus_provisioned(self) -> int:
        return self.nodes * self.instance_type.facts.gpus

    def summary(self) -> str:
        """``uses 3 of 16 GPUs on 2 ml.p5.48xlarge nodes``."""
        noun = "node" if self.nodes == 1 else "nodes"
        return (f"uses {self.gpus_used} of {self.gpus_provisioned} GPUs on {self.nodes} "
                f"{self.instance_type.api_name} {noun}")

    def breakdown(self) -> str:
        """``prefill 2 x 1 GPU on 1 node, decode 1 x 1 GPU on 1 node``."""
        return ", ".join(f"{r.role} {r.pods} x {r.gpus_per_pod} GPU{'s' if r.gpus_per_pod != 1 else ''} on "
                         f"{r.nodes} node{'s' if r.nodes != 1 else ''}" for r in self.roles)


@dataclass(frozen=True, kw_only=True)
class MetricsSpec(Frozen):
    """Observability.

    :param scrape_interval_seconds: :default: - the operator's default (15)
    :param model_metrics_port: where vLLM's ``/metrics`` is scraped. :default: - the endpoint's ``port``,
        where vLLM serves ``/metrics`` (the CRD's own default, 8080, has nothing behind it)
    :param amp_workspace_url: the Amazon Managed Prometheus workspace the metrics reach
        (``https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id>``), which SLO autoscaling's
        triggers query. :default: - none (SLO autoscaling then refuses the spec)
    """

    enabled: bool = True
    scrape_interval_seconds: int | None = None
    model_metrics_port: int | None = None
    model_metrics_path: str | None = None
    amp_workspace_url: str | None = None


@dataclass(frozen=True, kw_only=True)
class TlsSpec(Frozen):
    """TLS for the endpoint: where the operator writes its certificate, or your own ACM certificate.

    :param hosted_zone_id: a Route 53 hosted zone (``Z...``) where the operator writes ``domain_name``'s
        record for the ALB (the CRD's ``dnsConfig``); needs the ACM certificate. :default: - no record
    """

    certificate_output_s3_uri: str | None = None
    acm_certificate_arn: str | None = None
    domain_name: str | None = None
    hosted_zone_id: str | None = None


@dataclass(frozen=True, kw_only=True)
class DataCaptureSpec(Frozen):
    """The CRD's ``dataCapture``, its load balancer tier: the ALB's access logs (client address, time,
    path, status of every request), an audit trail of who called the model directly.

    The request/response payload tiers (``sagemakerEndpoint``, ``modelPod``) hold prompts and answers and
    are not exposed here.

    :param s3_uri: where the operator writes captures. :default: - the operator's default, the TLS bucket
        (the stack grants the log delivery and the operator's role ``data-capture/*`` there)
    """

    s3_uri: str | None = None
    load_balancer: bool = True


@dataclass(frozen=True, kw_only=True)
class TopologySpec(Frozen):
    """Where prefill and decode pods land relative to each other.

    :param same_az: keep both roles in one Availability Zone, which EFA needs. :default: True
    :param availability_zone: pin both roles to this zone. :default: - any zone
    :param placement_group: a cluster placement group for the lowest latency. :default: - none
    """

    same_az: bool = True
    availability_zone: str | None = None
    placement_group: str | None = None


@dataclass(frozen=True, kw_only=True)
class DpdSpec(Frozen):
    """One disaggregated prefill/decode endpoint.

    :param name: ``metadata.name``; the operator derives pod, router and service names from it.
    :param namespace: :default: "default"
    :param endpoint_name: the SageMaker endpoint to register, the only front door that authenticates
        its callers (IAM SigV4). :default: - none (the VPC-internal ALB and the router only; a warning)
    :param instance_type: :default: InstanceType.P5_48XLARGE
    :param image: a worker image with vLLM, LMCache, NIXL and the EFA libfabric provider.
        :default: the SageMaker DLC image
    :param tensor_parallel_size: :default: 8
    :param max_model_len: :default: 16384
    :param gpu_memory_utilization: shared ``--gpu-memory-utilization``. :default: 0.75
    :param port: the port vLLM listens on. :default: 8000
    :param args: further vLLM flags for both roles.
    :param env: further environment variables for both roles. :default: ``HF_HOME=/tmp/hf_home``
    :param worker_resources: ``worker.resources``, which the CRD requires but DPD pods ignore.
        :default: - the tensor parallel size in GPUs, and half the node's CPU and memory
    :param invocation_path: path after ``http://host:port/`` (a leading ``/`` is dropped); one of the
        text-generation routes vLLM 0.19.0 serves. :default: "v1/chat/completions"
    :param health_check_path: :default: "/health"
    :param tls: :default: - the operator's self-signed certificate on the ALB (a warning)
    :param data_capture: the ALB's access logs. :default: - none
    :param slo: latency targets that add TTFT/TPOT alerts. :default: - none
    :param alerts: alert threshold overrides. :default: - the documented defaults (``AlertThresholds()``)
    """

    name: str
    model: ModelSpec
    namespace: str = "default"
    endpoint_name: str | None = None
    instance_type: InstanceType = InstanceType.P5_48XLARGE
    image: str = DLC_IMAGE
    tensor_parallel_size: int = 8
    max_model_len: int = 16384
    gpu_memory_utilization: float = 0.75
    port: int = 8000
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_ENV))
    prefill: RoleSpec = field(default_factory=RoleSpec)
    decode: RoleSpec = field(default_factory=RoleSpec)
    routing: RoutingSpec = field(default_factory=RoutingSpec)
    kv_cache: KvCacheSpec = field(default_factory=KvCacheSpec)
    invocation_path: str = "v1/chat/completions"
    health_check_path: str = "/health"
    metrics: MetricsSpec = field(default_factory=MetricsSpec)
    tls: TlsSpec | None = None
    data_capture: DataCaptureSpec | None = None
    topology: TopologySpec = field(default_factory=TopologySpec)
    worker_resources: Resources | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    slo: SloSpec | None = None
    alerts: AlertThresholds | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        # "/v1/completions" and "v1/completions" are the same route; keep one spelling everywhere.
        if isinstance(self.invocation_path, str) and self.invocation_path.startswith("/"):
            object.__setattr__(self, "invocation_path", self.invocation_path.lstrip("/"))

    def roles(self) -> tuple[tuple[str, RoleSpec], tuple[str, RoleSpec]]:
        """``(("prefill", spec), ("decode", spec))``, in the order the operator documents them."""
        return (("prefill", self.prefill), ("decode", self.decode))

    def role_gpus(self, role: RoleSpec) -> int:
        return role.resources.gpus if role.resources.gpus is not None else self.tensor_parallel_size

    def role_nodes(self, role: RoleSpec, *, at_scale_limit: bool = True) -> int:
        """Whole nodes of ``instance_type`` one role needs: its pods times its GPUs per pod.

        With ``at_scale_limit`` an autoscaled role counts its ``max_replicas``: KEDA adds pods, not
        HyperPod nodes, so the nodes for the maximum must exist up front. The CDK instance groups and
        the preflight quota check both use this count.
        """
        return math.ceil(self._pods(role, at_scale_limit=at_scale_limit) * self.role_gpus(role)
                         / self.instance_type.facts.gpus)

    def _pods(self, role: RoleSpec, *, at_scale_limit: bool) -> int:
        """The role's pods: its replicas, or at the scale limit its ``max_replicas`` within an SLO node budget."""
        pods = role.replicas
        scaling = role.autoscaling
        if at_scale_limit and scaling is not None:
            ceiling = scaling.max_replicas
            budget = scaling.slo.max_nodes if scaling.slo is not None else None
            if isinstance(budget, int) and budget >= 0 and 1 <= self.role_gpus(role) <= self.instance_type.facts.gpus:
                ceiling = min(ceiling, budget * (self.instance_type.facts.gpus // self.role_gpus(role)))
            pods = max(pods, ceiling)
        return pods

    def node_usage(self, *, at_scale_limit: bool = True) -> NodeUsage:
        """Pods, GPUs and whole nodes per role, and how many of the nodes' GPUs the pods use.

        The one count of the endpoint's hardware: the stack's instance groups, ``preflight``, ``plan``
        and the idle-GPU warning all read it (through :meth:`role_nodes`).
        """
        roles = []
        for name, role in self.roles():
            pods = self._pods(role, at_scale_limit=at_scale_limit)
            roles.append(RoleUsage(role=name, pods=pods, gpus_per_pod=self.role_gpus(role),
                                   nodes=self.role_nodes(role, at_scale_limit=at_scale_limit)))
        return NodeUsage(instance_type=self.instance_type, roles=tuple(roles))

    def role_gpu_memory_utilization(self, role: RoleSpec) -> float:
        value = role.gpu_memory_utilization
        return value if value is not None else self.gpu_memory_utilization
