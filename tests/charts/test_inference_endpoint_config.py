"""The InferenceEndpointConfig chart: CRD-valid, Kubernetes-valid, faithful to the published example."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from support import slo_autoscaled
from syrupy.assertion import SnapshotAssertion

from hyperpod_dpd import (
    AutoscalingSpec,
    ByteSize,
    CloudWatchTrigger,
    DataCaptureSpec,
    DpdSpec,
    FsxSource,
    HuggingFaceSource,
    InstanceType,
    KvCacheSpec,
    MetricsSpec,
    ModelSpec,
    PrometheusTrigger,
    Resources,
    RoleSpec,
    RoutingSpec,
    RoutingStrategy,
    S3Source,
    SpecError,
    TlsSpec,
    TopologySpec,
    VolumeSource,
)
from hyperpod_dpd.charts import render_inference_endpoint_config
from hyperpod_dpd.charts.render import synth_documents
from hyperpod_dpd.scaling.shape import pin_capacities

Validate = Callable[[dict[str, Any]], list[str]]


@pytest.fixture(scope="module")
def default_documents() -> dict[str, str]:
    from hyperpod_dpd.spec.defaults import default_spec

    documents, _ = synth_documents([default_spec()])
    return documents


def test_default_manifests_snapshot(default_documents: dict[str, str], snapshot: SnapshotAssertion) -> None:
    assert default_documents == snapshot


def test_slo_autoscaled_manifest_snapshot(snapshot: SnapshotAssertion, crd_errors: Validate) -> None:
    """An SLO and SLO autoscaling on both roles, capacities pinned as synth pins the advisor's."""
    spec = pin_capacities(slo_autoscaled(decode_max=2), {"prefill": 11608.6, "decode": 2328.5})
    document = render_inference_endpoint_config(spec, region="us-west-2")
    assert crd_errors(document) == []
    assert set(document["spec"]["pdSpec"]["autoScalingSpec"]) == {"prefillAutoScaling", "decodingAutoScaling"}
    assert document == snapshot


def test_synth_is_byte_identical_across_runs(default_documents: dict[str, str]) -> None:
    from hyperpod_dpd.spec.defaults import default_spec

    again, _ = synth_documents([default_spec()])
    assert again == default_documents


def test_default_manifest_is_crd_valid(default_documents: dict[str, str], crd_errors: Validate) -> None:
    (text,) = default_documents.values()
    (document,) = yaml.safe_load_all(text)
    assert document["kind"] == "InferenceEndpointConfig"
    assert crd_errors(document) == []


def _field_differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in sorted(set(expected) | set(actual)):
            if key not in actual:
                found.append(f"{path}.{key}: missing")
            elif key not in expected:
                found.append(f"{path}.{key}: unexpected {actual[key]!r}")
            else:
                found += _field_differences(expected[key], actual[key], f"{path}.{key}")
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(actual)} items instead of {len(expected)}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for d in _field_differences(e, a, f"{path}[{i}]")]
    # The docs quote numbers as strings in some places and not others; the CRD takes both for quantities.
    return [] if str(expected) == str(actual) else [f"{path}: {actual!r} instead of {expected!r}"]


def test_spec_matching_the_published_example_renders_it_field_by_field(
        published_example: dict[str, Any], crd_errors: Validate) -> None:
    spec = DpdSpec(
        name="dpd-test", endpoint_name="dpd-test",
        model=ModelSpec(name="Llama-3.3-70B-Instruct",
                        source=S3Source(bucket="my-model-bucket", prefix="Llama-3.3-70B-Instruct", region="us-west-2")),
    )
    rendered = render_inference_endpoint_config(spec)
    assert crd_errors(published_example) == []
    # Intended differences: a SageMaker model name without dots (SageMaker refuses them when the endpoint
    # is registered); vLLM's metrics port instead of the CRD default 8080, where nothing listens;
    # PROMETHEUS_MULTIPROC_DIR, without which vLLM 0.19 never serves LMCache's metrics; LMCache's chunk and CPU
    # cache sizes, so that LMCache uses the numbers the planner and the memory check use; and a worker CPU
    # request that fits a node with one thread per core (96 CPUs less the kubelet's and DaemonSets' share).
    assert _field_differences(published_example, rendered) == [
        ".spec.metrics.modelMetrics: unexpected {'port': 8000}",
        ".spec.modelName: 'Llama-3-3-70B-Instruct' instead of 'Llama-3.3-70B-Instruct'",
        ".spec.worker.environmentVariables: 7 items instead of 4",
        ".spec.worker.resources.limits.cpu: '88' instead of '96'",
        ".spec.worker.resources.requests.cpu: '88' instead of '96'",
    ]


