"""The runner's order: rules run, and their findings are reported, in the order of ``RULES``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hyperpod_dpd import SpecError, check, dump_spec, parse_spec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.validation import RULES


def _spec(*changes: tuple[str, Any]) -> dict[str, Any]:
    data = dump_spec(default_spec())
    for path, value in changes:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return data


def _fields(data: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check(parse_spec(data))
    return [p.field for p in caught.value.problems]


def _trigger(query: str, *, min_replicas: int = 1) -> dict[str, Any]:
    return {"min_replicas": min_replicas, "max_replicas": 2, "triggers": [{"prometheus": {
        "name": "waiting", "target_value": 4, "query": query,
        "server_address": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0a1b"}}]}


def test_the_rules_run_in_a_fixed_order() -> None:
    # The order the rule registry had (its modules' import order, then definition order), kept so that
    # messages list problems as before.
    assert [rule.__name__ for rule in RULES] == [
        "engine_flags", "environment", "exec_limits", "ports", "autoscaling_signals", "context_window",
        "slo_targets", "scrape_interval", "alert_thresholds",
        "names", "model_source", "hardware", "roles", "engine", "routing", "kv_cache", "observability", "tls",
        "idle_node_gpus", "topology", "autoscaling", "slo_scaling",
        "front_doors", "audit_trail",
        "sizing",
    ]


def test_problems_from_every_area_come_out_in_rule_order() -> None:
    data = _spec(
        ("name", "Bad_Name"),
        ("model.source", {"s3": {"bucket": "models", "prefix": "/abs", "region": "us-west-2"}}),
        ("prefill.resources", {"cpu": "lots"}),
        ("prefill.replicas", 0),
        ("port", 9113),
        ("args", ["--cpu-offload-gb", "20", "--max-model-len", "200000"]),
        ("env", {"PROMETHEUS_MULTIPROC_DIR": "/x", "PD_BUFFER_SIZE": "1"}),
        ("routing.threshold", -1),
        ("kv_cache.chunk_tokens", 0),
        ("metrics.scrape_interval_seconds", 400),
        ("tls", {"domain_name": "llm.example.com", "hosted_zone_id": "z1"}),
        ("topology.availability_zone", "nowhere"),
        ("decode.autoscaling", _trigger("vllm:num_requests_waiting", min_replicas=0)),
        ("slo", {"ttft_ms": 1}),
        ("alerts", {"error_ratio": 2}),
        ("data_capture", {"load_balancer": False}),
    )
    assert _fields(data) == [
        "args",  # engine_flags: --cpu-offload-gb
        "env.PROMETHEUS_MULTIPROC_DIR",
        "port",  # ports: the sidecar's 9113
        "decode.autoscaling.triggers[0].query",
        "args",  # context_window: --max-model-len 200000
        "slo.ttft_ms",
        "metrics.scrape_interval_seconds",  # scrape_interval: above 75 s
        "alerts.error_ratio",
        "name",
        "model.source.s3.prefix",
        "prefill.resources.cpu",
        "prefill.replicas",
        "args",  # engine: --max-model-len is a field's flag
        "env.PD_BUFFER_SIZE",
        "routing.threshold",
        "kv_cache.chunk_tokens",
        "metrics.scrape_interval_seconds",  # observability: outside 5-300
        "tls.acm_certificate_arn",
        "topology.availability_zone",
        "decode.autoscaling.min_replicas",
        "tls.hosted_zone_id",
        "tls.hosted_zone_id",
        "data_capture.load_balancer",
    ]


def test_names_heads_and_routes_come_out_in_rule_order() -> None:
    data = _spec(
        ("namespace", "Prod"),
        ("tensor_parallel_size", 3),
        ("decode.max_num_seqs", 0),
        ("max_model_len", 131073),
        ("metrics.model_metrics_port", 9113),
        ("prefill.autoscaling", _trigger("vllm:x")),
        ("kv_cache.hash_seed", "random"),
        ("invocation_path", "v1/embeddings"),
    )
    assert _fields(data) == [
        "metrics.model_metrics_port",
        "prefill.autoscaling.triggers[0].query",
        "max_model_len",
        "namespace",
        "tensor_parallel_size",
        "decode.max_num_seqs",
        "invocation_path",
        "kv_cache.hash_seed",
    ]


def test_the_planners_problems_come_last() -> None:
    data = _spec(
        ("kv_cache.pd_buffer_size", "1Mi"),
        ("endpoint_name", "bad_name"),
        ("args", ["--kv-offloading-size", "64", "--port", "1"]),
        ("data_capture", {"load_balancer": False}),
        ("alerts", {"prefill_queue": 0}),
    )
    assert _fields(data) == [
        "args",  # engine_flags: --kv-offloading-size
        "alerts.prefill_queue",
        "endpoint_name",
        "args",  # engine: --port is a field's flag
        "data_capture.load_balancer",
        "kv_cache.pd_buffer_size",  # sizing
    ]


def test_warnings_come_out_in_rule_order() -> None:
    data = _spec(
        ("endpoint_name", None),
        ("port", 8080),
        ("image", "example.com/vllm:custom"),
        ("routing.threshold", 20000),
        ("topology.same_az", False),
        ("decode.replicas", 2),
        ("env", {"LMCACHE_LOG_LEVEL": "WARNING", "LMCACHE_PD_ROLE": "x"}),
        ("prefill.autoscaling", {"min_replicas": 0, "triggers": [{"cloudwatch": {
            "name": "q", "namespace": "AWS/SageMaker", "metric_name": "m", "target_value": 1}}]}),
        ("metrics.model_metrics_port", 9000),
        ("slo", {"tpot_ms": 33}),
        ("decode.max_num_seqs", 4096),
    )
    assert [(w.code, w.field) for w in check(parse_spec(data)).warnings] == [
        ("LogLinesHidden", "env.LMCACHE_LOG_LEVEL"),
        ("LmcachePdOverride", "env.LMCACHE_PD_ROLE"),
        ("PrefillScalesToZero", "prefill.autoscaling.min_replicas"),
        ("SLO_BETWEEN_BUCKETS", "slo.tpot_ms"),
        ("SingleDecoder", "decode.replicas"),
        ("PortMayCollide", "port"),
        ("UnknownImage", "image"),
        ("NoPromptReachesPrefiller", "routing.threshold"),
        ("MetricsPortDiffers", "metrics.model_metrics_port"),
        ("CrossAz", "topology.same_az"),
        ("NoAuthenticatedFrontDoor", "endpoint_name"),
        ("SelfSignedCertificate", "tls"),
        ("KvCacheBelowMaxNumSeqs", "decode.max_num_seqs"),
    ]
