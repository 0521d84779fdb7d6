"""Metrics, SLOs and alert thresholds: the scrape port and interval, and thresholds an alert could never fire
on, or always would.

See ``docs/checks.md`` and ``docs/alerts.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.observability.alerts import RATE_WINDOW_SECONDS
from hyperpod_dpd.observability.metrics import INTER_TOKEN_LATENCY
from hyperpod_dpd.observability.slo import FASTEST, tpot_bound
from hyperpod_dpd.spec.observability import DEFAULT_SLO_OBJECTIVE, AlertThresholds
from hyperpod_dpd.validation.context import Finding, RuleContext, problem
from hyperpod_dpd.validation.naming import HTTP_PATH

# The HyperPod reverse-proxy sidecar's metrics port, in the same pod as vLLM (AWS's inference observability
# page: http://pod-ip:9113/metrics).
SIDECAR_METRICS_PORT = 9113
# The TPOT alert reads vLLM's inter-token latency histogram, whose lowest bucket is 10 ms: every token
# faster than that lands in it and histogram_quantile interpolates to just under 10 ms, so a smaller
# target reads as breached whenever tokens flow. The TTFT alert reads the router's histogram, whose
# buckets no source documents; 10 ms is below any prefill of a prompt long enough to disaggregate.
MIN_TPOT_MS = round(INTER_TOKEN_LATENCY.buckets[0] * 1000)
MIN_TTFT_MS = 10
# rate() over the 5-minute window needs at least two samples, and one missed scrape must not empty it:
# four samples per window, i.e. at most 75 s between scrapes.
SAMPLES_PER_WINDOW = 4
MAX_SCRAPE_INTERVAL_SECONDS = RATE_WINDOW_SECONDS // SAMPLES_PER_WINDOW
ABSOLUTE_URL = re.compile(r"^https?://[^/\s]+(/\S*)?$")


def observability(ctx: RuleContext) -> Iterator[Finding]:
    metrics = ctx.spec.metrics
    if metrics.scrape_interval_seconds is not None and not 5 <= metrics.scrape_interval_seconds <= 300:
        yield problem("metrics.scrape_interval_seconds", metrics.scrape_interval_seconds, "must be 5-300",
                      "use e.g. 15")
    if metrics.enabled and metrics.model_metrics_port is None and 1 <= ctx.spec.port < 1024:
        yield problem("port", ctx.spec.port, "is where the operator scrapes vLLM's /metrics, and the CRD's "
                      "metrics port must be 1024-65535", "use e.g. 8000, or set metrics.enabled: false")
    if metrics.model_metrics_port is not None and not 1024 <= metrics.model_metrics_port <= 65535:
        yield problem("metrics.model_metrics_port", metrics.model_metrics_port, "must be 1024-65535",
                      f"use the vLLM port, {ctx.spec.port}")
    elif metrics.model_metrics_port is not None and metrics.model_metrics_port != ctx.spec.port:
        yield SpecWarning(code="MetricsPortDiffers", field="metrics.model_metrics_port",
                      message=f"{metrics.model_metrics_port} is not port {ctx.spec.port}, where vLLM serves /metrics; "
                              "the operator would scrape a port nothing serves metrics on (leave it unset)")
    if metrics.model_metrics_path is not None and not HTTP_PATH.match(metrics.model_metrics_path):
        yield problem("metrics.model_metrics_path", metrics.model_metrics_path, "must be an absolute URL path",
                      "use '/metrics'")


def ports(ctx: RuleContext) -> Iterator[Finding]:
    """The sidecar's metrics port is taken in every model pod."""
    spec = ctx.spec
    if spec.port == SIDECAR_METRICS_PORT:
        yield Problem(field="port", value=spec.port, message="is where the operator's reverse-proxy sidecar serves "
                      "its metrics in the same pod, so vLLM could not bind it", fix="use e.g. 8000")
    if spec.metrics.model_metrics_port == SIDECAR_METRICS_PORT:
        yield Problem(field="metrics.model_metrics_port", value=SIDECAR_METRICS_PORT,
                      message="is the sidecar's metrics port: the operator would scrape the sidecar twice and vLLM "
                              "never, so every vllm:* series is absent",
                      fix=f"leave it unset (vLLM's port, {spec.port})")


