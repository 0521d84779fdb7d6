"""Service-level objectives and alert thresholds for one endpoint's DPD alerts.

Both are optional: with neither, the alerts use the defaults below, each derived in docs/commands.md's
observability section, and no latency rule is rendered (a latency alert needs a target the user owns).
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.spec._frozen import Frozen

# One 8k-token KV transfer on p5 takes single-digit milliseconds over EFA; 0.23 GB per rank at the
# 1 GB/s that AWS's troubleshooting page names as "EFA not used" takes ~0.23 s.
DEFAULT_KV_STORE_P90_SECONDS = 0.25
# llm-d's error-ratio alerts: 5% for 10 minutes (warning), 20% for 5 minutes (critical).
DEFAULT_ERROR_RATIO = 0.05
DEFAULT_ERROR_RATIO_CRITICAL = 0.2
# Dynamo's and AWS's router queue panels turn yellow at 10 waiting requests.
DEFAULT_PREFILL_QUEUE = 10
# Dynamo: decode KV usage above 90% means the workers are at capacity.
DEFAULT_DECODE_KV_CACHE_USAGE = 0.9
# Ratio rules stay silent below this request rate: 0.1/s is 30 requests in a 5-minute window, enough
# that one failed request cannot read as a 5% error ratio.
DEFAULT_MIN_REQUESTS_PER_SECOND = 0.1
# The share of requests (of output tokens, for TPOT) that must meet each SLO target: 99% leaves a 1% error
# budget, which the burn-rate alerts' fastest tier (14.4x, Google's SRE workbook ch.5) can still exceed.
DEFAULT_SLO_OBJECTIVE = 0.99


@dataclass(frozen=True, kw_only=True)
class SloSpec(Frozen):
    """Latency targets and the objective they are held to.

    Each target adds an alert on its p90 over 5 minutes and multi-window burn-rate alerts on its error
    budget; the block alone adds burn-rate alerts on server errors (5xx).

    :param ttft_ms: end-to-end time to first token at the router (prefill, KV transfer, first decode step).
        :default: - no TTFT alert
    :param tpot_ms: time per output token (inter-token latency) on the decoder. :default: - no TPOT alert
    :param objective: the share of requests that must meet the TTFT target and not fail with a 5xx, and
        of output tokens that must meet the TPOT target; 1 - objective is the error budget the burn-rate
        alerts spend. :default: 0.99
    """

    ttft_ms: int | None = None
    tpot_ms: int | None = None
    objective: float = DEFAULT_SLO_OBJECTIVE


@dataclass(frozen=True, kw_only=True)
class AlertThresholds(Frozen):
    """Per-endpoint overrides of the alert thresholds.

    :param kv_store_p90_seconds: p90 of the prefiller's LMCache put (decoder buffer wait plus NIXL write).
        :default: 0.25
    :param error_ratio: failed over all POST invocations per role, warning. :default: 0.05
    :param error_ratio_critical: the same, critical. :default: 0.2
    :param prefill_queue: requests waiting on a prefiller (router in-flight is compared with the prefill
        pods x max_num_seqs instead). :default: 10
    :param decode_kv_cache_usage: the decoder's vLLM KV cache usage, 0-1. :default: 0.9
    :param min_requests_per_second: traffic floor below which ratio rules stay silent. :default: 0.1
    :param runbook_base_url: the absolute URL where ``docs/alerts.md`` is published (for example the
        repository's file at the released tag); each alert's ``runbook_url`` is this URL and its section's
        anchor, so the link in an e-mailed alert opens. :default: - the repository path ``docs/alerts.md``
    """

    kv_store_p90_seconds: float = DEFAULT_KV_STORE_P90_SECONDS
    error_ratio: float = DEFAULT_ERROR_RATIO
    error_ratio_critical: float = DEFAULT_ERROR_RATIO_CRITICAL
    prefill_queue: int = DEFAULT_PREFILL_QUEUE
    decode_kv_cache_usage: float = DEFAULT_DECODE_KV_CACHE_USAGE
    min_requests_per_second: float = DEFAULT_MIN_REQUESTS_PER_SECOND
    runbook_base_url: str | None = None