def test_the_field_comparison_catches_a_difference(published_example: dict[str, Any]) -> None:
    changed = yaml.safe_load(yaml.safe_dump(published_example))
    changed["spec"]["pdSpec"]["routingThreshold"] = 2048
    assert _field_differences(published_example, changed) == [".spec.pdSpec.routingThreshold: 2048 instead of 4096"]


def _full_spec() -> DpdSpec:
    """A spec that sets every optional part of the resource, to validate all of it."""
    trigger = CloudWatchTrigger(name="requests", namespace="AWS/SageMaker", metric_name="Invocations",
                                target_value=10, dimensions={"EndpointName": "full"})
    prom = PrometheusTrigger(name="queue", server_address="https://aps-workspaces.us-west-2.amazonaws.com/workspaces/"
                             "ws-1234abcd", query="sum(vllm:num_requests_waiting)", target_value=4)
    return DpdSpec(
        name="full", namespace="inference", endpoint_name="full-endpoint",
        model=ModelSpec(name="Llama-3.1-8B-Instruct", architecture="llama-3.1-8b",
                        source=S3Source(bucket="models", prefix="llama/8b", region="us-east-1")),
        instance_type=InstanceType.P5EN_48XLARGE, tensor_parallel_size=4,
        args=("--enable-chunked-prefill",),
        prefill=RoleSpec(replicas=2, resources=Resources(gpus=4, cpu="48", memory="512Gi", efa=8),
                         max_num_seqs=16, args=("--enforce-eager",),
                         autoscaling=AutoscalingSpec(max_replicas=4, triggers=(trigger, prom))),
        decode=RoleSpec(gpu_memory_utilization=0.7, resources=Resources(gpus=4, efa=8),
                        node_selector={"sagemaker.amazonaws.com/instance-group-name": "full-decode"}),
        routing=RoutingSpec(threshold=2048, strategy=RoutingStrategy.ROUND_ROBIN),
        kv_cache=KvCacheSpec(pd_buffer_size=ByteSize.gibibytes(16), l1_cache=False),
        metrics=MetricsSpec(scrape_interval_seconds=30, model_metrics_port=8000, model_metrics_path="/metrics"),
        tls=TlsSpec(certificate_output_s3_uri="s3://certs/full",
                    acm_certificate_arn="arn:aws:acm:us-east-1:123456789012:certificate/abcd-1234",
                    domain_name="llm.example.com", hosted_zone_id="Z0123456789ABCDEFGHIJ"),
        data_capture=DataCaptureSpec(s3_uri="s3://audit-logs/dpd"),
        topology=TopologySpec(availability_zone="us-east-1a", placement_group="dpd-pg"),
        tags={"team": "ml-platform"},
    )


SOURCES = [
    FsxSource(file_system_id="fs-0123456789abcdef0", path="llama", dns_name="fs.example", mount_name="abcd"),
    HuggingFaceSource(model_id="meta-llama/Llama-3.1-8B-Instruct", revision="0" * 40, token_secret="hf-token/token"),
    VolumeSource(claim_name="llama-weights", path="llama"),
]


