"""Rules for the SLO and alert-threshold fields: values a Prometheus rule could never fire on, or always would."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.observability.alerts import RATE_WINDOW_SECONDS
from hyperpod_dpd.observability.metrics import INTER_TOKEN_LATENCY
from hyperpod_dpd.spec.observability import AlertThresholds
from hyperpod_dpd.validation.check import Finding, RuleContext, register_rule

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


def _positive(field: str, value: float, fix: str) -> Iterator[Problem]:
    if value <= 0:
        yield Problem(field=field, value=value, message="must be greater than 0", fix=fix)


def _fraction(field: str, value: float, fix: str) -> Iterator[Problem]:
    if not 0 < value <= 1:
        yield Problem(field=field, value=value, message="is a fraction and must be in (0, 1]", fix=fix)


@register_rule
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
        bounds = ", ".join(f"{b * 1000:g}" for b in INTER_TOKEN_LATENCY.buckets if b <= 1)
        yield SpecWarning(code="SLO_BETWEEN_BUCKETS", field="slo.tpot_ms",
                      message=f"{slo.tpot_ms} is not a bucket bound of vLLM's inter-token latency histogram "
                              f"({bounds} ms): the p90 is interpolated between bounds, so the alert may fire "
                              "early or late; choose a bound for an exact threshold")


@register_rule
def scrape_interval(ctx: RuleContext) -> Iterator[Finding]:
    interval = ctx.spec.metrics.scrape_interval_seconds
    if ctx.spec.metrics.enabled and interval is not None and interval > MAX_SCRAPE_INTERVAL_SECONDS:
        yield Problem(field="metrics.scrape_interval_seconds", value=interval,
                      message=f"leaves fewer than {SAMPLES_PER_WINDOW} samples in the alerts' "
                              f"{RATE_WINDOW_SECONDS // 60}-minute rate() window: one missed scrape empties it "
                              "and every rate-based alert goes silent while the endpoint looks healthy",
                      fix=f"use at most {MAX_SCRAPE_INTERVAL_SECONDS} (or leave it unset for the operator's 15)")


@register_rule
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
