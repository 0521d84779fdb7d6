"""The operator's ``InferenceEndpointConfig`` with ``pdSpec``, rendered from a :class:`DpdSpec`.

The translation is a pure function (:func:`render_inference_endpoint_config`) so it can be tested
and diffed without jsii; :class:`InferenceEndpointConfigChart` wraps it for cdk8s and for
``Cluster.add_cdk8s_chart``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import cdk8s
from constructs import Construct

from hyperpod_dpd.contracts.crd import check_manifest
from hyperpod_dpd.contracts.operator import IEC_API_VERSION, IEC_KIND
from hyperpod_dpd.contracts.vllm import canonical_args, flag_values, parse_flags
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.observability.metrics import METRICS_DIR, METRICS_DIR_ENV
from hyperpod_dpd.scaling import CompiledTrigger, compile_role
from hyperpod_dpd.spec import (
    AutoscalingSpec,
    CloudWatchTrigger,
    DataCaptureSpec,
    DpdSpec,
    FsxSource,
    HuggingFaceSource,
    PrometheusTrigger,
    Resources,
    RoleSpec,
    S3Source,
    TopologySpec,
    VolumeSource,
)
from hyperpod_dpd.validation import CheckedSpec, check

API_VERSION = IEC_API_VERSION
KIND = IEC_KIND
MODEL_VOLUME = "model-weights"
GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
ROLE_KEYS = {"prefill": "prefillSpec", "decode": "decodingSpec"}
# What SageMaker's CreateModel refuses in a ModelName: anything but letters, digits and '-'.
_NOT_SAGEMAKER = re.compile(r"[^a-zA-Z0-9-]+")


def render_inference_endpoint_config(spec: DpdSpec | CheckedSpec, *, region: str | None = None) -> dict[str, Any]:
    """The ``InferenceEndpointConfig`` for ``spec``, after checking it (raises :class:`SpecError`).

    The result is validated against the operator's CRD (:mod:`hyperpod_dpd.contracts.crd`) before it is returned.

    :param region: the S3 bucket's region when the spec leaves it out (a CDK stack passes its own).
    """
    checked = spec if isinstance(spec, CheckedSpec) else check(spec)
    s = checked.spec
    body: dict[str, Any] = {}
    if s.endpoint_name is not None:
        body["endpointName"] = s.endpoint_name
    body["instanceType"] = s.instance_type.api_name
    body["invocationEndpoint"] = s.invocation_path.lstrip("/")
    body["modelName"] = model_name(s)
    body["modelSourceConfig"] = _model_source(s, region)
    body["loadBalancer"] = {"healthCheckPath": s.health_check_path}
    body["metrics"] = _metrics(s)
    body["kvCacheSpec"] = {"enableL1Cache": s.kv_cache.l1_cache}
    body["intelligentRoutingSpec"] = {"enabled": True, "routingStrategy": s.routing.strategy.value}
    body["pdSpec"] = _pd_spec(s)
    body["worker"] = _worker(s)
    if isinstance(s.model.source, VolumeSource):
        body["kubernetes"] = {"volumes": [{"name": MODEL_VOLUME,
                                           "persistentVolumeClaim": {"claimName": s.model.source.claim_name}}]}
    if s.tls is not None:
        body["tlsConfig"] = _tls(s)
        if s.tls.hosted_zone_id is not None:
            body["dnsConfig"] = {"hostedZoneId": s.tls.hosted_zone_id}
    if s.data_capture is not None:
        body["dataCapture"] = _data_capture(s.data_capture)
    if s.tags:
        body["tags"] = [{"name": k, "value": v} for k, v in s.tags.items()]
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": s.name, "namespace": s.namespace},
        "spec": body,
    }
    check_manifest(manifest)
    return manifest


def model_name(s: DpdSpec) -> str:
    """``spec.modelName``: ``model.name`` as written, or, when a SageMaker endpoint is registered, made a
    valid SageMaker model name (runs of other characters become '-': ``Llama-3.3-70B`` -> ``Llama-3-3-70B``),
    because the operator creates a SageMaker model of that name and SageMaker allows only letters, digits
    and hyphens. ``model.name`` itself stays as written: it also selects the architecture preset."""
    if s.endpoint_name is None:
        return s.model.name
    return _NOT_SAGEMAKER.sub("-", s.model.name).strip("-")[:63].rstrip("-")


def _model_source(s: DpdSpec, region: str | None) -> dict[str, Any]:
    source = s.model.source
    if isinstance(source, S3Source):
        bucket_region = source.region or region
        if bucket_region is None:
            raise SpecError([Problem(field="model.source.s3.region", value=None, message="is required to render "
                                     "manifests outside a CDK stack (the CRD needs the bucket's region)",
                                     fix="set model.source.s3.region, e.g. 'us-west-2', or pass "
                                         "--region")])
        return {"modelSourceType": "s3", "modelLocation": source.prefix,
                "s3Storage": {"bucketName": source.bucket, "region": bucket_region}}
    if isinstance(source, FsxSource):
        fsx: dict[str, Any] = {"fileSystemId": source.file_system_id}
        if source.dns_name is not None:
            fsx["dnsName"] = source.dns_name
        if source.mount_name is not None:
            fsx["mountName"] = source.mount_name
        return {"modelSourceType": "fsx", "modelLocation": source.path, "fsxStorage": fsx}
    if isinstance(source, HuggingFaceSource):
        hf: dict[str, Any] = {"modelId": source.model_id}
        if source.revision is not None:
            hf["commitSHA"] = source.revision
        if source.token_secret is not None:
            name, key = source.token_secret.split("/")
            hf["tokenSecretRef"] = {"name": name, "key": key}
        return {"modelSourceType": "huggingface", "huggingFaceModel": hf}
    volume: dict[str, Any] = {"modelSourceType": "kubernetesVolume"}
    if source.path:
        volume["modelLocation"] = source.path
    return volume


def _metrics(s: DpdSpec) -> dict[str, Any]:
    metrics: dict[str, Any] = {"enabled": s.metrics.enabled}
    if s.metrics.scrape_interval_seconds is not None:
        metrics["metricsScrapeIntervalSeconds"] = s.metrics.scrape_interval_seconds
    if not s.metrics.enabled:
        return metrics
    # vLLM serves /metrics on its API port; the CRD's default (8080) has nothing behind it.
    model_metrics: dict[str, Any] = {"port": s.metrics.model_metrics_port or s.port}
    if s.metrics.model_metrics_path is not None:
        model_metrics["path"] = s.metrics.model_metrics_path
    metrics["modelMetrics"] = model_metrics
    return metrics


def _number(value: float) -> str:
    return f"{value:g}"


def shared_args(s: DpdSpec) -> list[str]:
    """``worker.args``: what both roles run with; per-role args are merged over these by the operator."""
    return [
        "--model", s.model.mount_path,
        "--host", "0.0.0.0",
        "--port", str(s.port),
        "--tensor-parallel-size", str(s.tensor_parallel_size),
        "--max-model-len", str(s.max_model_len),
        "--gpu-memory-utilization", _number(s.gpu_memory_utilization),
        *canonical_args(s.args),
    ]


def role_args(s: DpdSpec, role: RoleSpec) -> list[str]:
    """Only the flags where this role differs from the shared args, each spelled out in full so the
    operator's merge replaces the shared flag of the same name."""
    shared = flag_values(shared_args(s))
    wanted: list[str] = []
    utilisation = role.gpu_memory_utilization
    if utilisation is not None and _number(utilisation) != shared["--gpu-memory-utilization"]:
        wanted += ["--gpu-memory-utilization", _number(utilisation)]
    if role.max_num_seqs is not None:
        wanted += ["--max-num-seqs", str(role.max_num_seqs)]
    flags, _ = parse_flags(role.args)
    for flag in flags:
        if flag.name in shared and shared[flag.name] == flag.value:
            continue
        wanted += flag.canonical_tokens()
    return wanted


