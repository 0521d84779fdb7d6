"""Every validation rule, with the message a user sees: field, bad value and fix."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from support import default_mapping as _mapping
from support import with_value as _set

from hyperpod_dpd import DpdSpec, RoleSpec, SpecError, check, parse_spec
from hyperpod_dpd.spec.defaults import default_spec


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check(parse_spec(data))
    return [p.render() for p in caught.value.problems]


# (path to change, new value, the field reported, a fragment of the message)
RULES = [
    ("name", "Dpd_Test", "name", "must be a DNS label that starts with a letter"),
    ("name", "9lives", "name", "starts with a letter"),
    ("namespace", "Prod", "namespace", "must be a DNS label"),
    ("name", "a" * 40, "name", "makes the router Service name"),
    ("endpoint_name", "dpd_test", "endpoint_name", "letters, digits and hyphens"),
    ("endpoint_name", "a" + "--b" * 30, "endpoint_name", "1-63 letters"),
    ("model.name", "llama 70b", "model.name", "letters, digits, '.', '_' and '-'"),
    ("tags", {"": "x"}, "tags.", "tag keys must be 1-128 characters"),
    ("model.source", {"s3": {"bucket": "s3://My_Bucket", "prefix": "x"}}, "model.source.s3.bucket",
     "is not a valid S3 bucket name"),
    ("model.source", {"s3": {"bucket": "models", "prefix": "/abs"}}, "model.source.s3.prefix", "without a leading"),
    ("model.source", {"s3": {"bucket": "models", "prefix": "x", "region": "oregon"}}, "model.source.s3.region",
     "is not an AWS region"),
    ("model.source", {"fsx": {"file_system_id": "fsx-1", "path": "m"}}, "model.source.fsx.file_system_id",
     "is not an FSx file system id"),
    ("model.source", {"fsx": {"file_system_id": "fs-0123456789abcdef0", "path": "/llama"}}, "model.source.fsx.path",
     "without a leading '/'"),
    ("model.source", {"fsx": {"file_system_id": "fs-0123456789abcdef0", "path": "/"}}, "model.source.fsx.path",
     "relative to the file system's root"),
    ("model.source", {"huggingface": {"model_id": "llama"}}, "model.source.huggingface.model_id",
     "must be 'owner/name'"),
    ("model.source", {"huggingface": {"model_id": "a/b", "revision": "main"}}, "model.source.huggingface.revision",
     "40-character commit SHA"),
    ("model.source", {"huggingface": {"model_id": "a/b", "token_secret": "hf"}},
     "model.source.huggingface.token_secret", "must be 'secret-name/key'"),
    ("model.source", {"volume": {"claim_name": "Weights"}}, "model.source.volume.claim_name",
     "PersistentVolumeClaim"),
    ("model.mount_path", "opt/ml/model", "model.mount_path", "absolute path"),
    ("model.architecture", "llama-9-9b", "model.architecture", "is not a known preset"),
    ("tensor_parallel_size", 16, "tensor_parallel_size", "between 1 and the 8 GPUs of one ml.p5.48xlarge"),
    ("tensor_parallel_size", 3, "tensor_parallel_size", "does not divide the 64 attention heads"),
    ("prefill.resources", {"gpus": 9}, "prefill.resources.gpus", "between 1 and the 8 GPUs"),
    ("decode.resources", {"gpus": 4}, "decode.resources.gpus", "fewer than tensor_parallel_size 8"),
    ("prefill.resources", {"efa": 64}, "prefill.resources.efa", "exceeds the 32 EFA devices"),
    ("prefill.resources", {"cpu": "lots"}, "prefill.resources.cpu", "is not a Kubernetes quantity"),
    ("decode.resources", {"memory": "3Ti"}, "decode.resources.memory", "fit one ml.p5.48xlarge"),
    ("worker_resources", {"cpu": "500"}, "worker_resources.cpu", "fit one ml.p5.48xlarge"),
    # ThreadsPerCore 1: a p5 node shows 96 CPUs, minus the kubelet's and the DaemonSets' share (audit N1)
    ("worker_resources", {"cpu": "96"}, "worker_resources.cpu", "(88 CPUs a node with one thread per core"),
    ("prefill.resources", {"cpu": "90"}, "prefill.resources.cpu", "(88 CPUs a node with one thread per core"),
    ("prefill.replicas", 0, "prefill.replicas", "must be at least 1"),
    ("decode.max_num_seqs", 0, "decode.max_num_seqs", "must be at least 1"),
    ("decode.node_selector", {"node.kubernetes.io/instance-type": "ml.p5en.48xlarge"},
     "decode.node_selector.node.kubernetes.io/instance-type", "contradicts instance_type"),
    ("prefill.node_selector", {"bad key!": "x"}, "prefill.node_selector.bad key!", "is not a Kubernetes label key"),
    ("prefill.env", {"PYTHONHASHSEED": "42"}, "prefill.env.PYTHONHASHSEED", "differs between the roles"),
    ("decode.env", {"VLLM_LOGGING_LEVEL": "DEBUG"}, "decode.env", "no per-role environment"),
    ("max_model_len", 0, "max_model_len", "must be positive"),
    ("gpu_memory_utilization", 1.5, "gpu_memory_utilization", "fraction in (0, 1]"),
    ("decode.gpu_memory_utilization", 0.0, "decode.gpu_memory_utilization", "fraction in (0, 1]"),
    ("port", 70000, "port", "between 1 and 65535"),
    ("port", 8081, "port", "the operator's proxy container"),
    ("port", 80, "port", "the CRD's metrics port must be 1024-65535"),
    ("image", "my image", "image", "container image reference"),
    ("args", ["--port", "9000"], "args", "remove it and set port"),
    ("args", ["--tensor-parallel-size=4"], "args", "remove it and set tensor_parallel_size"),
    ("prefill.args", ["-tp", "4"], "prefill.args", "remove it and set tensor_parallel_size"),
    ("decode.args", ["--model", "/other"], "decode.args", "model.mount_path"),
    ("prefill.args", ["--max_model_len", "8192"], "prefill.args", "remove it and set max_model_len"),
    ("decode.args", ["--kv-transfer-config", "{}"], "decode.args", "the operator wires LMCache and NIXL"),
    ("decode.args", ["--enforce-eager", "--enforce-eager"], "decode.args", "is given twice"),
    ("prefill.args", ["eager"], "prefill.args", "a value with no flag"),
    # Abbreviations are what vLLM's argparse makes of them, so every check sees the real flag (F2).
    ("decode.args", ["--gpu-memory-util", "0.95"], "decode.args", "remove it and set gpu_memory_utilization"),
    ("decode.args", ["--kv-transfer", "{}"], "decode.args", "the operator wires LMCache and NIXL"),
    ("prefill.args", ["--max-num-seq", "8"], "prefill.args", "remove it and set <role>.max_num_seqs"),
    ("args", ["--tensor-parallel", "4"], "args", "remove it and set tensor_parallel_size"),
    ("args", ["--max_model=8192"], "args", "remove it and set max_model_len"),
    ("args", ["--enforce", "--enforce-eager"], "args", "is given twice"),
    ("args", ["--en"], "args", "could be 29 flags (--enable-auto-tool-choice"),
    # Flags vLLM 0.19.0 does not know are refused with the nearest real one (F10).
    ("args", ["--max-num-batch-tokens", "8192"], "args", "did you mean --max-num-batched-tokens?"),
    ("decode.args", ["--disable-log-requests"], "decode.args", "is not a flag of vLLM 0.19.0"),
    ("args", ["--enforce-eager=true"], "args", "is a switch and takes no value"),
    ("args", ["--block-size"], "args", "needs a value"),
    # World size beyond tensor parallelism (F1).
    ("args", ["--pipeline-parallel-size", "2"], "args", "asks for pipeline parallelism"),
    ("prefill.args", ["-pp", "2"], "prefill.args", "vLLM's world size becomes tensor x pipeline"),
    ("decode.args", ["-pcp=2"], "decode.args", "asks for prefill context parallelism"),
    ("args", ["--data-parallel-size", "2"], "args", "asks for data parallelism"),
    ("args", ["-dp", "4"], "args", "asks for data parallelism"),
    # KV dtype and shape must match on both roles (F3).
    ("decode.args", ["--kv-cache-dtype", "fp8"], "decode.args", "sets the KV cache's dtype for one role only"),
    ("prefill.args", ["--dtype", "float16"], "prefill.args", "move it to the shared args"),
    ("decode.args", ["-q", "fp8"], "decode.args", "the quantization method"),
    ("prefill.args", ["--block-size=32"], "prefill.args", "the KV block size"),
    ("decode.args", ["--quant", "fp8"], "decode.args", "for one role only"),
    ("decode.args", ["--kv-cache-dt", "fp8"], "decode.args",
     "could be 2 flags (--kv-cache-dtype, --kv-cache-dtype-skip"),
    ("decode.args", ["--tokenizer", "/other"], "decode.args", "token ids"),
    ("env", {"PD_BUFFER_SIZE": "1"}, "env.PD_BUFFER_SIZE", "set kv_cache.pd_buffer_size"),
    ("env", {"1BAD": "x"}, "env.1BAD", "not a valid environment variable name"),
    ("routing.threshold", -1, "routing.threshold", "must be 0 (always disaggregate) or more"),
    ("invocation_path", "completions", "invocation_path", "is not a text-generation route vLLM 0.19.0 serves"),
    ("invocation_path", "/", "invocation_path", "must be the path after http://host:port/"),
    ("health_check_path", "health", "health_check_path", "absolute URL path"),
    ("kv_cache.hash_seed", "random", "kv_cache.hash_seed", "must be an integer from 0 to 4294967295"),
    ("kv_cache.hash_seed", "4294967296", "kv_cache.hash_seed", "'random' or an unset seed"),
    ("kv_cache.hash_seed", "-1", "kv_cache.hash_seed", "PYTHONHASHSEED"),
    ("kv_cache.chunk_tokens", 0, "kv_cache.chunk_tokens", "must be positive"),
    ("kv_cache.pd_buffer_size", "96Gi", "kv_cache.pd_buffer_size", "smaller than one GPU's 80Gi"),
    ("metrics.scrape_interval_seconds", 1, "metrics.scrape_interval_seconds", "must be 5-300"),
    ("metrics.model_metrics_port", 80, "metrics.model_metrics_port", "must be 1024-65535"),
    ("metrics.model_metrics_path", "metrics", "metrics.model_metrics_path", "absolute URL path"),
    ("tls", {"certificate_output_s3_uri": "certs"}, "tls.certificate_output_s3_uri", "must be an s3:// URI"),
    ("tls", {"domain_name": "llm.example.com"}, "tls.acm_certificate_arn", "needs both"),
    ("tls", {"acm_certificate_arn": "arn:x", "domain_name": "LLM"}, "tls.acm_certificate_arn",
     "is not an ACM certificate ARN"),
    ("tls", {"acm_certificate_arn": "arn:aws:acm:us-west-2:123456789012:certificate/ab-12", "domain_name": "LLM!"},
     "tls.domain_name", "lower-case DNS name"),
    ("topology.availability_zone", "usw2-az2", "topology.availability_zone", "Availability Zone name"),
    ("topology.placement_group", "", "topology.placement_group", "1-255 characters"),
    ("prefill.autoscaling", {"min_replicas": 3, "max_replicas": 2, "triggers": []}, "prefill.autoscaling",
     "0 <= min_replicas <= max_replicas"),
    ("prefill.autoscaling", {"cooldown_seconds": -1, "triggers": [{"cloudwatch": {
        "name": "q", "namespace": "AWS/SageMaker", "metric_name": "m", "target_value": 1}}]},
     "prefill.autoscaling.cooldown_seconds", "must not be negative"),
    ("prefill.autoscaling", {}, "prefill.autoscaling.triggers", "needs at least one trigger"),
    ("decode.autoscaling", {"min_replicas": 0, "triggers": [{"cloudwatch": {
        "name": "q", "namespace": "AWS/SageMaker", "metric_name": "m", "target_value": 1}}]},
     "decode.autoscaling.min_replicas", "a decoder scaled to zero serves nothing"),
    ("prefill.autoscaling", {"triggers": [
        {"prometheus": {"name": "Q", "server_address": "http://prom:9090", "query": "up", "target_value": 0}}]},
     "prefill.autoscaling.triggers[0].server_address", "Amazon Managed Prometheus"),
    ("prefill.autoscaling", {"triggers": [
        {"prometheus": {"name": "Q", "server_address": "http://prom:9090", "query": "up", "target_value": 0}}]},
     "prefill.autoscaling.triggers[0].name", "must be a DNS label"),
    ("prefill.autoscaling", {"triggers": [
        {"prometheus": {"name": "q", "server_address": "http://prom:9090", "query": "up", "target_value": 0}}]},
     "prefill.autoscaling.triggers[0].target_value", "must be positive"),
    ("decode.autoscaling", {"triggers": [
        {"cloudwatch": {"name": "a", "namespace": "n", "metric_name": "m", "target_value": 1}},
        {"cloudwatch": {"name": "a", "namespace": "n", "metric_name": "m", "target_value": 1,
                        "period_seconds": 0}}]},
     "decode.autoscaling.triggers[1].name", "is used by another trigger"),
    ("decode.autoscaling", {"triggers": [
        {"cloudwatch": {"name": "a", "namespace": "n", "metric_name": "m", "target_value": 1, "period_seconds": 0}}]},
     "decode.autoscaling.triggers[0].period_seconds", "must be positive"),
    ("tags", {"team": "a|b"}, "tags.team", "the tag's value holds '|'"),
    ("image", "Public.ECR.aws/deep-learning-containers/VLLM:v1", "image", "is not an image reference"),
    ("image", "public.ecr.aws/vllm:server@sha256:abc", "image", "is not an image reference"),
    ("image", "vllm/vllm-openai:" + "v" * 129, "image", "is not an image reference"),
    ("decode.autoscaling", {"triggers": [
        {"cloudwatch": {"name": "a", "namespace": "n", "metric_name": "m" * 256, "target_value": 1}}]},
     "decode.autoscaling.triggers[0].metric_name", "must be 1-255 characters (256 given)"),
    ("tags", {"team#1": "a"}, "tags.team#1", "the tag's key holds '#'"),
    ("model.mount_path", "/dev/model", "model.mount_path", "is under a file system the container runtime mounts"),
    ("model.mount_path", "/proc", "model.mount_path", "is under a file system the container runtime mounts"),
    ("decode.args", ["--enable-lora"], "decode.args", "serves LoRA adapters over LMCache"),
]


@pytest.mark.parametrize(("path", "value", "field", "fragment"), RULES,
                         ids=[f"{r[2]}:{r[3][:30]}" for r in RULES])
def test_rule_reports_field_value_and_fix(path: str, value: Any, field: str, fragment: str) -> None:
    problems = _problems(_set(_mapping(), path, value))
    matching = [p for p in problems if p.startswith(f"{field}") and fragment in p]
    assert matching, f"no problem for {field!r} containing {fragment!r} in {problems}"
    assert all("Fix: " in p and "(got " in p for p in matching)


def test_all_problems_are_reported_at_once() -> None:
    data = _set(_set(_set(_mapping(), "prefill.replicas", 0), "kv_cache.hash_seed", "random"), "port", 0)
    problems = _problems(data)
    fields = {p.split(":")[0] for p in problems}
    assert {"prefill.replicas", "kv_cache.hash_seed", "port"} <= fields


def test_the_default_spec_is_valid_and_quiet() -> None:
    checked = check(default_spec())
    assert checked.warnings == ()
    assert checked.architecture is not None and checked.architecture.name == "llama-3.3-70b"


def test_more_than_one_decoder_is_a_warning_not_an_error(spec: DpdSpec) -> None:
    checked = check(dataclasses.replace(spec, decode=RoleSpec(replicas=2)))
    assert [(w.code, w.field) for w in checked.warnings] == [("SingleDecoder", "decode.replicas")]
    assert "one decode deployment per endpoint" in checked.warnings[0].render()


def test_unknown_image_and_idle_gpus_are_warnings(spec: DpdSpec) -> None:
    from hyperpod_dpd import Resources

    changed = dataclasses.replace(spec, image="example.com/vllm:custom", tensor_parallel_size=4,
                                  prefill=RoleSpec(resources=Resources(gpus=8)))
    codes = {w.code for w in check(changed).warnings}
    assert {"UnknownImage", "GpusIdle"} <= codes


@pytest.mark.parametrize("path", ["v1/completions", "v1/chat/completions"])
def test_kvaware_is_allowed_on_both_openai_routes_with_a_warning(spec: DpdSpec, path: str) -> None:
    from hyperpod_dpd import RoutingSpec, RoutingStrategy

    changed = dataclasses.replace(spec, invocation_path=path, routing=RoutingSpec(strategy=RoutingStrategy.KV_AWARE))
    warnings = check(changed).warnings
    assert [(w.code, w.field) for w in warnings] == [("KvAwareUnverified", "routing.strategy")]
    assert "vLLM images 0.19.1 or later" in warnings[0].message and repr(path) in warnings[0].message


def _warnings(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(w.code, w.field) for w in check(parse_spec(data)).warnings]


# Over-strict rules that became warnings or pass: (path, value, the warnings expected, exactly).
RELAXED = [
    # Nothing is transferred, so the buffer is not judged against the decoder's batch.
    ("routing.threshold", 20000, [("NoPromptReachesPrefiller", "routing.threshold")]),
    ("topology.same_az", False, [("CrossAz", "topology.same_az")]),
    ("port", 8080, [("PortMayCollide", "port")]),
    ("metrics.model_metrics_port", 9000, [("MetricsPortDiffers", "metrics.model_metrics_port")]),
    ("metrics.model_metrics_port", 8000, []),
    ("kv_cache.hash_seed", "42", []),
    ("kv_cache.hash_seed", "4294967295", []),
    ("invocation_path", "/v1/chat/completions", []),
    ("invocation_path", "invocations", []),
    ("args", ["--kv-cache-dtype", "fp8", "--block-size", "32", "--dtype", "bfloat16"], []),
    ("args", ["-pp", "1", "--data-parallel-size=1"], []),
    ("args", ["-cc.mode", "3", "--compilation-config.cudagraph_mode", "FULL", "-O2"], []),
    # --api-key takes several keys (arity many); it now warns why the router and the checks would get 401
    ("args", ["--api-key", "a", "b", "--enforce-eager", "--no-enable-log-requests"], [("ApiKeyOnWorkers", "args")]),
    ("args", ["--enable-prefix-cach", "--max_num_batched_tokens", "8192"], []),
    ("decode.autoscaling", {"min_replicas": 1, "max_replicas": 1, "triggers": [{"cloudwatch": {
        "name": "q", "namespace": "AWS/SageMaker", "metric_name": "m", "target_value": 1}}]}, []),
    ("prefill.autoscaling", {"min_replicas": 0, "triggers": [{"cloudwatch": {
        "name": "q", "namespace": "AWS/SageMaker", "metric_name": "m", "target_value": 1}}]},
     [("PrefillScalesToZero", "prefill.autoscaling.min_replicas")]),
    # Weights at the bucket's root: modelLocation is a plain string.
    ("model.source", {"s3": {"bucket": "dpd-models-example", "prefix": "", "region": "us-west-2"}}, []),
]


@pytest.mark.parametrize(("path", "value", "expected"), RELAXED, ids=[f"{r[0]}={r[1]!r}"[:50] for r in RELAXED])
def test_relaxed_rules_pass_with_only_the_expected_warnings(path: str, value: Any,
                                                            expected: list[tuple[str, str]]) -> None:
    assert _warnings(_set(_mapping(), path, value)) == expected


def test_kv_layout_flags_may_repeat_the_shared_value_in_a_role() -> None:
    data = _set(_set(_mapping(), "args", ["--kv-cache-dtype", "fp8"]), "decode.args", ["--kv-cache-dtype", "fp8"])
    assert _warnings(data) == []
    other = _set(data, "decode.args", ["--kv-cache-dtype", "fp8_e5m2"])
    assert any("for one role only" in p for p in _problems(other))


def test_an_unknown_route_is_only_a_warning_with_a_custom_image() -> None:
    data = _set(_set(_mapping(), "image", "example.com/my-vllm:1"), "invocation_path", "generate")
    assert ("UnknownRoute", "invocation_path") in _warnings(data)


def test_wrong_types_built_in_python_get_the_same_messages_as_files(spec: DpdSpec) -> None:
    changed = dataclasses.replace(spec, prefill=RoleSpec(replicas="two"))  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=r"prefill\.replicas: must be an integer, not a string"):
        check(changed)


def test_unresolved_cdk_tokens_are_left_to_deploy_time(spec: DpdSpec) -> None:
    from hyperpod_dpd import S3Source

    token_source = S3Source(bucket="${Token[TOKEN.123]}", prefix="llama", region="${Token[AWS.Region.9]}")
    changed = dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=token_source))
    assert check(changed).spec.model.source == token_source


def test_a_leading_slash_in_the_invocation_path_is_dropped(spec: DpdSpec) -> None:
    changed = dataclasses.replace(spec, invocation_path="/v1/completions")
    assert changed.invocation_path == "v1/completions"
    assert parse_spec(_set(_mapping(), "invocation_path", "//invocations")).invocation_path == "invocations"


def test_the_same_kv_layout_flag_in_both_roles_agrees() -> None:
    """Each role may carry the KV-layout flag itself as long as both say the same."""
    data = _set(_set(_mapping(), "prefill.args", ["--kv-cache-dtype", "fp8"]), "decode.args",
                ["--kv-cache-dtype", "fp8"])
    assert _warnings(data) == []
    split = _set(data, "decode.args", ["--kv-cache-dtype", "fp8_e5m2"])
    assert sum("for one role only" in p for p in _problems(split)) == 2


def test_completions_is_the_route_aws_prescribes_for_kvaware() -> None:
    data = _set(_set(_mapping(), "routing.strategy", "kvaware"), "invocation_path", "completions")
    assert _warnings(data) == [("KvAwareUnverified", "routing.strategy")]
    prefixaware = _set(data, "routing.strategy", "prefixaware")
    assert any("is not a text-generation route" in p for p in _problems(prefixaware))


def _trigger(query: str) -> dict[str, Any]:
    return {"min_replicas": 1, "max_replicas": 2, "triggers": [{"prometheus": {
        "name": "waiting", "target_value": 4, "query": query,
        "server_address": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0a1b"}}]}


# Settings that validated before and silently break DPD or its signals: (path, value, field, message).
DPD_BREAKERS = [
    ("args", ["--kv-offloading-size", "64"], "args", "replaces the LMCache/NIXL connector"),
    ("prefill.args", ["--kv-offloading-backend", "native"], "prefill.args", "replaces the LMCache/NIXL connector"),
    ("args", ["--num-gpu-blocks-override", "90000"], "args", "gpu_memory_utilization (what the planner sized"),
    ("decode.args", ["--kv-cache-memory-bytes", "60000000000"], "decode.args", "no longer decides GPU memory"),
    ("args", ["--cpu-offload-gb", "20"], "args", "moves weights to CPU memory"),
    ("args", ["--disable-log-stats"], "args", "every vllm:* series the DPD alerts"),
    ("prefill.args", ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'], "prefill.args",
     "draft model's layers to LMCache's KV shape on one role only"),
    ("port", 9113, "port", "reverse-proxy sidecar serves its metrics"),
    ("metrics.model_metrics_port", 9113, "metrics.model_metrics_port", "sidecar's metrics port"),
    ("env", {"PROMETHEUS_MULTIPROC_DIR": "/var/run/prom"}, "env.PROMETHEUS_MULTIPROC_DIR",
     "a directory that does not exist stops vLLM at start"),
    ("prefill.autoscaling", _trigger('vllm:num_requests_waiting{resource_name="prefill-dpd-test"}'),
     "prefill.autoscaling.triggers[0].query", "needs an instant vector of at most one series"),
    ("prefill.autoscaling", _trigger('sum by (pod) (vllm:num_requests_waiting{resource_name="prefill-dpd-test"})'),
     "prefill.autoscaling.triggers[0].query", "may return several series"),
]


@pytest.mark.parametrize(("path", "value", "field", "fragment"), DPD_BREAKERS,
                         ids=[f"{r[0]}={r[1]!r}"[:50] for r in DPD_BREAKERS])
def test_settings_that_silently_break_dpd_are_refused(path: str, value: Any, field: str, fragment: str) -> None:
    problems = _problems(_set(_mapping(), path, value))
    assert any(p.startswith(field) and fragment in p for p in problems), problems


def test_an_unobserved_endpoint_may_turn_statistics_off() -> None:
    data = _set(_set(_mapping(), "args", ["--disable-log-stats"]), "metrics.enabled", False)
    assert ("ALERTS_WITHOUT_METRICS", "metrics.enabled") not in _warnings(data)


def test_a_single_valued_keda_query_passes() -> None:
    query = 'sum(vllm:num_requests_waiting{resource_name="prefill-dpd-test", namespace="default"})'
    assert _warnings(_set(_mapping(), "prefill.autoscaling", _trigger(query))) == []


@pytest.mark.parametrize(("env", "code"), [({"LMCACHE_LOG_LEVEL": "WARNING"}, "LogLinesHidden"),
                                           ({"LMCACHE_PD_ROLE": "sender"}, "LmcachePdOverride"),
                                           ({"LMCACHE_ENABLE_PD": "False"}, "LmcachePdOverride")])
def test_environment_that_hides_signals_or_rewires_lmcache_warns(env: dict[str, str], code: str) -> None:
    assert _warnings(_set(_mapping(), "env", env)) == [(code, f"env.{next(iter(env))}")]
    assert _warnings(_set(_mapping(), "env", {"LMCACHE_LOG_LEVEL": "INFO"})) == []


# Above the model's context window (Llama-3.3-70B-Instruct: 131,072 tokens): vLLM refuses to start.
CONTEXT_WINDOW_BREAKERS = [
    ("max_model_len", 131_073, "max_model_len", "131073"),
    ("args", ["--max-model-len", "200000"], "args", "'--max-model-len 200000'"),
    ("decode.args", ["--max-model-len=256k"], "decode.args", "'--max-model-len 256000'"),
    ("prefill.args", ["--max-model-len", "129K"], "prefill.args", "'--max-model-len 132096'"),
]


@pytest.mark.parametrize(("path", "value", "field", "shown"), CONTEXT_WINDOW_BREAKERS,
                         ids=[f"{r[0]}={r[1]!r}" for r in CONTEXT_WINDOW_BREAKERS])
def test_a_length_above_the_models_context_window_is_refused(path: str, value: Any, field: str, shown: str) -> None:
    problems = [p for p in _problems(_set(_mapping(), path, value)) if "context window" in p]
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{field}: ") and f"(got {shown})" in problems[0]
    assert "llama-3.3-70b's context window of 131072 tokens" in problems[0]
    assert "max_position_embeddings 131072" in problems[0] and "set max_model_len to 131072 or less" in problems[0]


def test_the_context_window_itself_and_auto_are_accepted() -> None:
    data = _set(_set(_mapping(), "max_model_len", 131_072), "decode.max_num_seqs", 1)
    with pytest.raises(SpecError) as caught:  # --max-model-len is still a field's flag, but not a context problem
        check(parse_spec(_set(data, "args", ["--max-model-len", "auto"])))
    assert not any("context window" in p.render() for p in caught.value.problems)
    assert not any("context window" in p.render() for p in _problems_or_none(data))


def test_no_context_window_refusal_when_the_limit_is_unknown() -> None:
    data = _set(_set(_mapping(), "model.name", "acme/Unknown-70B"), "max_model_len", 1_000_000)
    assert not any("context window" in p for p in _problems_or_none(data))


def _problems_or_none(data: dict[str, Any]) -> list[str]:
    try:
        check(parse_spec(data))
    except SpecError as err:
        return [p.render() for p in err.problems]
    return []


def test_an_explicit_architectures_context_window_is_enforced() -> None:
    arch = {"name": "acme-8b", "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "num_kv_heads": 8,
            "head_dim": 128, "num_parameters": 8_030_261_248, "max_context_length": 8192,
            "context_source": "acme/8B config.json"}
    data = _set(_mapping(), "model.architecture", arch)
    problems = [p for p in _problems(data) if "context window" in p]
    assert problems == ["max_model_len: is above acme-8b's context window of 8192 tokens, so vLLM refuses to start "
                        "and the pods would crash-loop; the limit is acme/8B config.json (got 16384). Fix: set "
                        "max_model_len to 8192 or less"]
    assert not any("context window" in p for p in _problems_or_none(_set(data, "max_model_len", 8192)))


def _host_memory_problems(data: dict[str, Any]) -> list[str]:
    try:
        check(parse_spec(data))
    except SpecError as err:
        return [p.render() for p in err.problems if "host memory" in p.render()]
    return []


def test_lmcache_cpu_cache_counts_against_the_pod_memory_limit() -> None:
    """Each of the 8 ranks pins kv_cache.cpu_cache_size (LMCache 0.4.3, local_cpu_backend.py:373): 8 x 5Gi = 40Gi."""
    tight = _set(_mapping(), "decode.resources", {"memory": "32Gi"})
    assert _host_memory_problems(tight) == [
        "decode.resources.memory: is below the host memory each decode pod allocates before vLLM's own: "
        "LMCache's CPU cache 5Gi x 8 ranks (kv_cache.cpu_cache_size) = 40.0 GiB, 40.0 GiB in all, so the pod is "
        "OOM-killed when it starts (got '32Gi'). Fix: raise decode.resources.memory above 40.0 GiB (plus vLLM's "
        "process memory), or lower kv_cache.cpu_cache_size or the offload flags"]
    assert _host_memory_problems(_set(tight, "decode.resources", {"memory": "64Gi"})) == []
    assert _host_memory_problems(_set(tight, "kv_cache.l1_cache", False)) == []
    assert _host_memory_problems(_set(tight, "kv_cache.cpu_cache_size", "3Gi")) == []


def test_vllm_cpu_offload_adds_to_the_pinned_host_memory() -> None:
    """--cpu-offload-gb is per GPU (vllm/config/offload.py:23), --kv-offloading-size the TP total (cache.py:144)."""
    data = _set(_set(_mapping(), "prefill.resources", {"memory": "100Gi"}), "prefill.args", ["--cpu-offload-gb", "8"])
    found = _host_memory_problems(data)
    assert len(found) == 1 and "--cpu-offload-gb 8 x 8 GPUs = 64.0 GiB, 104.0 GiB in all" in found[0], found
    summed = _set(_set(_mapping(), "prefill.resources", {"memory": "100Gi"}),
                  "prefill.args", ["--kv-offloading-size", "32"])
    assert _host_memory_problems(summed) == []  # 40 GiB of LMCache cache + 32 GiB over all ranks = 72 GiB
    for odd in ("inf", "nan", "-4"):  # vLLM's own value rules judge these; the memory check never crashes on them
        assert _host_memory_problems(_set(summed, "prefill.args", ["--cpu-offload-gb", odd])) == []


def test_a_cpu_cache_larger_than_the_node_is_refused() -> None:
    found = _host_memory_problems(_set(_mapping(), "kv_cache.cpu_cache_size", "300Gi"))
    assert len(found) == 2, found  # one per role; no memory limit is set, so only the node bounds it
    assert found[0] == (
        "kv_cache.cpu_cache_size: makes each prefill pod allocate more host memory than one ml.p5.48xlarge has "
        "(2.0 TiB): LMCache's CPU cache 300Gi x 8 ranks (kv_cache.cpu_cache_size) = 2.3 TiB, 2.3 TiB in all "
        "(got '300Gi'). Fix: lower kv_cache.cpu_cache_size (it is per tensor-parallel rank) or the offload flags")


def test_the_node_bound_counts_every_pod_a_node_holds() -> None:
    """TP 4 on an 8-GPU ml.p5.48xlarge: two prefill pods share a node, each pinning 4 ranks x 300Gi = 1.2 TiB."""
    data = _set(_set(_mapping(), "tensor_parallel_size", 4), "kv_cache.cpu_cache_size", "300Gi")
    assert _host_memory_problems(data) == []  # one pod per role: 1.2 TiB fits the node's 2.0 TiB
    found = _host_memory_problems(_set(data, "prefill.replicas", 2))
    assert found == [
        "kv_cache.cpu_cache_size: makes the 2 prefill pods one node holds (8 GPUs // 4 per pod) allocate more host "
        "memory than one ml.p5.48xlarge has (2.0 TiB): LMCache's CPU cache 300Gi x 4 ranks (kv_cache.cpu_cache_size) "
        "= 1.2 TiB, 1.2 TiB per pod, 2.3 TiB in all (got '300Gi'). Fix: lower kv_cache.cpu_cache_size (it is per "
        "tensor-parallel rank) or the offload flags"], found
    assert _host_memory_problems(_set(_set(data, "prefill.replicas", 2), "kv_cache.cpu_cache_size", "250Gi")) == []


def test_lmcache_sizes_in_env_are_refused_for_the_fields_that_own_them() -> None:
    found = _problems(_set(_mapping(), "env", {"LMCACHE_CHUNK_SIZE": "512", "LMCACHE_MAX_LOCAL_CPU_SIZE": "20"}))
    assert any(p.startswith("env.LMCACHE_CHUNK_SIZE") and "kv_cache.chunk_tokens" in p for p in found), found
    assert any(p.startswith("env.LMCACHE_MAX_LOCAL_CPU_SIZE") and "kv_cache.cpu_cache_size" in p for p in found)


def _api_key_findings(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    try:
        checked = check(parse_spec(data))
    except SpecError as err:
        return [p.render() for p in err.problems if "401" in p.render()], []
    return [], [w.render() for w in checked.warnings if w.code == "ApiKeyOnWorkers"]


@pytest.mark.parametrize(("path", "value"), [("args", ["--api-key", "s3cret"]), ("decode.args", ["--api-k=s3cret"]),
                                             ("env", {"HF_HOME": "/tmp/hf", "VLLM_API_KEY": "s3cret"})])
def test_an_api_key_on_the_workers_warns_why_requests_get_401(path: str, value: Any) -> None:
    """vLLM 0.19.0's AuthenticationMiddleware guards /v1 only (vllm/entrypoints/openai/server_utils.py:38-47)."""
    problems, warnings = _api_key_findings(_set(_mapping(), path, value))
    assert problems == []  # /health is served without a token
    assert len(warnings) == 1 and "answer 401 to every /v1 request without the key" in warnings[0], warnings
    assert warnings[0].startswith(f"[ApiKeyOnWorkers] {path if path != 'env' else 'env.VLLM_API_KEY'}: ")
    assert "s3cret" not in warnings[0]