@pytest.mark.parametrize("source", [None, *SOURCES], ids=["full-s3", "fsx", "huggingface", "volume"])
def test_every_optional_part_renders_crd_valid(source: Any, crd_errors: Validate,
                                               kubernetes_errors: Callable[[str, Any], list[str]]) -> None:
    spec = _full_spec()
    if source is not None:
        spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=source))
    document = render_inference_endpoint_config(spec)
    assert crd_errors(document) == []
    body = document["spec"]
    core = "io.k8s.api.core.v1."
    assert kubernetes_errors("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", document["metadata"]) == []
    for role in ("prefillSpec", "decodingSpec"):
        assert kubernetes_errors(core + "ResourceRequirements", body["pdSpec"][role]["resources"]) == []
    assert kubernetes_errors(core + "ResourceRequirements", body["worker"]["resources"]) == []
    for variable in body["worker"]["environmentVariables"]:
        assert kubernetes_errors(core + "EnvVar", variable) == []
    for volume in body.get("kubernetes", {}).get("volumes", []):
        assert kubernetes_errors(core + "Volume", volume) == []


def test_kubernetes_schema_check_can_fail(kubernetes_errors: Callable[[str, Any], list[str]]) -> None:
    assert kubernetes_errors("io.k8s.api.core.v1.EnvVar", {"name": "A", "value": 1}) != []


def test_full_spec_translation() -> None:
    body = render_inference_endpoint_config(_full_spec())["spec"]
    pd = body["pdSpec"]
    assert pd["prefillSpec"]["args"] == ["--max-num-seqs", "16", "--enforce-eager"]
    assert pd["decodingSpec"]["args"] == ["--gpu-memory-utilization", "0.7"]
    assert pd["prefillSpec"]["resources"]["limits"] == {"cpu": "48", "memory": "512Gi", "nvidia.com/gpu": "4",
                                                        "vpc.amazonaws.com/efa": "8"}
    assert pd["decodingSpec"]["nodeSelector"] == {"sagemaker.amazonaws.com/instance-group-name": "full-decode"}
    assert pd["topologySpec"] == {"sameAZ": True, "availabilityZone": "us-east-1a", "placementGroup": "dpd-pg"}
    scaling = pd["autoScalingSpec"]["prefillAutoScaling"]
    assert scaling["maxReplicaCount"] == 4
    assert scaling["cloudWatchTriggerList"][0]["dimensions"] == [{"name": "EndpointName", "value": "full"}]
    assert scaling["prometheusTriggerList"][0]["query"] == "sum(vllm:num_requests_waiting)"
    assert "decodingAutoScaling" not in pd["autoScalingSpec"]
    assert body["intelligentRoutingSpec"] == {"enabled": True, "routingStrategy": "roundrobin"}
    assert body["kvCacheSpec"] == {"enableL1Cache": False}
    assert body["tags"] == [{"name": "team", "value": "ml-platform"}]
    assert body["dnsConfig"] == {"hostedZoneId": "Z0123456789ABCDEFGHIJ"}
    assert body["dataCapture"] == {"s3Uri": "s3://audit-logs/dpd", "loadBalancer": {"enabled": True}}
    assert body["worker"]["args"][-1] == "--enable-chunked-prefill"
    env = {e["name"]: e["value"] for e in body["worker"]["environmentVariables"]}
    assert env["PD_BUFFER_SIZE"] == str(16 * 2**30)


def test_role_args_carry_only_what_differs_from_the_shared_args(spec: DpdSpec) -> None:
    spec = dataclasses.replace(
        spec, args=("--enable-prefix-caching", "--block-size", "16", "--max-num-batched-tokens", "8192"),
        prefill=RoleSpec(gpu_memory_utilization=0.75, args=("--block-size", "16", "--enforce-eager")),
        decode=RoleSpec(args=("--max-num-batched-tokens=2048",)))
    pd = render_inference_endpoint_config(spec)["spec"]["pdSpec"]
    assert pd["prefillSpec"]["args"] == ["--enforce-eager"]
    assert pd["decodingSpec"]["args"] == ["--max-num-batched-tokens=2048"]


