"""The metrics contract: every series the DPD alerts and dashboard read, who exports it, where the name was read.

Versions are the ones the worker images bundle (vLLM 0.19.0, LMCache 0.4.3; NIXL >= 1.0.1 in the DLC
image). A name that changes upstream breaks a rule silently (the series is just absent), so every name lives here once,
with its provenance, and the ``Dpd*MetricsAbsent`` alerts catch a scrape that returns nothing.
vLLM's and LMCache's families are checked against ``data/metrics-contract.json``, which
``scripts/metrics_contract.py`` derives from their sdists on PyPI (bucket bounds come from there);
the router's, the sidecar's, kube-state-metrics' and DCGM's are documented here, and a family only
AWS's dashboard names is ``verified=False``, which every rule reading it says in an annotation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources
from typing import Any

CONTRACT_FILE = "metrics-contract.json"
# vLLM 0.19.0 serves prometheus_client's multiprocess registry only when this is set
# (vllm/v1/metrics/prometheus.py); LMCache 0.4.3's logger, in the worker processes, writes there
# (lmcache/observability.py). The directory must exist before vLLM starts: /tmp does in every image,
# and a restarted container starts with a fresh one, as vLLM asks.
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
METRICS_DIR = "/tmp"


@cache
def derived_families() -> dict[str, Any]:
    """vLLM's and LMCache's metric families as ``scripts/metrics_contract.py`` derived them."""
    text = resources.files("hyperpod_dpd.data").joinpath(CONTRACT_FILE).read_text(encoding="utf-8")
    families: dict[str, Any] = json.loads(text)["families"]
    return families


def derived_buckets(family: str) -> tuple[float, ...]:
    """The finite bucket bounds of a histogram vLLM defines with literal buckets."""
    buckets = derived_families()[family]["buckets"]
    if not isinstance(buckets, list):
        raise ValueError(f"{family}'s buckets are computed at run time, not in the contract")
    return tuple(float(b) for b in buckets)


class Exporter(Enum):
    """Which process exposes the series; the HyperPod pipeline adds ``resource_name`` and friends to all."""

    ROUTER = "HyperPod inference router"
    SIDECAR = "HyperPod reverse-proxy sidecar (port 9113)"
    VLLM = "vLLM 0.19.0 engine (the model container's /metrics)"
    LMCACHE = "LMCache 0.4.3 (served on vLLM's /metrics through the multiprocess registry)"
    KUBE_STATE_METRICS = "kube-state-metrics (run by the HyperPod observability add-on)"
    DCGM = "NVIDIA DCGM exporter (run by the HyperPod observability add-on)"


class Kind(Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One exported series family. ``name`` is what PromQL selects (``_total`` included for counters).

    :param first_sample: when the exporter creates the series only on a first event, what that event is;
        until then the family is absent from a healthy workspace. :default: "" - the exporter creates it at start
    """

    name: str
    kind: Kind
    exporter: Exporter
    provenance: str
    verified: bool = True
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    first_sample: str = ""

    def bucket(self) -> str:
        """The ``_bucket`` series of a histogram, which ``histogram_quantile`` reads."""
        if self.kind is not Kind.HISTOGRAM:
            raise ValueError(f"{self.name} is a {self.kind.value}, not a histogram")
        return f"{self.name}_bucket"


_AWS_DASHBOARD = ("AWS's HyperPod Inference dashboard v1.3.0 (aws/sagemaker-hyperpod-cluster-setup, "
                  "observability-assets-creation/dashboards/templates/inference.json); no doc or source defines it")
_VLLM = "vllm 0.19.0 wheel, vllm/v1/metrics/loggers.py"
_LMCACHE = "lmcache 0.4.3 wheel, lmcache/observability.py"
_SIDECAR = "SageMaker docs, HyperPod inference observability: invocation metrics"

DPD_DISAGGREGATED = Metric(name="dpd_routing_disaggregated_total", kind=Kind.COUNTER, exporter=Exporter.ROUTER,
                           provenance=_AWS_DASHBOARD, verified=False)
DPD_LOCAL = Metric(name="dpd_routing_local_total", kind=Kind.COUNTER, exporter=Exporter.ROUTER,
                   provenance=_AWS_DASHBOARD, verified=False)
