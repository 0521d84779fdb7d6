"""The DPD failures that only logs show, as CloudWatch Logs filter patterns.

LMCache 0.4.3 counts none of these in a metric: the decoder retries a full PD buffer every 10 ms
with only a warning, a decoder whose lookup hit but whose load failed logs "Retrieved 0 out of N"
(a lookup miss, e.g. a hash-seed mismatch, never calls retrieve(): DpdKvNotTransferred covers it), and the
prefiller's per-request "Stored ... throughput" line is the only place a transfer below 1 GB/s (NIXL
not on EFA) shows. Patterns use quoted terms (all must appear) and ``-"..."`` exclusions, so they
need no regular expression (CloudWatch allows few per log group).

Each alarm watches one endpoint's pods, not the cluster: Container Insights' Fluent Bit ships each
container line as a JSON event whose ``log`` field holds the line and whose ``kubernetes`` object
names the pod (AWS docs, "Set up Fluent Bit as a DaemonSet to send logs to CloudWatch Logs": the
``kubernetes`` filter with ``Merge_Log On``, ``Labels Off``; aws-samples/amazon-cloudwatch-container-insights
``fluent-bit.yaml``; the record carries ``kubernetes.pod_name``, ``namespace_name`` and ``container_name``).
:meth:`LogPattern.endpoint_pattern` matches those fields with a JSON filter pattern: the namespace, the
role's container (named as its Deployment, ``<role>-<name>``, so ``dpd`` never matches ``dpd-big``)
and the pod of that Deployment, and the line's terms as ``*term*`` wildcards on ``$.log`` (CloudWatch
allows ``*`` at the start and the end of a JSON string value: aws-cdk-lib ``aws-logs/lib/pattern.ts``,
``FilterPattern.stringValue``).
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.contracts.operator import role_deployment
from hyperpod_dpd.observability.rule import Severity
from hyperpod_dpd.spec import DpdSpec

# The CloudWatch namespace the metric filters publish to.
METRIC_NAMESPACE = "HyperPodDPD"


@dataclass(frozen=True, kw_only=True)
class LogPattern:
    """A CloudWatch Logs filter pattern and the alarm on the metric it counts.

    :param role: ``prefill`` or ``decode``: the role whose worker container prints the line.
    :param threshold: occurrences per minute that breach. :param datapoints: breaching minutes out of
        ``periods`` that raise the alarm.
    """

    name: str
    metric_name: str
    terms: tuple[str, ...]
    excluded: tuple[str, ...]
    severity: Severity
    failure: str
    fix: str
    source: str
    role: str
    threshold: int = 1
    datapoints: int = 2
    periods: int = 3

    @property
    def filter_pattern(self) -> str:
        return " ".join([*(f'"{t}"' for t in self.terms), *(f'-"{t}"' for t in self.excluded)])

    def matches(self, line: str) -> bool:
        """What CloudWatch does with the pattern: every term present, no excluded term present.

        Kept beside the pattern so tests prove each pattern on the log lines it must (and must not) catch.
        """
        parsed = shlex.split(self.filter_pattern)
        wanted = [p for p in parsed if not p.startswith("-")]
        unwanted = [p[1:] for p in parsed if p.startswith("-")]
        return all(t in line for t in wanted) and not any(t in line for t in unwanted)

    def endpoint_fields(self, spec: DpdSpec) -> dict[str, str]:
        """The Container Insights fields an event of ``spec``'s ``role`` container carries, as wildcard values."""
        container = role_deployment(spec, self.role)
        return {"$.kubernetes.namespace_name": spec.namespace, "$.kubernetes.container_name": container,
                "$.kubernetes.pod_name": f"{container}-*"}

    def endpoint_pattern(self, spec: DpdSpec) -> str:
        """The JSON filter pattern for ``spec``'s pods of this role: their fields, then the line's terms."""
        equal = [*self.endpoint_fields(spec).items(), *(("$.log", f"*{t}*") for t in self.terms)]
        clauses = [*(f'($.{k[2:]} = "{v}")' for k, v in equal), *(f'($.log != "*{t}*")' for t in self.excluded)]
        return "{ " + " && ".join(clauses) + " }"

    def endpoint_metric(self, spec: DpdSpec) -> str:
        """The metric one endpoint's filter counts into (namespaces and names hold no '/')."""
        return f"{self.metric_name}/{spec.namespace}/{spec.name}"

    def matches_event(self, spec: DpdSpec, event: Mapping[str, Any]) -> bool:
        """What CloudWatch does with :meth:`endpoint_pattern` on one JSON log event: each field equal to its value,
        ``*`` matching any text at the value's start or end, and no excluded term in ``log``.

        Kept beside the pattern so tests prove it on Container Insights events of this and other endpoints.
        """
        def field(path: str) -> Any:
            value: Any = event
            for key in path[2:].split("."):
                value = value.get(key) if isinstance(value, Mapping) else None
            return value

        def equal(path: str, wanted: str) -> bool:
            have = field(path)
            return isinstance(have, str) and fnmatch.fnmatchcase(have, wanted.replace("[", "[[]"))

        wanted = [*self.endpoint_fields(spec).items(), *(("$.log", f"*{t}*") for t in self.terms)]
        return all(equal(k, v) for k, v in wanted) and not any(equal("$.log", f"*{t}*") for t in self.excluded)