def test_an_api_key_with_a_v1_health_check_is_refused() -> None:
    data = _set(_set(_mapping(), "args", ["--api-key", "s3cret"]), "health_check_path", "/v1/models")
    problems, _ = _api_key_findings(data)
    assert problems == [
        "health_check_path: is under /v1, which vLLM 0.19.0 answers with 401 once --api-key or VLLM_API_KEY is set "
        "(args): the ALB's probe carries no token, so every target is unhealthy (got '/v1/models'). Fix: use "
        "'/health', which vLLM serves without a token"]
    assert _api_key_findings(_set(_mapping(), "health_check_path", "/v1/models")) == ([], [])


@pytest.mark.parametrize(("tpot_ms", "bucket", "nearest"), [
    (60, "(50, 75] ms", "use 50"), (33, "(25, 50] ms", "use 25"), (300, None, None)])
def test_a_tpot_slo_between_buckets_names_the_bucket_the_alert_reads(tpot_ms: int, bucket: str | None,
                                                                     nearest: str | None) -> None:
    """T4-12: vLLM 0.19.0's inter-token latency buckets (loggers.py l.760) are 25 ms wide around 50 ms: a 60 ms
    target is read inside (50, 75], not at 60."""
    data = _set(_mapping(), "slo", {"tpot_ms": tpot_ms})
    found = [w for w in check(parse_spec(data)).warnings if w.code == "SLO_BETWEEN_BUCKETS"]
    if bucket is None:
        assert found == [], "300 ms is a bound: the comparison is exact"
        return
    (warning,) = found
    assert f"the alert reads the p90 inside the bucket {bucket}" in warning.message
    assert warning.message.endswith(f"{nearest} for an exact threshold")