def test_abbreviated_and_underscored_flags_render_in_full(spec: DpdSpec) -> None:
    """The operator merges per-role args over the shared ones by flag name, so it must see full names."""
    spec = dataclasses.replace(
        spec, args=("--enable-prefix-cach", "--max_num_batched_tokens", "8192", "-O3", "-cc.mode", "3"),
        prefill=RoleSpec(args=("--max-num-batched=4096", "--no-enforce")),
        decode=RoleSpec(args=("--max-num-batched-tokens", "8192")))
    body = render_inference_endpoint_config(spec)["spec"]
    assert body["worker"]["args"][-7:] == ["--enable-prefix-caching", "--max-num-batched-tokens", "8192",
                                           "--optimization-level", "3", "--compilation-config.mode", "3"]
    assert body["pdSpec"]["prefillSpec"]["args"] == ["--max-num-batched-tokens=4096", "--no-enforce-eager"]
    assert "args" not in body["pdSpec"]["decodingSpec"]  # the same value as the shared args after expansion


def test_model_metrics_port_defaults_to_the_vllm_port(spec: DpdSpec) -> None:
    metrics = render_inference_endpoint_config(dataclasses.replace(spec, port=9000))["spec"]["metrics"]
    assert metrics == {"enabled": True, "modelMetrics": {"port": 9000}}
    off = render_inference_endpoint_config(dataclasses.replace(spec, metrics=MetricsSpec(enabled=False)))
    assert off["spec"]["metrics"] == {"enabled": False}


def test_model_name_is_a_sagemaker_name_only_when_an_endpoint_is_registered(spec: DpdSpec) -> None:
    model = dataclasses.replace(spec.model, name="Qwen2.5_72B..Instruct.")
    alb_only = dataclasses.replace(spec, model=model, endpoint_name=None)
    assert render_inference_endpoint_config(alb_only)["spec"]["modelName"] == "Qwen2.5_72B..Instruct."
    registered = dataclasses.replace(alb_only, endpoint_name="qwen")
    assert render_inference_endpoint_config(registered)["spec"]["modelName"] == "Qwen2-5-72B-Instruct"


def test_invocation_path_and_hash_seed_render_normalised(spec: DpdSpec) -> None:
    changed = dataclasses.replace(spec, invocation_path="/v1/completions", kv_cache=KvCacheSpec(hash_seed="42"))
    body = render_inference_endpoint_config(changed)["spec"]
    assert body["invocationEndpoint"] == "v1/completions"
    assert {"name": "PYTHONHASHSEED", "value": "42"} in body["worker"]["environmentVariables"]


def test_worker_resources_are_emitted_even_though_dpd_pods_ignore_them(spec: DpdSpec) -> None:
    big = dataclasses.replace(spec, instance_type=InstanceType.P6_B300_48XLARGE)
    resources = render_inference_endpoint_config(big)["spec"]["worker"]["resources"]
    # 96 cores (one thread per core) minus the headroom
    assert resources["requests"] == {"cpu": "88", "memory": "2048Gi", "nvidia.com/gpu": "8"}
    custom = dataclasses.replace(spec, worker_resources=Resources(gpus=8, cpu="64", memory="512Gi"))
    assert render_inference_endpoint_config(custom)["spec"]["worker"]["resources"]["limits"]["cpu"] == "64"