PD_BUFFER_FULL = LogPattern(
    name="PdBufferFull", metric_name="PdBufferFull",
    terms=("Failed to allocate memory object",), excluded=(), severity=Severity.WARNING,
    failure="the decoder's PD buffer stays full: prefill waits for it and TTFT climbs",
    fix="Raise kv_cache.pd_buffer_size (lower the decoder's gpu_memory_utilization if GPU memory is short) "
        "or add decode replicas.",
    # One chunk waiting a second is already 100 lines: short retry loops are back-pressure, not failure, so the
    # alarm is a warning from 100 lines a minute (observability audit 2, T4-13).
    source="LMCache 0.4.3 v1/storage_backend/pd_backend.py l.537-543: the receiver logs it on every 10 ms retry "
           "per chunk while allocation fails",
    role="decode", threshold=100)
KV_NOT_RETRIEVED = LogPattern(
    name="KvNotRetrieved", metric_name="KvNotRetrieved",
    terms=("Retrieved 0 out of",), excluded=("out of 0 required",), severity=Severity.CRITICAL,
    failure="the decoder's lookup found the transferred KV cache but could not load it, and recomputed the prompt",
    fix="Read the decoder's log around the line (LMCache names the failed chunk), check the decoder's PD buffer "
        "(PdBufferFull) and EFA; a hash-seed or role mismatch never reaches retrieve() and shows as "
        "DpdKvNotTransferred instead.",
    source="LMCache 0.4.3 v1/cache_engine.py retrieve log line, printed only after a lookup hit "
           "(integration/vllm/vllm_v1_adapter.py); AWS DPD troubleshooting: 'Retrieved 0 out of N'",
    role="decode")
KV_TRANSFER_BELOW_1_GBPS = LogPattern(
    name="KvTransferBelow1GBps", metric_name="KvTransferBelow1GBps",
    terms=("Stored", "out of total", "throughput: 0."), excluded=("Stored 0 out of",), severity=Severity.WARNING,
    failure=("KV stores run below 1 GB/s: NIXL is not using EFA, or the put waits for room in the decoder's PD "
             "buffer (the store time includes the wait in _remote_allocate)"),
    fix="If the decoder logs PdBufferFull at the same time, the buffer is the cause: raise kv_cache.pd_buffer_size "
        "or add decode replicas. Otherwise keep both roles on EFA nodes in one AZ, check `kubectl describe node | "
        "grep efa`, and use an image with the EFA libfabric provider.",
    source="LMCache 0.4.3 v1/cache_engine.py store log line (its time spans pd_backend.py's _remote_allocate "
           "wait for the receiver's buffer); AWS DPD troubleshooting: 'below 1 GB/s'",
    role="prefill", threshold=5, datapoints=3, periods=5)

LOG_PATTERNS = (PD_BUFFER_FULL, KV_NOT_RETRIEVED, KV_TRANSFER_BELOW_1_GBPS)