# --- what execve() refuses: include/uapi/linux/binfmts.h MAX_ARG_STRLEN, fs/exec.c bprm_stack_limits -------------

def _exec_problems(data: dict[str, Any]) -> list[Any]:
    with pytest.raises(SpecError) as caught:
        check(parse_spec(data))
    return list(caught.value.problems)


def test_an_environment_string_may_be_as_long_as_linux_passes_one_and_not_a_byte_longer() -> None:
    # "BIG=" + value + NUL: 131072 bytes is the kernel's limit (MAX_ARG_STRLEN = 32 pages of 4 KiB)
    check(parse_spec(_set(_mapping(), "env.BIG", "a" * (131072 - len("BIG=") - 1))))
    (problem,) = _exec_problems(_set(_mapping(), "env.BIG", "a" * (131072 - len("BIG="))))
    assert (problem.field, problem.value) == ("env.BIG", "131073 bytes")
    assert "MAX_ARG_STRLEN, include/uapi/linux/binfmts.h" in problem.message
    assert "argument list too long" in problem.message
    (problem,) = _exec_problems(_set(_mapping(), "env.BIG", "é" * 65_535))  # counted in UTF-8 bytes: 131075 in all
    assert problem.value == "131075 bytes"


def test_an_argument_over_the_limit_is_refused_in_the_shared_and_the_role_args() -> None:
    flag = "--override-generation-config=" + "{" * 131_072
    fields = {p.field for p in _exec_problems(_set(_mapping(), "args", [flag]))}
    assert "args[0]" in fields
    fields = {p.field for p in _exec_problems(_set(_mapping(), "decode.args", [flag]))}
    assert "decode.args[0]" in fields


def test_a_container_over_the_total_of_arguments_and_environment_is_refused_per_role() -> None:
    env = {f"V{i}": "a" * 100_000 for i in range(21)}  # each under the per-string limit, 2.1 MB together
    problems = _exec_problems(_set(_mapping(), "env", env))
    assert [p.field for p in problems] == ["prefill", "decode"]
    assert all("over the 2097152 bytes execve() allows" in p.message and "bprm_stack_limits" in p.message
               for p in problems)
    check(parse_spec(_set(_mapping(), "env", dict(list(env.items())[:20]))))  # 2.0 MB: starts