def _resources(res: Resources, *, gpus: int) -> dict[str, Any]:
    amounts: dict[str, Any] = {}
    if res.cpu is not None:
        amounts["cpu"] = res.cpu
    if res.memory is not None:
        amounts["memory"] = res.memory
    amounts[GPU] = str(gpus)
    if res.efa is not None:
        amounts[EFA] = str(res.efa)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _role(s: DpdSpec, role: RoleSpec) -> dict[str, Any]:
    body: dict[str, Any] = {"replicas": role.replicas,
                            "resources": _resources(role.resources, gpus=s.role_gpus(role))}
    args = role_args(s, role)
    if args:
        body["args"] = args
    if role.node_selector:
        body["nodeSelector"] = dict(role.node_selector)
    return body


def _pd_spec(s: DpdSpec) -> dict[str, Any]:
    pd: dict[str, Any] = {ROLE_KEYS[name]: _role(s, role) for name, role in s.roles()}
    pd["routingThreshold"] = s.routing.threshold
    if s.topology != TopologySpec():
        topology: dict[str, Any] = {"sameAZ": s.topology.same_az}
        if s.topology.availability_zone is not None:
            topology["availabilityZone"] = s.topology.availability_zone
        if s.topology.placement_group is not None:
            topology["placementGroup"] = s.topology.placement_group
        pd["topologySpec"] = topology
    scaling = {f"{'prefill' if name == 'prefill' else 'decoding'}AutoScaling": _autoscaling(s, name, role.autoscaling)
               for name, role in s.roles() if role.autoscaling is not None}
    if scaling:
        pd["autoScalingSpec"] = scaling
    return pd


