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

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, ROUTER_CONTAINER, role_deployment, router_deployment
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.selectors import EndpointSelectors, select
from hyperpod_dpd.planner.assumptions import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.spec import AlertThresholds, DpdSpec

RATE_WINDOW_SECONDS = 300
RATE_WINDOW = f"{RATE_WINDOW_SECONDS // 60}m"
LONG_WINDOW = "10m"
QUANTILE = 0.9
EVALUATION_INTERVAL = "1m"
# Longer than a 70B model takes to load from a cold S3 fetch (5-10 minutes), so a deploy does not page.
AVAILABILITY_HOLD = "15m"


class Severity(Enum):
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True, kw_only=True)
class AlertRule:
    """One alert: the PromQL, how long it must hold, and what to tell the person paged.

    :param failure: the failure mode, one short sentence (the ``summary``).
    :param meaning: what the signal means and why the threshold (the ``description``).
    :param fix: the troubleshooting step (the ``fix`` annotation).
    :param inputs: the series families the expression reads; those no upstream source defines are named
        in an ``unverified_inputs`` annotation, so whoever is paged knows which part is an assumption.
    """

    name: str
    expr: str
    hold: str
    severity: Severity
    failure: str
    meaning: str
    fix: str
    inputs: tuple[m.Metric, ...]

    @property
    def unverified(self) -> tuple[m.Metric, ...]:
        return tuple(metric for metric in self.inputs if not metric.verified)

    def to_prometheus(self, spec: DpdSpec) -> dict[str, Any]:
        annotations = {"summary": f"{spec.namespace}/{spec.name}: {self.failure}", "description": self.meaning,
                       "fix": self.fix}
        if self.unverified:
            annotations["unverified_inputs"] = ", ".join(
                f"{metric.name} ({metric.exporter.value})" for metric in self.unverified)
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.hold,
            "labels": {"severity": self.severity.value, "dpd_endpoint": spec.name,
                       "dpd_namespace": spec.namespace},
            "annotations": annotations,
        }


def _num(value: float) -> str:
    return f"{value:g}"


def _quantile(histogram: m.Metric, matchers: str) -> str:
    return (f"histogram_quantile({_num(QUANTILE)}, sum by (le) "
            f"(rate({select(histogram.bucket(), matchers)}[{RATE_WINDOW}])))")


def thresholds_of(spec: DpdSpec) -> AlertThresholds:
    return spec.alerts if spec.alerts is not None else AlertThresholds()


def prefill_max_num_seqs(spec: DpdSpec) -> int:
    """How many requests one prefiller runs at once: the spec's, else the operator's default."""
    seqs = spec.prefill.max_num_seqs
    return seqs if seqs is not None else DEFAULT_MAX_NUM_SEQS["prefill"]


