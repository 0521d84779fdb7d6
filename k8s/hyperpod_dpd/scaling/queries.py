"""The PromQL of SLO autoscaling's triggers: one series each, contracted series only, and a fallback.

KEDA's Prometheus scaler reads an empty result, and a NaN or Inf, as 0 (``ignoreNullValues`` defaults to true
and the HyperPod CRD cannot change it: kedacore/keda@8b4f083c pkg/scalers/prometheus_scaler.go:267-271 and
:298-301, ``ExecutePromQuery``), so over an ``Average`` target a mistyped or absent series would ask for 0
replicas: the role would drop to ``min_replicas``. Every query therefore ends in ``or vector(<fallback>)``:
the demand query's fallback holds the planned replicas (KEDA and the HPA then ask for exactly that many), the
floors' fallback is 0 (no opinion; the demand trigger decides).
"""

from __future__ import annotations

from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.selectors import EndpointSelectors, select
from hyperpod_dpd.spec import DpdSpec

# The quantile the SLO-ratio floor reads: the p90 the spec's SLO alerts watch (observability/slo.py).
SLO_QUANTILE = 0.9
# Prometheus' advice for rate(): a range of at least four scrapes, so one missed scrape does not empty it.
SCRAPES_PER_RANGE = 4
# The operator's default scrape interval (MetricsSpec.scrape_interval_seconds unset).
DEFAULT_SCRAPE_S = 15
MIN_RANGE_S = 60


def rate_range(spec: DpdSpec) -> str:
    """The range of every ``rate()``: four scrapes, at least a minute (``[60s]`` at the default scrape)."""
    scrape = spec.metrics.scrape_interval_seconds or DEFAULT_SCRAPE_S
    return f"[{max(MIN_RANGE_S, SCRAPES_PER_RANGE * scrape)}s]"


def number(value: float) -> str:
    """``value`` as PromQL reads it back exactly: a whole number without a fraction, else Python's shortest repr."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _with_fallback(expr: str, fallback: float) -> str:
    return f"({expr}) or vector({number(fallback)})"


def _pods(spec: DpdSpec, role: str) -> str:
    s = EndpointSelectors.of(spec)
    return s.prefill if role == "prefill" else s.decode


def demand(spec: DpdSpec, role: str, *, fallback: float) -> str:
    """Tokens per second the role's replicas must process, in total (an ``Average`` target divides it).

    Prefill: the prompt tokens the prefillers compute, vLLM's own count of a prompt less every cached token,
    local prefix cache and connector (LMCache) alike, counted once per finished prefill
    (``vllm:prompt_tokens_by_source_total{source="local_compute"}``: vllm==0.19.0 v1/metrics/stats.py:282-302
    ``computed += prompt_len - num_cached_tokens``, exported per source by v1/metrics/loggers.py:601-613 and
    :1119-1123). ``prompt_tokens_total`` less ``prefix_cache_hits_total`` is not that: the hits count local
    GPU hits only, and are counted again on every scheduling attempt of a request still waiting for KV room,
    so that difference reads low exactly when the prefillers are overloaded. The capacity is in the same unit:
    the advisor prefills whole prompts, every token computed. Only prompts at or above ``routing.threshold``
    reach a prefiller, so only prefill-pod series are read.
    Decode: the output tokens the decoders generate.
    """
    pods, window = _pods(spec, role), rate_range(spec)
    if role == "prefill":
        computed = select(m.PROMPT_TOKENS_BY_SOURCE.name, pods, f'source="{m.LOCAL_COMPUTE}"')
        return _with_fallback(f"sum(rate({computed}{window}))", fallback)
    return _with_fallback(f"sum(rate({select(m.GENERATION_TOKENS.name, pods)}{window}))", fallback)


def queue(spec: DpdSpec, role: str) -> str:
    """Requests waiting on the role's engines, in total.

    On a decoder this counts the requests whose KV is still arriving from a prefiller too (vllm==0.19.0
    v1/core/sched/scheduler.py:790-791 parks a ``WAITING_FOR_REMOTE_KVS`` request in ``skipped_waiting``, which
    :1957 counts as waiting): transfers in flight read as waiting. With decode held at
    one replica the floor changes nothing.
    """
    return _with_fallback(f"sum({select(m.REQUESTS_WAITING.name, _pods(spec, role))})", 0)


def slo_ratio(spec: DpdSpec, role: str, *, target_s: float) -> str:
    """The role's observed p90 latency over its target: TTFT on the prefillers, inter-token latency on the decoders.

    The prefiller's own TTFT (queue and prefill) is only part of the router's, so for prefill ``target_s`` is
    the prefiller's share of the TTFT target (the compiler's ``prefill_share_s``: the target less the KV
    transfer and the decoder's first step), not the whole target, over which it would fire late.
    With no traffic the quantile is NaN, which ``> 0`` drops, so the fallback answers.
    """
    family = m.TTFT if role == "prefill" else m.INTER_TOKEN_LATENCY
    buckets = f"sum by (le) (rate({select(family.bucket(), _pods(spec, role))}{rate_range(spec)}))"
    return _with_fallback(f"histogram_quantile({SLO_QUANTILE}, {buckets}) / {number(target_s)} > 0", 0)