def _autoscaling(s: DpdSpec, role: str, scaling: AutoscalingSpec) -> dict[str, Any]:
    """The role's ``autoScalingSpec``: its bounds and triggers as written, or as ``autoscaling.slo`` compiles them
    (the written triggers then follow the compiled ones)."""
    prometheus: list[dict[str, Any]] = []
    if scaling.slo is not None:
        compiled = compile_role(s, role)
        body: dict[str, Any] = {
            "minReplicaCount": compiled.min_replicas,
            "maxReplicaCount": compiled.max_replicas,
            "pollingInterval": compiled.polling_interval_s,
            "cooldownPeriod": compiled.cooldown_s,
            "scaleUpStabilizationTime": compiled.scale_up_stabilisation_s,
            "scaleDownStabilizationTime": compiled.scale_down_stabilisation_s,
        }
        address = s.metrics.amp_workspace_url or ""
        prometheus = [_compiled_trigger(t, address) for t in compiled.triggers]
    else:
        body = {
            "minReplicaCount": scaling.min_replicas,
            "maxReplicaCount": scaling.max_replicas,
            "pollingInterval": scaling.polling_interval_seconds,
            "cooldownPeriod": scaling.cooldown_seconds,
        }
    cloudwatch = [_cloudwatch(t) for t in scaling.triggers if isinstance(t, CloudWatchTrigger)]
    prometheus += [_prometheus(t) for t in scaling.triggers if isinstance(t, PrometheusTrigger)]
    if cloudwatch:
        body["cloudWatchTriggerList"] = cloudwatch
    if prometheus:
        body["prometheusTriggerList"] = prometheus
    return body


def _cloudwatch(t: CloudWatchTrigger) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": t.name, "namespace": t.namespace, "metricName": t.metric_name, "targetValue": t.target_value,
        "metricStat": t.statistic, "metricType": t.metric_type.value, "metricCollectionPeriod": t.period_seconds,
        "minValue": t.min_value,
    }
    if t.dimensions:
        body["dimensions"] = [{"name": k, "value": v} for k, v in t.dimensions.items()]
    return body


def _compiled_trigger(t: CompiledTrigger, server_address: str) -> dict[str, Any]:
    return {"name": t.name, "serverAddress": server_address, "query": t.query, "targetValue": t.target,
            "metricType": t.metric_type.value}


def _prometheus(t: PrometheusTrigger) -> dict[str, Any]:
    return {"name": t.name, "serverAddress": t.server_address, "query": t.query, "targetValue": t.target_value,
            "metricType": t.metric_type.value}


def environment(s: DpdSpec) -> list[dict[str, str]]:
    """``worker.environmentVariables``: identical on prefill and decode, as LMCache requires.

    With metrics on, ``PROMETHEUS_MULTIPROC_DIR`` makes vLLM's API server serve the multiprocess
    registry, where LMCache's worker-side metrics (the KV store timings) land.
    """
    owned = {
        "PD_BUFFER_SIZE": str(s.kv_cache.pd_buffer_size.bytes),
        "LMCACHE_SAVE_DECODE_CACHE": str(s.kv_cache.save_decode_cache),
        "PYTHONHASHSEED": s.kv_cache.hash_seed,
        **lmcache_sizes(s),
    }
    if s.metrics.enabled:
        owned[METRICS_DIR_ENV] = METRICS_DIR
    merged: Mapping[str, str] = {**s.env, **owned}
    return [{"name": k, "value": v} for k, v in merged.items()]