def test_shared_environment_is_what_both_roles_need(spec: DpdSpec) -> None:
    spec = dataclasses.replace(spec, env={"HF_HOME": "/tmp/hf", "VLLM_LOGGING_LEVEL": "DEBUG"},
                               kv_cache=KvCacheSpec(save_decode_cache=True))
    env = render_inference_endpoint_config(spec)["spec"]["worker"]["environmentVariables"]
    assert env == [
        {"name": "HF_HOME", "value": "/tmp/hf"},
        {"name": "VLLM_LOGGING_LEVEL", "value": "DEBUG"},
        {"name": "PD_BUFFER_SIZE", "value": "8589934592"},
        {"name": "LMCACHE_SAVE_DECODE_CACHE", "value": "True"},
        {"name": "PYTHONHASHSEED", "value": "0"},
        {"name": "LMCACHE_CHUNK_SIZE", "value": "256"},
        {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "value": "5.0"},
        {"name": "PROMETHEUS_MULTIPROC_DIR", "value": "/tmp"},
    ]
    quiet = dataclasses.replace(spec, metrics=MetricsSpec(enabled=False))
    names = [e["name"] for e in render_inference_endpoint_config(quiet)["spec"]["worker"]["environmentVariables"]]
    assert "PROMETHEUS_MULTIPROC_DIR" not in names, "audit O1: only an observed endpoint needs LMCache's registry"


def test_lmcache_gets_the_chunk_and_cpu_cache_sizes_the_planner_uses(spec: DpdSpec) -> None:
    """LMCache 0.4.3 reads LMCACHE_CHUNK_SIZE and LMCACHE_MAX_LOCAL_CPU_SIZE (float GiB) over any config file."""
    sized = dataclasses.replace(spec, kv_cache=KvCacheSpec(chunk_tokens=512, cpu_cache_size=ByteSize.parse("1536Mi")))
    env = {e["name"]: e["value"] for e in render_inference_endpoint_config(sized)["spec"]["worker"]
           ["environmentVariables"]}
    assert (env["LMCACHE_CHUNK_SIZE"], env["LMCACHE_MAX_LOCAL_CPU_SIZE"]) == ("512", "1.5")
    assert int(float(env["LMCACHE_MAX_LOCAL_CPU_SIZE"]) * 1024**3) == 1536 * 2**20  # LMCache's own conversion
    off = dataclasses.replace(spec, kv_cache=KvCacheSpec(l1_cache=False, cpu_cache_size=ByteSize.parse("8Gi")))
    names = [e["name"] for e in render_inference_endpoint_config(off)["spec"]["worker"]["environmentVariables"]]
    assert "LMCACHE_CHUNK_SIZE" in names and "LMCACHE_MAX_LOCAL_CPU_SIZE" not in names  # never re-enables it


def test_s3_region_comes_from_the_caller_when_the_spec_has_none(spec: DpdSpec) -> None:
    source = S3Source(bucket="models", prefix="llama")
    spec = dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=source))
    rendered = render_inference_endpoint_config(spec, region="eu-west-1")
    assert rendered["spec"]["modelSourceConfig"]["s3Storage"] == {"bucketName": "models", "region": "eu-west-1"}
    with pytest.raises(SpecError, match=r"model\.source\.s3\.region: is required.*Fix: set model\.source\.s3"
                                        r"\.region.*--region"):
        render_inference_endpoint_config(spec)


def test_chart_refuses_an_invalid_spec_before_writing_anything(spec: DpdSpec) -> None:
    import cdk8s

    from hyperpod_dpd.charts import InferenceEndpointConfigChart

    app = cdk8s.App()
    bad = dataclasses.replace(spec, decode=RoleSpec(replicas=0))
    with pytest.raises(SpecError, match=r"decode\.replicas: must be at least 1"):
        InferenceEndpointConfigChart(app, "bad", spec=bad)
    assert app.charts == []


def test_chart_labels_and_metadata(spec: DpdSpec) -> None:
    import cdk8s

    from hyperpod_dpd.charts import InferenceEndpointConfigChart

    chart = InferenceEndpointConfigChart(cdk8s.App(), "c", spec=spec, labels={"team": "ml"})
    (document,) = chart.to_json()
    assert document["metadata"] == {
        "name": "dpd-test", "namespace": "default",
        "labels": {"app.kubernetes.io/name": "dpd-test", "app.kubernetes.io/managed-by": "hyperpod-dpd", "team": "ml"},
    }