def _positive(field: str, value: float, fix: str) -> Iterator[Problem]:
    if value <= 0:
        yield Problem(field=field, value=value, message="must be greater than 0", fix=fix)


def _fraction(field: str, value: float, fix: str) -> Iterator[Problem]:
    if not 0 < value <= 1:
        yield Problem(field=field, value=value, message="is a fraction and must be in (0, 1]", fix=fix)


def slo_targets(ctx: RuleContext) -> Iterator[Finding]:
    slo = ctx.spec.slo
    if not ctx.spec.metrics.enabled and (slo is not None or ctx.spec.alerts is not None):
        yield SpecWarning(code="ALERTS_WITHOUT_METRICS", field="metrics.enabled",
                      message="is false, so no alert rule is rendered and slo/alerts have no effect; "
                              "remove them or enable metrics")
    if slo is None:
        return
    if slo.ttft_ms is not None and slo.ttft_ms < MIN_TTFT_MS:
        yield Problem(field="slo.ttft_ms", value=slo.ttft_ms, message=f"is below {MIN_TTFT_MS} ms, the resolution of "
                      "the TTFT histograms", fix="give the p90 target in milliseconds, e.g. 2000")
    if slo.tpot_ms is not None and slo.tpot_ms < MIN_TPOT_MS:
        yield Problem(field="slo.tpot_ms", value=slo.tpot_ms,
                      message=f"is below {MIN_TPOT_MS} ms, the lowest bucket of vLLM's inter-token latency "
                              "histogram, so the TPOT alert would fire whenever tokens flow",
                      fix=f"give a p90 target of at least {MIN_TPOT_MS} ms, e.g. 50")
    elif slo.tpot_ms is not None and slo.tpot_ms / 1000 not in INTER_TOKEN_LATENCY.buckets:
        used = tpot_bound(slo.tpot_ms) * 1000
        yield SpecWarning(code="SLO_BETWEEN_BUCKETS", field="slo.tpot_ms",
                          message=f"the burn-rate alerts count a token as good only under the {used:g} ms bucket; "
                                  + between_buckets(slo.tpot_ms, INTER_TOKEN_LATENCY.buckets,
                                                    "vLLM's inter-token latency histogram"))
    if not 0 < slo.objective < 1:
        yield Problem(field="slo.objective", value=slo.objective,
                      message="is the share of requests that must meet the SLO and must be between 0 and 1 "
                              "(exclusive): 1 leaves no error budget to burn",
                      fix=f"use e.g. {DEFAULT_SLO_OBJECTIVE}")
    elif FASTEST.factor * (1 - slo.objective) >= 1:
        floor = 1 - 1 / FASTEST.factor
        yield Problem(field="slo.objective", value=slo.objective,
                      message=f"leaves a budget so large that the fastest burn-rate page ({FASTEST.factor:g}x "
                              f"over {FASTEST.long}) needs more than 100% of requests to fail, so it can never fire",
                      fix=f"use an objective above {floor:.4f}, e.g. {DEFAULT_SLO_OBJECTIVE}")


