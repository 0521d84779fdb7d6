"""The DPD failures that only logs show, as CloudWatch Logs filter patterns.

LMCache 0.4.3 counts none of these in a metric: the decoder retries a full PD buffer every 10 ms
with only a warning, a decoder whose lookup hit but whose load failed logs "Retrieved 0 out of N"
(a lookup miss, e.g. a hash-seed mismatch, never calls retrieve(): DpdKvNotTransferred covers it), and the
prefiller's per-request "Stored ... throughput" line is the only place a transfer below 1 GB/s (NIXL
not on EFA) shows. Patterns use quoted terms (all must appear) and ``-"..."`` exclusions, so they
need no regular expression (CloudWatch allows few per log group).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from hyperpod_dpd.observability.rule import Severity

# The CloudWatch namespace the metric filters publish to.
METRIC_NAMESPACE = "HyperPodDPD"


@dataclass(frozen=True, kw_only=True)
class LogPattern:
    """A CloudWatch Logs filter pattern and the alarm on the metric it counts.

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


PD_BUFFER_FULL = LogPattern(
    name="PdBufferFull", metric_name="PdBufferFull",
    terms=("Failed to allocate memory object",), excluded=(), severity=Severity.CRITICAL,
    failure="the decoder's PD buffer is full: prefill waits for it and TTFT climbs",
    fix="Raise kv_cache.pd_buffer_size (lower the decoder's gpu_memory_utilization if GPU memory is short) "
        "or add decode replicas.",
    source="LMCache 0.4.3 pd_backend.py: the receiver logs it on every 10 ms retry while allocation fails")
KV_NOT_RETRIEVED = LogPattern(
    name="KvNotRetrieved", metric_name="KvNotRetrieved",
    terms=("Retrieved 0 out of",), excluded=("out of 0 required",), severity=Severity.CRITICAL,
    failure="the decoder's lookup found the transferred KV cache but could not load it, and recomputed the prompt",
    fix="Read the decoder's log around the line (LMCache names the failed chunk), check the decoder's PD buffer "
        "(PdBufferFull) and EFA; a hash-seed or role mismatch never reaches retrieve() and shows as "
        "DpdKvNotTransferred instead.",
    source="LMCache 0.4.3 v1/cache_engine.py retrieve log line, printed only after a lookup hit "
           "(integration/vllm/vllm_v1_adapter.py); AWS DPD troubleshooting: 'Retrieved 0 out of N'")
KV_TRANSFER_BELOW_1_GBPS = LogPattern(
    name="KvTransferBelow1GBps", metric_name="KvTransferBelow1GBps",
    terms=("Stored", "out of total", "throughput: 0."), excluded=("Stored 0 out of",), severity=Severity.WARNING,
    failure="KV transfers run below 1 GB/s: NIXL is not using EFA",
    fix="Keep both roles on EFA nodes in one AZ, check `kubectl describe node | grep efa`, and use an image with "
        "the EFA libfabric provider.",
    source="LMCache 0.4.3 v1/cache_engine.py store log line; AWS DPD troubleshooting: 'below 1 GB/s'",
    threshold=5, datapoints=3, periods=5)

LOG_PATTERNS = (PD_BUFFER_FULL, KV_NOT_RETRIEVED, KV_TRANSFER_BELOW_1_GBPS)
