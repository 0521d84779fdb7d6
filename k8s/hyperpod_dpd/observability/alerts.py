"""Prometheus alert rules for one DPD endpoint, rendered from its spec.

One rule per failure mode a metric can show (AWS's DPD troubleshooting page lists them; the
thresholds and their derivations are in :mod:`hyperpod_dpd.spec.observability`). Every rule names
what broke and the troubleshooting step in its annotations, ratio rules stay silent below a traffic
floor, and the latency rules exist only when the spec states an SLO. The same file loads into
Amazon Managed Service for Prometheus (``AWS::APS::RuleGroupsNamespace``) or any Prometheus.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import yaml

from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.selectors import EndpointSelectors, select
from hyperpod_dpd.spec import AlertThresholds, DpdSpec

RATE_WINDOW = "5m"
LONG_WINDOW = "10m"
QUANTILE = 0.9
EVALUATION_INTERVAL = "1m"


class Severity(Enum):
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True, kw_only=True)
class AlertRule:
    """One alert: the PromQL, how long it must hold, and what to tell the person paged.

    :param failure: the failure mode, one short sentence (the ``summary``).
    :param meaning: what the signal means and why the threshold (the ``description``).
    :param fix: the troubleshooting step (the ``fix`` annotation).
    """

    name: str
    expr: str
    hold: str
    severity: Severity
    failure: str
    meaning: str
    fix: str

    def to_prometheus(self, spec: DpdSpec) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.hold,
            "labels": {"severity": self.severity.value, "dpd_endpoint": spec.name,
                       "dpd_namespace": spec.namespace},
            "annotations": {"summary": f"{spec.namespace}/{spec.name}: {self.failure}",
                            "description": self.meaning, "fix": self.fix},
        }


def _num(value: float) -> str:
    return f"{value:g}"


def _quantile(histogram: m.Metric, matchers: str) -> str:
    return (f"histogram_quantile({_num(QUANTILE)}, sum by (le) "
            f"(rate({select(histogram.bucket(), matchers)}[{RATE_WINDOW}])))")


def thresholds_of(spec: DpdSpec) -> AlertThresholds:
    return spec.alerts if spec.alerts is not None else AlertThresholds()


def alert_rules(spec: DpdSpec) -> tuple[AlertRule, ...]:
    """Every alert for ``spec``, in a fixed order; none when the spec turns metrics off."""
    if not spec.metrics.enabled:
        return ()
    t = thresholds_of(spec)
    s = EndpointSelectors.of(spec)
    floor = _num(t.min_requests_per_second)
    post = 'method="POST"'
    transferred = f'source="{m.EXTERNAL_KV_TRANSFER}"'
    invocations = f"sum by (resource_name) (rate({select(m.MODEL_INVOCATIONS.name, s.pods, post)}[{RATE_WINDOW}]))"
    errors = f"sum by (resource_name) (rate({select(m.MODEL_ERRORS.name, s.pods, post)}[{RATE_WINDOW}]))"
    decoder_full_fix = ("Add decode replicas (decode.replicas or decode.autoscaling); or raise "
                        "decode.gpu_memory_utilization if the GPU has room; or lower max_model_len or "
                        "decode.max_num_seqs.")
    error_fix = ("Read the failing role's container log (kubectl logs deploy/<resource_name> -n "
                 f"{spec.namespace}) and describe its pods. 503s right after a deploy last until the endpoint "
                 "reports DeploymentComplete (loading the model takes 5-10 minutes).")
    rules = [
        AlertRule(
            name="DpdKvTransferSlow",
            expr=f"{_quantile(m.KV_STORE_PUT_TIME, s.prefill)} > {_num(t.kv_store_p90_seconds)}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure="KV cache transfer from prefill to decode is slow or stalled",
            meaning=(f"p90 of the prefiller's LMCache put (decoder buffer wait plus NIXL write) is above "
                     f"{_num(t.kv_store_p90_seconds)} s. Over EFA one 8k-token transfer takes milliseconds; "
                     "at the 1 GB/s that means EFA is not used it takes about 0.23 s."),
            fix=("Check the prefiller's 'Stored ... throughput' log lines: below 1 GB/s means EFA is not used "
                 "(keep both roles on EFA nodes in one AZ, check `kubectl describe node | grep efa`, use an image "
                 "with the EFA libfabric provider). If the decoder logs 'Failed to allocate memory object', raise "
                 "kv_cache.pd_buffer_size or add decode replicas.")),
        AlertRule(
            name="DpdKvNotTransferred",
            expr=(f"sum(rate({select(m.DPD_DISAGGREGATED.name, s.router)}[{LONG_WINDOW}])) > {floor} unless "
                  f"sum(rate({select(m.PROMPT_TOKENS_BY_SOURCE.name, s.decode, transferred)}[{LONG_WINDOW}])) > 0"),
            hold="5m", severity=Severity.CRITICAL,
            failure="the router disaggregates but the decoder receives no KV cache",
            meaning=("Requests take the prefill -> decode path, yet vLLM on the decoder counts no prompt tokens "
                     "from external_kv_transfer: the decoder recomputes every prompt ('Retrieved 0 out of N' in "
                     "its log), so DPD costs a prefill and saves nothing."),
            fix=("Both roles must hash alike and agree on roles: keep kv_cache.hash_seed (PYTHONHASHSEED) "
                 "identical on prefill and decode, use the same image for both, and check the LMCache pd_role "
                 "lines ('sender' on prefill, 'receiver' on decode) in the pod logs.")),
        AlertRule(
            name="DpdRouterFallback",
            expr=f"sum(increase({select(m.DPD_FALLBACK.name, s.router)}[{LONG_WINDOW}])) > 0",
            hold="5m", severity=Severity.WARNING,
            failure="the router falls back from the disaggregated path",
            meaning="The router counted fallbacks, which AWS's dashboard labels 'Fallback (error)'.",
            fix=(f"Check that the prefill pods are Ready (kubectl get pods -n {spec.namespace}), read the router's "
                 f"log (kubectl logs -n hyperpod-inference-system deploy/{spec.name}-{spec.namespace}-router "
                 "-c router-container) and the prefiller's error ratio.")),
        AlertRule(
            name="DpdErrorRatioHigh",
            expr=f"({errors} / {invocations} > {_num(t.error_ratio)}) and {invocations} > {floor}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"more than {t.error_ratio:.0%} of POST requests fail on one role",
            meaning=(f"Failed over all POST invocations at the role's sidecar, above {t.error_ratio:.0%} for 10 "
                     f"minutes while the role serves more than {floor} requests/s."),
            fix=error_fix),
        AlertRule(
            name="DpdErrorRatioCritical",
            expr=f"({errors} / {invocations} > {_num(t.error_ratio_critical)}) and {invocations} > {floor}",
            hold="5m", severity=Severity.CRITICAL,
            failure=f"more than {t.error_ratio_critical:.0%} of POST requests fail on one role",
            meaning=(f"Failed over all POST invocations at the role's sidecar, above {t.error_ratio_critical:.0%} "
                     f"for 5 minutes while the role serves more than {floor} requests/s."),
            fix=error_fix),
        AlertRule(
            name="DpdPrefillQueueDeep",
            expr=(f"max({select(m.REQUESTS_WAITING.name, s.prefill)}) > {t.prefill_queue} or "
                  f"sum({select(m.DPD_INFLIGHT_PREFILL.name, s.router)}) > {t.prefill_queue}"),
            hold="5m", severity=Severity.WARNING,
            failure="requests queue for prefill",
            meaning=(f"More than {t.prefill_queue} requests wait on a prefiller (or are in flight at the router) "
                     "for 5 minutes; the prefiller's default --max-num-seqs is 16, so TTFT grows with the queue."),
            fix=("Add prefill replicas (prefill.replicas or prefill.autoscaling); or raise routing.threshold so "
                 "that shorter prompts go straight to the decoder.")),
        AlertRule(
            name="DpdDecodeKvCacheFull",
            expr=f"max({select(m.KV_CACHE_USAGE.name, s.decode)}) > {_num(t.decode_kv_cache_usage)}",
            hold="5m", severity=Severity.WARNING,
            failure="the decoder's KV cache is nearly full",
            meaning=(f"vLLM's KV cache usage on a decoder is above {t.decode_kv_cache_usage:.0%} for 5 minutes: "
                     "the decoder is at capacity and will preempt requests."),
            fix=decoder_full_fix),
        AlertRule(
            name="DpdDecodePreempting",
            expr=f"sum(increase({select(m.PREEMPTIONS.name, s.decode)}[{RATE_WINDOW}])) > 0",
            hold="5m", severity=Severity.WARNING,
            failure="the decoder preempts requests",
            meaning="vLLM preempted requests on a decoder in each 5-minute window for 5 minutes: "
                    "it ran out of KV cache blocks and recomputes the preempted requests.",
            fix=decoder_full_fix),
    ]
    if spec.slo is not None and spec.slo.ttft_ms is not None:
        seconds = spec.slo.ttft_ms / 1000
        rules.append(AlertRule(
            name="DpdTtftSloBreach",
            expr=f"{_quantile(m.DPD_E2E_TTFT, s.router)} > {_num(seconds)}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"p90 end-to-end TTFT is above the {spec.slo.ttft_ms} ms SLO",
            meaning="The router's end-to-end time to first token (prefill, KV transfer, first decode step) "
                    "breaks slo.ttft_ms for 10 minutes.",
            fix=("If the prefill queue is deep, add prefill replicas; if the KV transfer is slow, see "
                 "DpdKvTransferSlow; raising routing.threshold sends more short prompts straight to the decoder.")))
    if spec.slo is not None and spec.slo.tpot_ms is not None:
        seconds = spec.slo.tpot_ms / 1000
        rules.append(AlertRule(
            name="DpdTpotSloBreach",
            expr=f"{_quantile(m.INTER_TOKEN_LATENCY, s.decode)} > {_num(seconds)}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"p90 time per output token is above the {spec.slo.tpot_ms} ms SLO",
            meaning="The decoder's inter-token latency breaks slo.tpot_ms for 10 minutes. If TPOT climbs while "
                    "output throughput plateaus, the single decoder is saturated.",
            fix=decoder_full_fix))
    for role, matchers in (("prefill", s.prefill), ("decode", s.decode)):
        rules.append(AlertRule(
            name=f"Dpd{role.capitalize()}MetricsAbsent",
            expr=f"absent_over_time({select(m.REQUESTS_RUNNING.name, matchers)}[{LONG_WINDOW}])",
            hold="5m", severity=Severity.WARNING,
            failure=f"no vLLM metrics from the {role} pods",
            meaning=(f"Prometheus received no vLLM series from {role}-{spec.name} for 10 minutes: every other "
                     "DPD alert of this endpoint is blind."),
            fix=("Check that the pods run, that metrics.model_metrics_port equals port (vLLM serves /metrics on "
                 "its API port; the operator scrapes 8080 by default), and "
                 f"`kubectl get inferenceendpointconfig {spec.name} -n {spec.namespace} "
                 "-o jsonpath='{.status.metricsStatus}'` (expect state Enabled).")))
    return tuple(rules)


def rule_group_name(spec: DpdSpec) -> str:
    return f"dpd-{spec.namespace}-{spec.name}"


def rules_document(spec: DpdSpec) -> dict[str, Any]:
    """The Prometheus rule file for ``spec``: one group evaluated every minute."""
    return {"groups": [{"name": rule_group_name(spec), "interval": EVALUATION_INTERVAL,
                        "rules": [rule.to_prometheus(spec) for rule in alert_rules(spec)]}]}


def rules_yaml(spec: DpdSpec) -> str:
    """The rule file as YAML, byte-identical for the same spec."""
    return yaml.safe_dump(rules_document(spec), sort_keys=False, width=10_000, allow_unicode=False)