def between_buckets(target_ms: float, buckets: Sequence[float], histogram: str) -> str:
    """Which bucket of ``histogram`` (finite bounds in seconds) an alert's p90 is read in for ``target_ms``.

    histogram_quantile interpolates linearly inside the bucket that holds the 90th percentile, assuming the
    observations spread evenly in it: only at a bound is the comparison exact, and above the top finite
    bound no p90 can be read at all.
    """
    seconds = target_ms / 1000
    upper = next((b for b in sorted(buckets) if b >= seconds), None)
    lower = max((b for b in buckets if b < seconds), default=0.0)
    if upper is None:
        return (f"{target_ms:g} ms is above the top finite bucket of {histogram} ({lower * 1000:g} ms): "
                "histogram_quantile never reads a p90 above it, so the SLO alert can only say it cannot be "
                f"measured; use at most {lower * 1000:g}")
    if upper == seconds:
        return f"{target_ms:g} ms is a bucket bound of {histogram}: the alert's comparison is exact"
    nearest = min((lower, upper), key=lambda b: abs(b - seconds))
    return (f"{target_ms:g} ms is not a bucket bound of {histogram}: the alert reads the p90 inside the bucket "
            f"({lower * 1000:g}, {upper * 1000:g}] ms, interpolated as if observations spread evenly across it, so "
            f"it fires early or late by up to the bucket's width ({(upper - lower) * 1000:g} ms); use "
            f"{nearest * 1000:g} for an exact threshold")


def scrape_interval(ctx: RuleContext) -> Iterator[Finding]:
    interval = ctx.spec.metrics.scrape_interval_seconds
    if ctx.spec.metrics.enabled and interval is not None and interval > MAX_SCRAPE_INTERVAL_SECONDS:
        yield Problem(field="metrics.scrape_interval_seconds", value=interval,
                      message=f"leaves fewer than {SAMPLES_PER_WINDOW} samples in the alerts' "
                              f"{RATE_WINDOW_SECONDS // 60}-minute rate() window: one missed scrape empties it "
                              "and every rate-based alert goes silent while the endpoint looks healthy",
                      fix=f"use at most {MAX_SCRAPE_INTERVAL_SECONDS} (or leave it unset for the operator's 15)")


def alert_thresholds(ctx: RuleContext) -> Iterator[Finding]:
    alerts = ctx.spec.alerts
    if alerts is None:
        return
    defaults = AlertThresholds()
    yield from _positive("alerts.kv_store_p90_seconds", alerts.kv_store_p90_seconds,
                         f"use seconds, e.g. {defaults.kv_store_p90_seconds}")
    yield from _fraction("alerts.error_ratio", alerts.error_ratio, f"use e.g. {defaults.error_ratio} for 5%")
    yield from _fraction("alerts.error_ratio_critical", alerts.error_ratio_critical,
                         f"use e.g. {defaults.error_ratio_critical} for 20%")
    base = alerts.runbook_base_url
    if base is not None and (not ABSOLUTE_URL.match(base) or "#" in base):
        yield Problem(field="alerts.runbook_base_url", value=base,
                      message="must be an absolute http(s) URL without a '#' fragment: each alert's runbook_url "
                              "adds its section's anchor to it",
                      fix="use the published page, e.g. https://<your git host>/<org>/hyperpod-dpd/blob/<tag>/"
                          "docs/alerts.md")
    if 0 < alerts.error_ratio_critical < alerts.error_ratio <= 1:
        yield Problem(field="alerts.error_ratio_critical", value=alerts.error_ratio_critical,
                      message=f"is below alerts.error_ratio ({alerts.error_ratio}); the critical alert "
                              "would fire first",
                      fix="make error_ratio_critical at least error_ratio")
    if alerts.prefill_queue < 1:
        yield Problem(field="alerts.prefill_queue", value=alerts.prefill_queue, message="must be at least 1",
                      fix=f"use a queue depth, e.g. {defaults.prefill_queue}")
    yield from _fraction("alerts.decode_kv_cache_usage", alerts.decode_kv_cache_usage,
                         f"use e.g. {defaults.decode_kv_cache_usage} for 90%")
    if alerts.min_requests_per_second < 0:
        yield Problem(field="alerts.min_requests_per_second", value=alerts.min_requests_per_second,
                      message="must not be negative",
                      fix=f"use 0 for no floor or e.g. {defaults.min_requests_per_second}")