DPD_FALLBACK = Metric(name="dpd_routing_fallback_total", kind=Kind.COUNTER, exporter=Exporter.ROUTER,
                      provenance=_AWS_DASHBOARD, verified=False)
DPD_INFLIGHT_PREFILL = Metric(name="dpd_routing_inflight_prefill", kind=Kind.GAUGE, exporter=Exporter.ROUTER,
                              provenance=_AWS_DASHBOARD, verified=False)
DPD_E2E_TTFT = Metric(name="dpd_e2e_ttft_seconds", kind=Kind.HISTOGRAM, exporter=Exporter.ROUTER,
                      provenance=_AWS_DASHBOARD, verified=False)

MODEL_INVOCATIONS = Metric(name="model_invocations_total", kind=Kind.COUNTER, exporter=Exporter.SIDECAR,
                           provenance=_SIDECAR)
MODEL_ERRORS = Metric(name="model_errors_total", kind=Kind.COUNTER, exporter=Exporter.SIDECAR, provenance=_SIDECAR,
                      first_sample="the sidecar creates a status's error series with the first failed request")

REQUESTS_RUNNING = Metric(name="vllm:num_requests_running", kind=Kind.GAUGE, exporter=Exporter.VLLM,
                          provenance=_VLLM)
REQUESTS_WAITING = Metric(name="vllm:num_requests_waiting", kind=Kind.GAUGE, exporter=Exporter.VLLM,
                          provenance=_VLLM)
KV_CACHE_USAGE = Metric(name="vllm:kv_cache_usage_perc", kind=Kind.GAUGE, exporter=Exporter.VLLM,
                        provenance=f"{_VLLM} (1 means 100 percent)")
PREEMPTIONS = Metric(name="vllm:num_preemptions_total", kind=Kind.COUNTER, exporter=Exporter.VLLM, provenance=_VLLM)
PROMPT_TOKENS_BY_SOURCE = Metric(
    name="vllm:prompt_tokens_by_source_total", kind=Kind.COUNTER, exporter=Exporter.VLLM,
    provenance=f"{_VLLM}; label source is local_compute, local_cache_hit or external_kv_transfer")
TTFT = Metric(name="vllm:time_to_first_token_seconds", kind=Kind.HISTOGRAM, exporter=Exporter.VLLM,
              provenance=_VLLM)
# The finite bucket bounds of vLLM 0.19.0's inter-token latency histogram: a quantile below the
# first bound cannot be told apart from it, so a TPOT SLO under 10 ms would always read as breached.
INTER_TOKEN_LATENCY = Metric(name="vllm:inter_token_latency_seconds", kind=Kind.HISTOGRAM, exporter=Exporter.VLLM,
                             provenance=_VLLM, buckets=derived_buckets("vllm:inter_token_latency_seconds"))
# Counted per request when it finishes (vllm/v1/metrics/loggers.py l.661), with 1-2-5 buckets up to
# max_model_len (build_1_2_5_buckets): the requests above a bound that clears routing.threshold are the
# long prompts this pod served, counted per pod.
REQUEST_PROMPT_TOKENS = Metric(name="vllm:request_prompt_tokens", kind=Kind.HISTOGRAM, exporter=Exporter.VLLM,
                               provenance=f"{_VLLM} (buckets build_1_2_5_buckets(max_model_len))")
# Every prompt token a pod's engine was given (vllm/v1/metrics/loggers.py l.591) and the ones its prefix cache
# already held (l.516, counted in tokens). Their difference is not what the engine computed: the hits count
# local GPU hits only and are counted again each time a waiting request is rescheduled; SLO autoscaling reads
# PROMPT_TOKENS_BY_SOURCE's local_compute series instead (scaling/queries.py).
PROMPT_TOKENS = Metric(name="vllm:prompt_tokens_total", kind=Kind.COUNTER, exporter=Exporter.VLLM, provenance=_VLLM)
PREFIX_CACHE_HITS = Metric(name="vllm:prefix_cache_hits_total", kind=Kind.COUNTER, exporter=Exporter.VLLM,
                           provenance=f"{_VLLM} (tokens served from the prefix cache)")
GENERATION_TOKENS = Metric(name="vllm:generation_tokens_total", kind=Kind.COUNTER, exporter=Exporter.VLLM,
                           provenance=_VLLM)