def alert_rules(spec: DpdSpec) -> tuple[AlertRule, ...]:
    """Every alert for ``spec``, in a fixed order; none when the spec turns metrics off."""
    if not spec.metrics.enabled:
        return ()
    t = thresholds_of(spec)
    s = EndpointSelectors.of(spec)
    floor = _num(t.min_requests_per_second)
    post = 'method="POST"'
    prefill_name, decode_name = role_deployment(spec, "prefill"), role_deployment(spec, "decode")

    def tokens(source: str) -> str:
        matcher = f'source="{source}"'
        return f"sum(rate({select(m.PROMPT_TOKENS_BY_SOURCE.name, s.decode, matcher)}[{LONG_WINDOW}]))"

    invocations = f"sum by (resource_name) (rate({select(m.MODEL_INVOCATIONS.name, s.pods, post)}[{RATE_WINDOW}]))"
    errors = f"sum by (resource_name) (rate({select(m.MODEL_ERRORS.name, s.pods, post)}[{RATE_WINDOW}]))"
    prefill_traffic = f"sum(rate({select(m.MODEL_INVOCATIONS.name, s.prefill, post)}[{LONG_WINDOW}])) > {floor}"
    decoder_full_fix = ("Add decode replicas (decode.replicas or decode.autoscaling); or raise "
                        "decode.gpu_memory_utilization if the GPU has room; or lower max_model_len or "
                        "decode.max_num_seqs.")
    error_fix = ("Read the failing role's container log (kubectl logs deploy/<resource_name> -n "
                 f"{spec.namespace}) and describe its pods. 503s right after a deploy last until the endpoint "
                 "reports DeploymentComplete (loading the model takes 5-10 minutes).")
    seqs = prefill_max_num_seqs(spec)
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
                 "kv_cache.pd_buffer_size or add decode replicas."),
            inputs=(m.KV_STORE_PUT_TIME,)),
        AlertRule(
            name="DpdKvStoreMetricsAbsent",
            expr=(f"({prefill_traffic}) unless on() "
                  f"(count({select(m.KV_STORE_PUT_TIME.name + '_count', s.prefill)}) > 0)"),
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure="the prefiller serves traffic but exports no LMCache store timings",
            meaning=("LMCache's metrics live in vLLM's worker processes and reach /metrics only through "
                     "prometheus_client's multiprocess directory; without them DpdKvTransferSlow is blind."),
            fix=("Check `kubectl exec deploy/" + prefill_name + f" -n {spec.namespace} -- curl -s "
                 f"localhost:{spec.port}/metrics | grep lmcache:` (or `hyperpod-dpd verify --smoke`). If empty, "
                 "the worker does not see the PROMETHEUS_MULTIPROC_DIR the chart sets (check the pod's "
                 "environment); meanwhile the KvTransferBelow1GBps log alarm watches the 'Stored ... "
                 "throughput' lines."),
            inputs=(m.MODEL_INVOCATIONS, m.KV_STORE_PUT_TIME)),
        AlertRule(
            name="DpdKvNotTransferred",
            # Fires only while the decoder reports, and computes more prompt tokens than its own prefix
            # cache serves: a missing decoder scrape is DpdDecodeMetricsAbsent, and repeated identical
            # prompts (served from the decoder's cache, so no external tokens) are not a failure.
            expr=(f"(sum(rate({select(m.DPD_DISAGGREGATED.name, s.router)}[{LONG_WINDOW}])) > {floor}) "
                  f"unless on() ({tokens(m.EXTERNAL_KV_TRANSFER)} > 0) "
                  f"and on() ({tokens(m.LOCAL_COMPUTE)} > on() {tokens(m.LOCAL_CACHE_HIT)})"),
            hold="5m", severity=Severity.CRITICAL,
            failure="the router disaggregates but the decoder receives no KV cache",
            meaning=("Requests take the prefill -> decode path, yet vLLM on the decoder counts no prompt tokens "
                     "from external_kv_transfer and computes them itself: the decoder recomputes every prompt, "
                     "so DPD costs a prefill and saves nothing."),
            fix=("Both roles must hash alike and agree on roles: keep kv_cache.hash_seed (PYTHONHASHSEED) "
                 "identical on prefill and decode, use the same image for both, and check the LMCache pd_role "
                 "lines ('sender' on prefill, 'receiver' on decode) in the pod logs. After a prefill restart, "
                 "restart the decoders too (DpdPrefillRestarted)."),
            inputs=(m.DPD_DISAGGREGATED, m.PROMPT_TOKENS_BY_SOURCE)),
        AlertRule(
            name="DpdRouterFallback",
            expr=f"sum(increase({select(m.DPD_FALLBACK.name, s.router)}[{LONG_WINDOW}])) > 0",
            hold="5m", severity=Severity.WARNING,
            failure="the router falls back from the disaggregated path",
            meaning=("The router counted fallbacks, which AWS's dashboard labels 'Fallback (error)' (AWS's DPD "
                     "page calls them under-threshold requests; the router is closed source)."),
            fix=(f"Check that the prefill pods are Ready (kubectl get pods -n {spec.namespace}), read the router's "
                 f"log (kubectl logs -n {OPERATOR_NAMESPACE} deploy/{router_deployment(spec)} "
                 f"-c {ROUTER_CONTAINER}) and the prefiller's error ratio."),
            inputs=(m.DPD_FALLBACK,)),
        AlertRule(
            name="DpdErrorRatioHigh",
            expr=f"({errors} / {invocations} > {_num(t.error_ratio)}) and {invocations} > {floor}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"more than {t.error_ratio:.0%} of POST requests fail on one role",
            meaning=(f"Failed over all POST invocations at the role's sidecar, above {t.error_ratio:.0%} for 10 "
                     f"minutes while the role serves more than {floor} requests/s."),
            fix=error_fix, inputs=(m.MODEL_ERRORS, m.MODEL_INVOCATIONS)),
        AlertRule(
            name="DpdErrorRatioCritical",
            expr=f"({errors} / {invocations} > {_num(t.error_ratio_critical)}) and {invocations} > {floor}",
            hold="5m", severity=Severity.CRITICAL,
            failure=f"more than {t.error_ratio_critical:.0%} of POST requests fail on one role",
            meaning=(f"Failed over all POST invocations at the role's sidecar, above {t.error_ratio_critical:.0%} "
                     f"for 5 minutes while the role serves more than {floor} requests/s."),
            fix=error_fix, inputs=(m.MODEL_ERRORS, m.MODEL_INVOCATIONS)),
        AlertRule(
            name="DpdPrefillQueueDeep",
            expr=f"max({select(m.REQUESTS_WAITING.name, s.prefill)}) > {t.prefill_queue}",
            hold="5m", severity=Severity.WARNING,
            failure="requests queue for prefill",
            meaning=(f"More than {t.prefill_queue} requests wait on a prefiller for 5 minutes; TTFT grows with "
                     "the queue."),
            fix=("Add prefill replicas (prefill.replicas or prefill.autoscaling); or raise routing.threshold so "
                 "that shorter prompts go straight to the decoder."),
            inputs=(m.REQUESTS_WAITING,)),
        AlertRule(
            name="DpdPrefillSaturated",
            # In flight at the router counts running prefills too: only more than every reporting
            # prefiller can run at once (pods x --max-num-seqs) means requests queue.
            expr=(f"sum({select(m.DPD_INFLIGHT_PREFILL.name, s.router)}) > on() "
                  f"(count({select(m.REQUESTS_RUNNING.name, s.prefill)}) * {seqs})"),
            hold="5m", severity=Severity.WARNING,
            failure="more prefill requests are in flight than the prefillers can run",
            meaning=(f"The router holds more prefill requests than the prefill pods x max_num_seqs ({seqs}) for "
                     "5 minutes: the rest queue and TTFT grows."),
            fix=("Add prefill replicas (prefill.replicas or prefill.autoscaling); or raise routing.threshold so "
                 "that shorter prompts go straight to the decoder."),
            inputs=(m.DPD_INFLIGHT_PREFILL, m.REQUESTS_RUNNING)),
        AlertRule(
            name="DpdDecodeKvCacheFull",
            expr=f"max({select(m.KV_CACHE_USAGE.name, s.decode)}) > {_num(t.decode_kv_cache_usage)}",
            hold="5m", severity=Severity.WARNING,
            failure="the decoder's KV cache is nearly full",
            meaning=(f"vLLM's KV cache usage on a decoder is above {t.decode_kv_cache_usage:.0%} for 5 minutes: "
                     "the decoder is at capacity and will preempt requests."),
            fix=decoder_full_fix, inputs=(m.KV_CACHE_USAGE,)),
        AlertRule(
            name="DpdDecodePreempting",
            expr=f"sum(increase({select(m.PREEMPTIONS.name, s.decode)}[{RATE_WINDOW}])) > 0",
            hold="5m", severity=Severity.WARNING,
            failure="the decoder preempts requests",
            meaning="vLLM preempted requests on a decoder in each 5-minute window for 5 minutes: "
                    "it ran out of KV cache blocks and recomputes the preempted requests.",
            fix=decoder_full_fix, inputs=(m.PREEMPTIONS,)),
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
                 "DpdKvTransferSlow; raising routing.threshold sends more short prompts straight to the decoder."),
            inputs=(m.DPD_E2E_TTFT,)))
    if spec.slo is not None and spec.slo.tpot_ms is not None:
        seconds = spec.slo.tpot_ms / 1000
        rules.append(AlertRule(
            name="DpdTpotSloBreach",
            expr=f"{_quantile(m.INTER_TOKEN_LATENCY, s.decode)} > {_num(seconds)}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"p90 time per output token is above the {spec.slo.tpot_ms} ms SLO",
            meaning="The decoder's inter-token latency breaks slo.tpot_ms for 10 minutes. If TPOT climbs while "
                    "output throughput plateaus, the single decoder is saturated.",
            fix=decoder_full_fix, inputs=(m.INTER_TOKEN_LATENCY,)))
    for role, matchers in (("prefill", s.prefill), ("decode", s.decode)):
        expr = f"absent_over_time({select(m.REQUESTS_RUNNING.name, matchers)}[{LONG_WINDOW}])"
        inputs: tuple[m.Metric, ...] = (m.REQUESTS_RUNNING,)
        if role == "decode":
            # DpdKvNotTransferred reads this family; vLLM creates its children at start, so absence is a fault.
            external = select(m.PROMPT_TOKENS_BY_SOURCE.name, matchers, f'source="{m.EXTERNAL_KV_TRANSFER}"')
            expr += f" or absent_over_time({external}[{LONG_WINDOW}])"
            inputs += (m.PROMPT_TOKENS_BY_SOURCE,)
        rules.append(AlertRule(
            name=f"Dpd{role.capitalize()}MetricsAbsent",
            expr=expr, hold="5m", severity=Severity.WARNING,
            failure=f"no vLLM metrics from the {role} pods",
            meaning=(f"Prometheus received no vLLM series from {role}-{spec.name} for 10 minutes: every other "
                     "DPD alert of this endpoint is blind."),
            fix=("Check that the pods run, that metrics.model_metrics_port equals port (vLLM serves /metrics on "
                 "its API port; the operator scrapes 8080 by default), that no --disable-log-stats is set, and "
                 f"`kubectl get inferenceendpointconfig {spec.name} -n {spec.namespace} "
                 "-o jsonpath='{.status.metricsStatus}'` (expect state Enabled)."),
            inputs=inputs))
    available = select(m.DEPLOYMENT_AVAILABLE.name, s.namespace, f'deployment=~"{prefill_name}|{decode_name}"')
    wanted = select(m.DEPLOYMENT_WANTED.name, s.namespace, f'deployment=~"{prefill_name}|{decode_name}"')
    rules.append(AlertRule(
        name="DpdNoReadyPod",
        # A role scaled to zero on purpose has nothing to be Ready; a decode Deployment that is not there
        # at all (or kube-state-metrics not scraped) is as unavailable as one with no Ready pod.
        expr=(f"({available} == 0 and on(namespace, deployment) {wanted} > 0) or "
              f"absent_over_time({select(m.DEPLOYMENT_WANTED.name, s.deployment(decode_name))}[{LONG_WINDOW}])"),
        hold=AVAILABILITY_HOLD, severity=Severity.CRITICAL,
        failure="a role of the endpoint has no Ready pod",
        meaning=("kube-state-metrics reports no available replica of the prefill or decode Deployment while it "
                 "wants one, for 15 minutes (longer than a 70B model takes to load from S3): without a Ready "
                 "decoder the endpoint answers nothing; without a Ready prefiller long prompts fail or fall back."),
        fix=(f"kubectl get pods -n {spec.namespace} and describe the pods that are not Ready: Pending means no "
             "node fits (GPUs, EFA), CrashLoopBackOff means read the container log (out of memory at start, a "
             "max_model_len beyond the model's context window, a bad flag)."),
        inputs=(m.DEPLOYMENT_AVAILABLE, m.DEPLOYMENT_WANTED)))
    restarts = select(m.CONTAINER_RESTARTS.name, s.pod(prefill_name), f'container="{prefill_name}"')
    rules.append(AlertRule(
        name="DpdPrefillRestarted",
        expr=f"sum(increase({restarts}[{LONG_WINDOW}])) > 0",
        hold="0m", severity=Severity.WARNING,
        failure="a prefill container restarted; the decoders may hold its stale NIXL agent",
        meaning=("vLLM's NIXL connector on the decoder keeps the agent of the prefill process it first met "
                 "(vLLM issue 49238): after a prefill restart transfers fail until the decoders restart too."),
        fix=(f"kubectl rollout restart deployment/{decode_name} -n {spec.namespace}, then check that "
             "DpdKvNotTransferred stays quiet; read the restarted container's previous log (kubectl logs "
             f"--previous -c {prefill_name}) for why it restarted."),
        inputs=(m.CONTAINER_RESTARTS,)))
    xid = select(m.GPU_XID.name, s.pod(prefill_name, decode_name))
    rules.append(AlertRule(
        name="DpdGpuXidError",
        expr=f"max by (namespace, pod, gpu) ({xid}) > 0",
        hold="0m", severity=Severity.CRITICAL,
        failure="a GPU of the endpoint raised an Xid error",
        meaning=("DCGM reports the code of the last Xid error on a GPU that serves this endpoint (value = the "
                 "Xid). Codes such as 48, 63, 64, 74, 79, 94 and 95 are hardware or driver faults that stop "
                 "or corrupt the engine."),
        fix=("Look the code up in NVIDIA's Xid catalogue; for a hardware Xid let HyperPod replace the node "
             "(kubectl label node <node> sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement) "
             "so the pod reschedules."),
        inputs=(m.GPU_XID,)))
    return tuple(rules)


