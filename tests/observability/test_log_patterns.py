"""Each log pattern catches the LMCache line of its failure and ignores the healthy lines around it.

The lines are built from LMCache 0.4.3's format strings (v1/cache_engine.py, pd_backend.py) with a
typical logger prefix.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hyperpod_dpd.contracts.operator import role_deployment
from hyperpod_dpd.observability.log_patterns import (
    KV_NOT_RETRIEVED,
    KV_TRANSFER_BELOW_1_GBPS,
    LOG_PATTERNS,
    PD_BUFFER_FULL,
    LogPattern,
)
from hyperpod_dpd.spec import DpdSpec

PREFIX = "[2026-11-30 10:00:00,000] LMCache WARNING: "
BUFFER_FULL = PREFIX + "Failed to allocate memory object, retrying..."
RETRIEVED_NONE = PREFIX + ("[req_id=cmpl-1] Retrieved 0 out of 6035 required tokens (from 6035 total tokens). "
                           "size: 0.0000 gb, cost 0.1200 ms, throughput: 0.0000 GB/s;")
RETRIEVED_ALL = PREFIX + ("[req_id=cmpl-2] Retrieved 6035 out of 6035 required tokens (from 6035 total tokens). "
                          "size: 0.2344 gb, cost 1.3300 ms, throughput: 176.2000 GB/s;")
RETRIEVED_EMPTY = PREFIX + ("[req_id=cmpl-3] Retrieved 0 out of 0 required tokens (from 12 total tokens). "
                            "size: 0.0000 gb, cost 0.0100 ms, throughput: 0.0000 GB/s;")
STORED_SLOW = PREFIX + ("[req_id=cmpl-4] Stored 6035 out of total 6035 tokens. size: 0.2344 GB, cost 290.1000 ms, "
                        "throughput: 0.8080 GB/s; offload_time: 2.0000 ms, put_time: 288.1000 ms")
STORED_FAST = PREFIX + ("[req_id=cmpl-5] Stored 6035 out of total 6035 tokens. size: 0.2344 GB, cost 9.1000 ms, "
                        "throughput: 25.7582 GB/s; offload_time: 2.0000 ms, put_time: 7.1000 ms")
STORED_NOTHING = PREFIX + ("[req_id=cmpl-6] Stored 0 out of total 6035 tokens. size: 0.0000 GB, cost 0.1000 ms, "
                           "throughput: 0.0000 GB/s; offload_time: 0.0000 ms, put_time: 0.0000 ms")
ALL_LINES = [BUFFER_FULL, RETRIEVED_NONE, RETRIEVED_ALL, RETRIEVED_EMPTY, STORED_SLOW, STORED_FAST, STORED_NOTHING]


@pytest.mark.parametrize(("pattern", "caught"), [
    (PD_BUFFER_FULL, [BUFFER_FULL]),
    (KV_NOT_RETRIEVED, [RETRIEVED_NONE]),
    (KV_TRANSFER_BELOW_1_GBPS, [STORED_SLOW]),
])
def test_pattern_catches_exactly_its_failure(pattern: LogPattern, caught: list[str]) -> None:
    assert [line for line in ALL_LINES if pattern.matches(line)] == caught


def test_filter_patterns_use_quoted_terms_only() -> None:
    assert KV_NOT_RETRIEVED.filter_pattern == '"Retrieved 0 out of" -"out of 0 required"'
    for pattern in LOG_PATTERNS:
        assert "%" not in pattern.filter_pattern  # no regex: CloudWatch allows only five per log group
        assert len(pattern.filter_pattern) <= 1024
        assert pattern.datapoints <= pattern.periods


def test_names_are_unique() -> None:
    assert len({p.metric_name for p in LOG_PATTERNS}) == len(LOG_PATTERNS)


def test_kv_not_retrieved_does_not_claim_the_hash_mismatch_it_cannot_see() -> None:
    """Audit O3: a lookup miss (hash seed, pd_role) never calls retrieve(), so no 'Retrieved' line is logged;
    the alarm points at the metric alert that does see it."""
    assert "hash_seed" not in KV_NOT_RETRIEVED.fix and "DpdKvNotTransferred" in KV_NOT_RETRIEVED.fix
    assert "lookup hit" in KV_NOT_RETRIEVED.source


# --- per endpoint: Container Insights events ---------------------------------------------------------


def event(line: str, *, namespace: str, container: str, pod: str | None = None) -> dict[str, Any]:
    """One application log event as Container Insights' Fluent Bit ships it (tail of /var/log/containers, the
    kubernetes filter with Merge_Log On and Labels Off, cloudwatch_logs output without log_key): the line in
    ``log``, the pod in ``kubernetes`` (AWS docs, "Set up Fluent Bit as a DaemonSet to send logs to CloudWatch
    Logs"; aws-samples/amazon-cloudwatch-container-insights fluent-bit.yaml)."""
    return {"time": "2026-11-30T10:00:00.000000000Z", "stream": "stdout", "_p": "F",
            "log": f"\x1b[33m{line}\x1b[0m",  # LMCache colours its lines (lmcache/logging.py)
            "kubernetes": {"pod_name": pod or f"{container}-6f8d9c7b5-klmno", "namespace_name": namespace,
                           "pod_id": "198f7dd2-2270-11ea-be47-0a5d932f5920", "host": "hyperpod-i-0abc",
                           "container_name": container, "docker_id": "0123abcd", "container_hash": "sha256:ab",
                           "container_image": "vllm-lmcache:0.19.0"}}


@pytest.mark.parametrize(("pattern", "line"), [(PD_BUFFER_FULL, BUFFER_FULL), (KV_NOT_RETRIEVED, RETRIEVED_NONE),
                                               (KV_TRANSFER_BELOW_1_GBPS, STORED_SLOW)])
def test_endpoint_pattern_counts_only_its_own_pods(spec: DpdSpec, pattern: LogPattern, line: str) -> None:
    """T4-13: the same failing line from a neighbour (a name that extends ours, another namespace, the other role,
    the sidecar) does not count for this endpoint."""
    ours = role_deployment(spec, pattern.role)
    other_role = role_deployment(spec, "prefill" if pattern.role == "decode" else "decode")
    longer = dataclasses.replace(spec, name=f"{spec.name}-big")
    assert pattern.matches_event(spec, event(line, namespace=spec.namespace, container=ours))
    neighbours = [event(line, namespace="team-b", container=ours),
                  event(line, namespace=spec.namespace, container=role_deployment(longer, pattern.role)),
                  event(line, namespace=spec.namespace, container=other_role),
                  event(line, namespace=spec.namespace, container="reverse-proxy", pod=f"{ours}-6f8d9c7b5-klmno"),
                  event(line, namespace=spec.namespace, container=ours, pod="debug-shell")]
    assert [pattern.matches_event(spec, e) for e in neighbours] == [False] * len(neighbours)
    assert pattern.matches_event(longer, neighbours[1]) and not pattern.matches_event(longer, event(
        line, namespace=spec.namespace, container=ours))
    healthy = [other for other in ALL_LINES if not pattern.matches(other)]
    assert not any(pattern.matches_event(spec, event(other, namespace=spec.namespace, container=ours))
                   for other in healthy)


def test_endpoint_pattern_is_json_on_the_container_insights_fields(spec: DpdSpec) -> None:
    assert KV_NOT_RETRIEVED.endpoint_pattern(spec) == (
        '{ ($.kubernetes.namespace_name = "default") && ($.kubernetes.container_name = "decode-dpd-test") && '
        '($.kubernetes.pod_name = "decode-dpd-test-*") && ($.log = "*Retrieved 0 out of*") && '
        '($.log != "*out of 0 required*") }')
    for pattern in LOG_PATTERNS:
        text = pattern.endpoint_pattern(spec)
        assert "%" not in text and len(text) <= 1024  # no regex: CloudWatch allows five per log group
        assert pattern.endpoint_metric(spec) == f"{pattern.metric_name}/default/dpd-test"
        assert not any(c in pattern.endpoint_metric(spec) for c in ":*$")  # CloudWatch metric-name pattern


def test_pd_buffer_retries_warn_only_when_a_chunk_waits_a_second_each_minute() -> None:
    """LMCache logs the line on every 10 ms retry per chunk (pd_backend.py l.537-543): a short loop is
    back-pressure, so the alarm is a warning from 100 lines a minute, never a page on one loop."""
    from hyperpod_dpd.observability.rule import Severity

    retry_ms = 10
    assert PD_BUFFER_FULL.severity is Severity.WARNING
    assert PD_BUFFER_FULL.threshold == 100 == 1000 // retry_ms
    assert "l.537-543" in PD_BUFFER_FULL.source and "10 ms" in PD_BUFFER_FULL.source


def test_a_slow_kv_store_names_the_decoders_buffer_as_well_as_efa() -> None:
    """The store time includes the wait in _remote_allocate for the decoder's buffer, so EFA is one cause of two."""
    assert "EFA" in KV_TRANSFER_BELOW_1_GBPS.failure and "PD buffer" in KV_TRANSFER_BELOW_1_GBPS.failure
    assert "_remote_allocate" in KV_TRANSFER_BELOW_1_GBPS.failure
    assert "kv_cache.pd_buffer_size" in KV_TRANSFER_BELOW_1_GBPS.fix and "efa" in KV_TRANSFER_BELOW_1_GBPS.fix