PREFILL_TIME = Metric(name="vllm:request_prefill_time_seconds", kind=Kind.HISTOGRAM, exporter=Exporter.VLLM,
                      provenance=_VLLM)
# Per finished request, scheduled minus queued (vllm/v1/metrics/loggers.py l.853): the wait for a batch slot.
QUEUE_TIME = Metric(name="vllm:request_queue_time_seconds", kind=Kind.HISTOGRAM, exporter=Exporter.VLLM,
                    provenance=_VLLM)

KV_STORE_PUT_TIME = Metric(
    name="lmcache:store_put_time", kind=Kind.HISTOGRAM, exporter=Exporter.LMCACHE,
    provenance=f"{_LMCACHE}; on the prefiller the put waits for the decoder's buffer and the NIXL write "
               "(pd_backend.py, by code reading). Reaches vLLM's /metrics only through PROMETHEUS_MULTIPROC_DIR, "
               "which the chart renders (METRICS_DIR_ENV); that it arrives is read from the code, not seen on "
               "a cluster: verify --smoke checks it",
    verified=False,
    first_sample=("LMCache creates the histogram's children on their first observation (_log_histogram, "
                  "lmcache/observability.py l.1654-1657): the first long prompt a prefiller stores"))

_KSM = "kube-state-metrics v2 metric docs (deployment-metrics.md, pod-metrics.md)"
DEPLOYMENT_AVAILABLE = Metric(name="kube_deployment_status_replicas_available", kind=Kind.GAUGE,
                              exporter=Exporter.KUBE_STATE_METRICS, provenance=_KSM,
                              labels=("namespace", "deployment"))
DEPLOYMENT_WANTED = Metric(name="kube_deployment_spec_replicas", kind=Kind.GAUGE,
                           exporter=Exporter.KUBE_STATE_METRICS, provenance=_KSM, labels=("namespace", "deployment"))
CONTAINER_RESTARTS = Metric(name="kube_pod_container_status_restarts_total", kind=Kind.COUNTER,
                            exporter=Exporter.KUBE_STATE_METRICS, provenance=_KSM,
                            labels=("namespace", "pod", "container"))
# The value is the code of the last Xid the GPU raised (0 when none). The pod and namespace labels come
# from dcgm-exporter's Kubernetes pod mapping; that the add-on enables it is not documented.
GPU_XID = Metric(name="DCGM_FI_DEV_XID_ERRORS", kind=Kind.GAUGE, exporter=Exporter.DCGM,
                 provenance="NVIDIA dcgm-exporter default counters (dcp-metrics-included.csv); AWS's HyperPod "
                            "alert rules (GPUXidError) read it", verified=False,
                 labels=("gpu", "Hostname", "namespace", "pod"))

# The ``source`` label value of transferred prompt tokens (vLLM 0.19.0 PromptTokenStats).
EXTERNAL_KV_TRANSFER = "external_kv_transfer"
LOCAL_COMPUTE = "local_compute"
LOCAL_CACHE_HIT = "local_cache_hit"

ALL_METRICS = (DPD_DISAGGREGATED, DPD_LOCAL, DPD_FALLBACK, DPD_INFLIGHT_PREFILL, DPD_E2E_TTFT, MODEL_INVOCATIONS,
               MODEL_ERRORS, REQUESTS_RUNNING, REQUESTS_WAITING, KV_CACHE_USAGE, PREEMPTIONS, PROMPT_TOKENS_BY_SOURCE,
               TTFT, INTER_TOKEN_LATENCY, PREFILL_TIME, REQUEST_PROMPT_TOKENS, PROMPT_TOKENS, PREFIX_CACHE_HITS,
               GENERATION_TOKENS, KV_STORE_PUT_TIME, DEPLOYMENT_AVAILABLE, DEPLOYMENT_WANTED, CONTAINER_RESTARTS,
               GPU_XID)


def series_names(metric: Metric) -> tuple[str, ...]:
    """The series names a query may select for ``metric`` (a histogram's ``_bucket``, ``_sum`` and ``_count``)."""
    if metric.kind is Kind.HISTOGRAM:
        return tuple(f"{metric.name}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return (metric.name,)