def inhibit_rules() -> list[dict[str, Any]]:
    """Alertmanager inhibitions: an alert whose input is missing silences the ones that would misread it."""
    pairs = (("DpdDecodeMetricsAbsent", "DpdKvNotTransferred|DpdDecodeKvCacheFull|DpdDecodePreempting"),
             ("DpdNoReadyPod", "DpdPrefillMetricsAbsent|DpdDecodeMetricsAbsent|DpdKvStoreMetricsAbsent"))
    return [{"source_matchers": [f'alertname="{source}"'], "target_matchers": [f'alertname=~"{targets}"'],
             "equal": ["dpd_namespace", "dpd_endpoint"]} for source, targets in pairs]


def rule_group_name(spec: DpdSpec) -> str:
    return f"dpd-{spec.namespace}-{spec.name}"


def rules_document(spec: DpdSpec) -> dict[str, Any]:
    """The Prometheus rule file for ``spec``: one group evaluated every minute."""
    return {"groups": [{"name": rule_group_name(spec), "interval": EVALUATION_INTERVAL,
                        "rules": [rule.to_prometheus(spec) for rule in alert_rules(spec)]}]}


def rules_yaml(spec: DpdSpec) -> str:
    """The rule file as YAML, byte-identical for the same spec."""
    return yaml.safe_dump(rules_document(spec), sort_keys=False, width=10_000, allow_unicode=False)