def lmcache_sizes(s: DpdSpec) -> dict[str, str]:
    """The LMCache sizes the planner and the memory check use, as LMCache 0.4.3 reads them from the environment.

    LMCache reads ``LMCACHE_<KEY>`` for every config key (lmcache/v1/config_base.py:349) and lets those
    override a config file (config_base.py:546-547), so these win over whatever file the operator writes:
    ``chunk_size`` (an int, lmcache/v1/config.py:64) and ``max_local_cpu_size`` (float GiB, config.py:70). The
    CPU cache size is left to the operator when ``l1_cache`` is off, so it cannot turn a disabled cache back on.
    """
    sizes = {"LMCACHE_CHUNK_SIZE": str(s.kv_cache.chunk_tokens)}
    if s.kv_cache.l1_cache:
        sizes["LMCACHE_MAX_LOCAL_CPU_SIZE"] = repr(s.kv_cache.cpu_cache_size.gib)
    return sizes


def worker_resources(s: DpdSpec) -> Resources:
    """The spec's ``worker_resources``, or the TP size in GPUs, every CPU a node with one thread per core can
    give a pod (the published example asks for half the vCPUs, which is all of them without SMT and never
    schedules), and half the memory."""
    if s.worker_resources is not None:
        return s.worker_resources
    facts = s.instance_type.facts
    return Resources(gpus=s.tensor_parallel_size, cpu=str(facts.allocatable_cpus()),
                     memory=f"{facts.memory_gib // 2}Gi")


def _worker(s: DpdSpec) -> dict[str, Any]:
    res = worker_resources(s)
    return {
        "image": s.image,
        "args": shared_args(s),
        "modelInvocationPort": {"name": "http", "containerPort": s.port},
        "modelVolumeMount": {"name": MODEL_VOLUME, "mountPath": s.model.mount_path},
        "resources": _resources(res, gpus=res.gpus if res.gpus is not None else s.tensor_parallel_size),
        "environmentVariables": environment(s),
    }


def _tls(s: DpdSpec) -> dict[str, Any]:
    assert s.tls is not None
    body: dict[str, Any] = {}
    if s.tls.certificate_output_s3_uri is not None:
        body["tlsCertificateOutputS3Uri"] = s.tls.certificate_output_s3_uri
    if s.tls.acm_certificate_arn is not None and s.tls.domain_name is not None:
        body["customCertificateConfig"] = {"acmArn": s.tls.acm_certificate_arn, "domainName": s.tls.domain_name}
    return body


def _data_capture(capture: DataCaptureSpec) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if capture.s3_uri is not None:
        body["s3Uri"] = capture.s3_uri
    body["loadBalancer"] = {"enabled": capture.load_balancer}
    return body


class InferenceEndpointConfigChart(cdk8s.Chart):
    """A cdk8s chart holding one DPD ``InferenceEndpointConfig``.

    :param spec: the endpoint; checked here, so a bad spec fails before anything is written.
    :param region: the model bucket's region when the spec leaves it out. :default: - the spec's region
    :param labels: extra labels on the resource. :default: - ``app.kubernetes.io/name`` and
        ``app.kubernetes.io/managed-by``
    """

    def __init__(self, scope: Construct, id: str, *, spec: DpdSpec | CheckedSpec, region: str | None = None,
                 labels: Mapping[str, str] | None = None) -> None:
        checked = spec if isinstance(spec, CheckedSpec) else check(spec)
        super().__init__(scope, id, disable_resource_name_hashes=True)
        self.checked = checked
        manifest = render_inference_endpoint_config(checked, region=region)
        metadata = manifest["metadata"]
        all_labels = {"app.kubernetes.io/name": metadata["name"], "app.kubernetes.io/managed-by": "hyperpod-dpd",
                      **(labels or {})}
        self.resource = cdk8s.ApiObject(
            self, "InferenceEndpointConfig", api_version=API_VERSION, kind=KIND,
            metadata=cdk8s.ApiObjectMetadata(name=metadata["name"], namespace=metadata["namespace"],
                                             labels=all_labels))
        self.resource.add_json_patch(cdk8s.JsonPatch.add("/spec", manifest["spec"]))
