"""Prometheus alert rules for one DPD endpoint, rendered from its spec.

One rule per failure mode a metric can show (AWS's DPD troubleshooting page lists them; the
thresholds and their derivations are in :mod:`hyperpod_dpd.spec.observability`). Every rule names
what broke and the troubleshooting step in its annotations, ratio rules stay silent below a traffic
floor, and the latency rules exist only when the spec states an SLO. The same file loads into
Amazon Managed Service for Prometheus (``AWS::APS::RuleGroupsNamespace``) or any Prometheus.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import yaml

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, ROUTER_CONTAINER, role_deployment, router_deployment
from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.observability import evidence as ev
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.rule import (
    CLIENT_ERROR,
    POST,
    SERVER_ERROR,
    AlertRule,
    Severity,
    error_ratio,
    invocation_rate,
)
from hyperpod_dpd.observability.rule import num as _num
from hyperpod_dpd.observability.selectors import PIPELINE_POD, EndpointSelectors, le_matcher, select
from hyperpod_dpd.observability.slo import BURN_ALERTS, MIN_BAD_EVENTS, burn_rate_rules, recording_rules
from hyperpod_dpd.spec import AlertThresholds, AutoscalingSpec, DpdSpec, RoleSpec, SloScaling, SloSpec

RATE_WINDOW_SECONDS = 300
RATE_WINDOW = f"{RATE_WINDOW_SECONDS // 60}m"
LONG_WINDOW = "10m"
QUANTILE = 0.9
EVALUATION_SECONDS = 60
EVALUATION_INTERVAL = f"{EVALUATION_SECONDS // 60}m"
# Longer than a 70B model takes to load from a cold S3 fetch (5-10 minutes), so a deploy does not page.
AVAILABILITY_HOLD = "15m"


def quantile(histogram: m.Metric, matchers: str) -> str:
    return (f"histogram_quantile({_num(QUANTILE)}, sum by (le) "
            f"(rate({select(histogram.bucket(), matchers)}[{RATE_WINDOW}])))")


def per_second(selector: str) -> str:
    return f"rate({selector}[{RATE_WINDOW}])"


# Every bucket of a histogram but its +Inf one.
FINITE_BUCKETS = 'le!="+Inf"'


def router_quantile(histogram: m.Metric, s: EndpointSelectors) -> str:
    rates = s.router_series(histogram.bucket(), per_second)
    return f"histogram_quantile({_num(QUANTILE)}, sum by (le) {rates})"


def thresholds_of(spec: DpdSpec) -> AlertThresholds:
    return spec.alerts if spec.alerts is not None else AlertThresholds()


def prefill_max_num_seqs(spec: DpdSpec) -> int:
    """How many requests one prefiller runs at once: the spec's, else the operator's default."""
    seqs = spec.prefill.max_num_seqs
    return seqs if seqs is not None else DEFAULT_MAX_NUM_SEQS["prefill"]


def _prompt_bounds(spec: DpdSpec) -> tuple[int, int]:
    """The 1-2-5 bucket bounds of ``vllm:request_prompt_tokens`` around ``routing.threshold``: the largest at or
    below it and the smallest at or above it (both the largest bound when ``max_model_len`` stops the buckets
    first)."""
    bounds: list[int] = []
    exponent = 0
    while not bounds or bounds[-1] < spec.routing.threshold:
        candidates = [mantissa * 10 ** exponent for mantissa in (1, 2, 5)]
        fitting = [c for c in candidates if c <= spec.max_model_len]
        bounds += fitting
        if len(fitting) < len(candidates):
            break
        exponent += 1
    low = max([b for b in bounds if b <= spec.routing.threshold] or bounds[:1])
    return low, min([b for b in bounds if b >= spec.routing.threshold] or bounds[-1:])


def long_prompt_bound(spec: DpdSpec) -> int:
    """The smallest bucket bound of vLLM's ``vllm:request_prompt_tokens`` at or above ``routing.threshold``.

    vLLM 0.19.0 builds that histogram's buckets with ``build_1_2_5_buckets(max_model_len)`` (1, 2, 5, 10,
    20, 50, ... up to ``max_model_len``), so a request counted above this bound had a prompt the router
    sends to the prefiller. When ``max_model_len`` stops the buckets below the threshold, the largest
    bound: the count then also holds prompts between it and the threshold.
    """
    return _prompt_bounds(spec)[1]


def candidate_prompt_bound(spec: DpdSpec) -> int:
    """The largest bucket bound at or below ``routing.threshold``: every disaggregated prompt is above it, and so
    are the local prompts between it and the threshold."""
    return _prompt_bounds(spec)[0]


def prefill_may_scale_to_zero(spec: DpdSpec) -> bool:
    """The spec lets the prefill Deployment have no pod on purpose."""
    scaling = spec.prefill.autoscaling
    return spec.prefill.replicas == 0 or (scaling is not None and scaling.min_replicas == 0)


# DpdRouterDown: fewer available router replicas than this is no router.
MIN_AVAILABLE = 1
# DpdKvNotTransferred counts requests, not rates: at least this many long prompts on one decoder
# within KV_WINDOW, so one request per five minutes is enough to check.
KV_WINDOW = "15m"
MIN_LONG_PROMPTS = ev.MIN_LONG_PROMPTS
# LMCache moves KV in chunks of kv_cache.chunk_tokens (rendered as LMCACHE_CHUNK_SIZE): a transferred
# prompt leaves the decoder at most a partial chunk (and the last token) to compute, a broken transfer the
# whole uncached rest. Repeated identical prompts come from the decoder's own prefix cache and compute ~1.
# The error ratios' second, low-traffic window: enough requests in 30 minutes instead of a rate floor.
SLOW_WINDOW = "30m"
MIN_REQUESTS_SLOW_WINDOW = 5
# ... and at least two failures in it, so that one failed request at low traffic pages nobody (the
# burn-rate alerts' floor).
MIN_FAILURES_SLOW_WINDOW = MIN_BAD_EVENTS
# Xids whose resolution in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid
# Errors with the Xid Catalog") is a GPU reset or a node reboot, i.e. hardware: 48 double-bit ECC,
# 64 row-remapping failure, 74 NVLink, 79 fallen off the bus, 95 uncontained ECC, 119/120 GSP, 140
# unrecovered ECC. Application Xids (13, 31, 43, 45 from a faulting or killed process) are not here.
HARDWARE_XIDS = (48, 64, 74, 79, 95, 119, 120, 140)
# DCGM_FI_DEV_XID_ERRORS keeps the last Xid until the exporter restarts (dcgm-exporter issues 500,
# 95; DCGM 277): only a change within this window is a new error.
XID_WINDOW = "15m"


def _error_rule_expr(s: EndpointSelectors, ratio: float, floor: str, errors: str = SERVER_ERROR) -> str:
    """Above ``ratio`` over 5 minutes at the rate floor, or over 30 minutes with a few requests at all."""
    count = (f"sum by (resource_name) "
             f"(increase({select(m.MODEL_INVOCATIONS.name, s.pods, POST)}[{SLOW_WINDOW}]))")
    failed = (f"sum by (resource_name) "
              f"(increase({select(m.MODEL_ERRORS.name, s.pods, POST, errors)}[{SLOW_WINDOW}]))")
    return (f"(({error_ratio(s.pods, RATE_WINDOW, errors)} > {_num(ratio)}) "
            f"and {invocation_rate(s.pods, RATE_WINDOW)} > {floor}) or "
            f"(({error_ratio(s.pods, SLOW_WINDOW, errors)} > {_num(ratio)}) "
            f"and {count} >= {MIN_REQUESTS_SLOW_WINDOW} and {failed} >= {MIN_FAILURES_SLOW_WINDOW})")


def inflight_prefill(s: EndpointSelectors) -> str:
    """Prefill requests in flight at the router (the dashboard draws the same)."""
    return f"sum{s.router_series(m.DPD_INFLIGHT_PREFILL.name)}"


def prefill_capacity(s: EndpointSelectors, seqs: int) -> str:
    """What the reporting prefillers can run at once: pods x ``--max-num-seqs``."""
    return f"(count({select(m.REQUESTS_RUNNING.name, s.prefill)}) * {seqs})"


def prefill_waiting(s: EndpointSelectors) -> str:
    """The longest prefill queue (the dashboard draws the same)."""
    return f"max({select(m.REQUESTS_WAITING.name, s.prefill)})"


def per_decoder_of(s: EndpointSelectors, metric: str, *extra: str, fn: str = "increase",
                   window: str = KV_WINDOW, matchers: str | None = None) -> str:
    """``fn`` of a decode series (or of ``matchers``' series) over ``window``, per pod."""
    series = select(metric, s.decode if matchers is None else matchers, *extra)
    return f"sum by ({PIPELINE_POD}) ({fn}({series}[{window}]))"


def decoder_tokens(s: EndpointSelectors, source: str) -> str:
    """Prompt tokens per decoder from ``source`` over the KV window (the dashboard draws the same)."""
    return per_decoder_of(s, m.PROMPT_TOKENS_BY_SOURCE.name, f'source="{source}"')


def long_prompts_per_decoder(spec: DpdSpec, bound: int | None = None) -> str:
    """Requests per decoder over the KV window whose prompt was above ``bound`` (:func:`long_prompt_bound`: above
    ``routing.threshold``)."""
    s = EndpointSelectors.of(spec)
    above = le_matcher(long_prompt_bound(spec) if bound is None else bound)
    return (f"({per_decoder_of(s, m.REQUEST_PROMPT_TOKENS.name + '_count')} - "
            f"{per_decoder_of(s, m.REQUEST_PROMPT_TOKENS.bucket(), above)})")


PER_POD = ev.PromQL()
ENDPOINT = ev.PromQL(on=())


def decoder_window(spec: DpdSpec, bound: int) -> ev.DecoderWindow[str]:
    """The evidence model's decoder window over :data:`KV_WINDOW`, per decoder: prompts above ``bound`` and their
    tokens' lower bound (``bound`` each), and the prompt tokens by source."""
    s = EndpointSelectors.of(spec)
    long = long_prompts_per_decoder(spec, bound)
    return ev.DecoderWindow(long_prompts=long, long_prompt_tokens=PER_POD.mul(long, PER_POD.const(bound)),
                            external_tokens=decoder_tokens(s, m.EXTERNAL_KV_TRANSFER),
                            cache_hit_tokens=decoder_tokens(s, m.LOCAL_CACHE_HIT),
                            computed_tokens=decoder_tokens(s, m.LOCAL_COMPUTE),
                            chunk_tokens=PER_POD.const(spec.kv_cache.chunk_tokens))


def endpoint_window(window: ev.DecoderWindow[str]) -> ev.DecoderWindow[str]:
    """``window`` summed over the decoders."""
    return ev.DecoderWindow(**{field: value if ev.is_number(value) else f"sum({value})"
                               for field, value in dataclasses.asdict(window).items()})


def router_available(spec: DpdSpec) -> str:
    """Available replicas of the endpoint's router Deployment (kube-state-metrics)."""
    return select(m.DEPLOYMENT_AVAILABLE.name, _router_deployment_matchers(spec))


def _router_deployment_matchers(spec: DpdSpec) -> str:
    return f'namespace="{OPERATOR_NAMESPACE}", deployment="{router_deployment(spec)}"'


def slo_scaled_roles(spec: DpdSpec) -> tuple[str, ...]:
    """The roles whose KEDA triggers read a demand series (``autoscaling.slo``)."""
    return tuple(role for role, role_spec in (("prefill", spec.prefill), ("decode", spec.decode))
                 if role_spec.autoscaling is not None and role_spec.autoscaling.slo is not None)


def slo_autoscaled(spec: DpdSpec) -> DpdSpec:
    """``spec`` with ``autoscaling.slo`` on both roles (the variant that adds the demand-absent rules)."""
    def scaled(role: RoleSpec) -> RoleSpec:
        return dataclasses.replace(role, autoscaling=AutoscalingSpec(max_replicas=max(1, role.replicas),
                                                                     slo=SloScaling()))

    return dataclasses.replace(spec, prefill=scaled(spec.prefill), decode=scaled(spec.decode))


def demand_absent_rules(spec: DpdSpec, s: EndpointSelectors) -> list[AlertRule]:
    """One rule per SLO-scaled role: its demand series absent while its engines report.

    The demand trigger's query ends in ``or vector(planned x target)`` so that a gap holds the planned replicas;
    if the series never appears (an image that does not export it, a label that does not match) that fallback
    holds them for good and the role never scales on demand. The role's own vLLM series present tells that
    apart from a role that is down (DpdNoMetrics covers that).
    """
    rules = []
    for role in slo_scaled_roles(spec):
        pods = s.prefill if role == "prefill" else s.decode
        demand = (select(m.PROMPT_TOKENS_BY_SOURCE.name, pods, f'source="{m.LOCAL_COMPUTE}"') if role == "prefill"
                  else select(m.GENERATION_TOKENS.name, pods))
        family = m.PROMPT_TOKENS_BY_SOURCE if role == "prefill" else m.GENERATION_TOKENS
        name = role_deployment(spec, role)
        rules.append(AlertRule(
            name=f"Dpd{role.capitalize()}DemandSeriesAbsent",
            expr=(f"absent_over_time({demand}[{LONG_WINDOW}]) "
                  f"and on() (count({select(m.REQUESTS_RUNNING.name, pods)}) > 0)"),
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"the {role} autoscaling's demand series is absent, so it holds the planned replicas",
            meaning=(f"{role}.autoscaling.slo scales on {demand.split('{')[0]} from the {role} pods, but the "
                     f"workspace has had none for 10 minutes while those pods report other vLLM series. The "
                     "trigger's fallback then holds the planned replicas: the role no longer scales on demand, "
                     "only on its queue and SLO-ratio floors."),
            fix=(f"Check that the {role} image exports the series (hyperpod-dpd verify lists the inputs missing "
                 "from the workspace) and that its labels match the trigger's selector; a vLLM older than the "
                 "contracted version may not export it."),
            commands=(f"kubectl exec deploy/{name} -n {spec.namespace} -- curl -s localhost:{spec.port}/metrics "
                      f"| grep {demand.split('{')[0]}", "hyperpod-dpd verify <spec.yaml>",
                      f"kubectl get scaledobject,hpa -n {spec.namespace}"),
            inputs=(family, m.REQUESTS_RUNNING)))
    return rules


def alert_rules(spec: DpdSpec) -> tuple[AlertRule, ...]:
    """Every alert for ``spec``, in a fixed order; none when the spec turns metrics off."""
    if not spec.metrics.enabled:
        return ()
    t = thresholds_of(spec)
    s = EndpointSelectors.of(spec)
    floor = _num(t.min_requests_per_second)
    prefill_name, decode_name = role_deployment(spec, "prefill"), role_deployment(spec, "decode")
    pod = PIPELINE_POD

    def per_decoder(metric: str, *extra: str, fn: str = "increase", window: str = KV_WINDOW) -> str:
        return per_decoder_of(s, metric, *extra, fn=fn, window=window)

    def tokens(source: str) -> str:
        return decoder_tokens(s, source)

    bound = long_prompt_bound(spec)
    long_prompts = long_prompts_per_decoder(spec)
    decoder_full_fix = ("Add decode replicas (decode.replicas or decode.autoscaling); or raise "
                        "decode.gpu_memory_utilization if the GPU has room; or lower max_model_len or "
                        "decode.max_num_seqs.")
    error_fix = ("Read the failing role's container log (kubectl logs deploy/<resource_name> -n "
                 f"{spec.namespace}) and describe its pods. 503s right after a deploy last until the endpoint "
                 "reports DeploymentComplete (loading the model takes 5-10 minutes).")
    router_log = (f"kubectl logs -n {OPERATOR_NAMESPACE} deploy/{router_deployment(spec)} -c {ROUTER_CONTAINER}")
    restart_prefill = (f"kubectl rollout restart deployment/{prefill_name} -n {spec.namespace}")
    seqs = prefill_max_num_seqs(spec)
    ns = spec.namespace
    get_pods = f"kubectl get pods -n {ns} -o wide"

    def logs(deployment: str) -> str:
        return f"kubectl logs deploy/{deployment} -n {ns} --tail=200"

    def metrics_of(deployment: str, pattern: str) -> str:
        return f"kubectl exec deploy/{deployment} -n {ns} -- curl -s localhost:{spec.port}/metrics | grep {pattern}"

    smoke = "hyperpod-dpd verify <spec.yaml> --smoke"
    verify = "hyperpod-dpd verify <spec.yaml>"
    router_get = f"kubectl get deploy/{router_deployment(spec)} -n {OPERATOR_NAMESPACE}"
    metrics_status = (f"kubectl get inferenceendpointconfig {spec.name} -n {ns} "
                      "-o jsonpath='{.status.metricsStatus}'")
    error_commands = (get_pods, logs(prefill_name), logs(decode_name))
    prefill_load_commands = (metrics_of(prefill_name, "vllm:num_requests"),
                             f"kubectl get deploy/{prefill_name} -n {ns}", f"kubectl get scaledobject,hpa -n {ns}")
    decode_load_commands = (metrics_of(decode_name, "-e vllm:kv_cache_usage_perc -e vllm:num_preemptions"),
                            metrics_of(decode_name, "vllm:num_requests_running"),
                            f"kubectl get deploy/{decode_name} -n {ns}")
    ttft_commands = (metrics_of(prefill_name, "vllm:num_requests_waiting"),
                     f"{router_log} --tail=200 | grep 'Conditional routing'", f"{logs(prefill_name)} | grep Stored")
    disaggregated = s.router_series(m.DPD_DISAGGREGATED.name, lambda sel: f"increase({sel}[{KV_WINDOW}])")
    rules = [
        AlertRule(
            name="DpdKvTransferSlow",
            expr=f"{quantile(m.KV_STORE_PUT_TIME, s.prefill)} > {_num(t.kv_store_p90_seconds)}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure="KV cache transfer from prefill to decode is slow or stalled",
            meaning=(f"p90 of the prefiller's LMCache put (decoder buffer wait plus NIXL write) is above "
                     f"{_num(t.kv_store_p90_seconds)} s. Over EFA one 8k-token transfer takes milliseconds; "
                     "at the 1 GB/s that means EFA is not used it takes about 0.23 s."),
            fix=("Check the prefiller's 'Stored ... throughput' log lines: below 1 GB/s means EFA is not used "
                 "(keep both roles on EFA nodes in one AZ, check `kubectl describe node | grep efa`, use an image "
                 "with the EFA libfabric provider). If the decoder logs 'Failed to allocate memory object', raise "
                 "kv_cache.pd_buffer_size or add decode replicas."),
            commands=(f"{logs(prefill_name)} | grep Stored", get_pods, "kubectl describe nodes | grep -i efa"),
            inputs=(m.KV_STORE_PUT_TIME,)),
        AlertRule(
            name="DpdKvStoreMetricsAbsent",
            # By count, not rate: at one request a minute the histogram's absence must show too.
            expr=(f"(sum(increase({select(m.MODEL_INVOCATIONS.name, s.prefill, POST)}[{SLOW_WINDOW}])) "
                  f">= {MIN_REQUESTS_SLOW_WINDOW}) unless on() "
                  f"(count({select(m.KV_STORE_PUT_TIME.name + '_count', s.prefill)}) > 0)"),
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure="the prefiller serves traffic but exports no LMCache store timings",
            meaning=(f"The prefillers served at least {MIN_REQUESTS_SLOW_WINDOW} requests in {SLOW_WINDOW} and no "
                     "lmcache:store_put_time series exists. "
                     "LMCache's metrics live in vLLM's worker processes and reach /metrics only through "
                     "prometheus_client's multiprocess directory; without them DpdKvTransferSlow is blind."),
            fix=("Check `kubectl exec deploy/" + prefill_name + f" -n {spec.namespace} -- curl -s "
                 f"localhost:{spec.port}/metrics | grep lmcache:` (or `hyperpod-dpd verify --smoke`). If empty, "
                 "the worker does not see the PROMETHEUS_MULTIPROC_DIR the chart sets (check the pod's "
                 "environment); meanwhile the KvTransferBelow1GBps log alarm watches the 'Stored ... "
                 "throughput' lines."),
            commands=(metrics_of(prefill_name, "lmcache:"),
                      f"kubectl exec deploy/{prefill_name} -n {ns} -- env | grep PROMETHEUS_MULTIPROC_DIR", smoke),
            inputs=(m.MODEL_INVOCATIONS, m.KV_STORE_PUT_TIME)),
    ]
    candidate = candidate_prompt_bound(spec)
    share = f"{ev.MIN_ARRIVED_SHARE:.0%}"
    # Per decoder (the evidence model's kv_short over the prompts above the threshold's bucket bound), or, for
    # the prompts between the bound below the threshold and it, which the histogram cannot tell from local
    # ones: every decoder at once, when none of them received a token of what its candidates needed.
    nothing_arrived = ENDPOINT.eq(ev.arrived_share(ENDPOINT, endpoint_window(decoder_window(spec, candidate))),
                                  ENDPOINT.const(0))
    rules.append(AlertRule(
        name="DpdKvNotTransferred",
        expr=(f"(({ev.kv_short(PER_POD, decoder_window(spec, bound))}) "
              f"or (({tokens(m.LOCAL_COMPUTE)} > 0) and on() {nothing_arrived})) "
              f"and on() (sum{disaggregated} >= {MIN_LONG_PROMPTS})"),
        hold="5m", severity=Severity.CRITICAL,
        failure="a decoder recomputes long prompts instead of receiving their KV cache",
        meaning=(f"Of the tokens of the long prompts a decoder served in {KV_WINDOW} (at least {MIN_LONG_PROMPTS} "
                 f"above routing.threshold: vLLM's prompt-length histogram above {bound} tokens, counted at "
                 f"{bound} each), less than {share} of what its own prefix cache did not hold arrived from a "
                 "prefiller (external_kv_transfer), and it computed more than "
                 f"{spec.kv_cache.chunk_tokens} tokens per long prompt itself, while the router disaggregated; or "
                 f"no decoder received a single token for its prompts above {candidate} tokens (the prompts "
                 f"between {candidate} and {bound} tokens, which the histogram cannot tell from local ones). "
                 "DPD then costs a prefill and saves nothing for those prompts. Counted per decoder (pod_name), "
                 "so one broken decoder of several, one broken prefiller of two (half the prompts recomputed) "
                 "and a transfer that loses part of each prompt all show, and by requests, so one request per "
                 "five minutes is enough."),
        fix=("Both roles must hash alike and agree on roles: keep kv_cache.hash_seed (PYTHONHASHSEED) "
             "identical on prefill and decode, use the same image for both, and check the LMCache pd_role "
             "lines ('sender' on prefill, 'receiver' on decode) in the pod logs. 'Retrieved N out of M' with "
             "N < M in the decoder's log is a partial transfer: a prefiller's PD buffer too small "
             "(kv_cache.pd_buffer_size) or one prefiller failing (compare the prefill pods' logs). If the "
             f"decoder's container restarted (DpdDecodeRestarted), the prefillers still write to its old NIXL "
             f"agent: {restart_prefill}."),
        commands=(f"{logs(decode_name)} | grep Retrieved", metrics_of(decode_name, "vllm:prompt_tokens_by_source"),
                  smoke),
        inputs=(m.REQUEST_PROMPT_TOKENS, m.PROMPT_TOKENS_BY_SOURCE, m.DPD_DISAGGREGATED)))
    rules += [
        AlertRule(
            name="DpdRouterFallback",
            expr=(f"sum{s.router_series(m.DPD_FALLBACK.name, lambda sel: f'increase({sel}[{LONG_WINDOW}])')} "
                  "> 0"),
            hold="5m", severity=Severity.WARNING,
            failure="the router falls back from the disaggregated path",
            meaning=("The router counted fallbacks, which AWS's dashboard labels 'Fallback (error)' (AWS's DPD "
                     "page calls them under-threshold requests; the router is closed source)."),
            fix=(f"Check that the prefill pods are Ready (kubectl get pods -n {spec.namespace}), read the router's "
                 f"log ({router_log}) and the prefiller's error ratio."),
            commands=(get_pods, f"{router_log} --tail=200", logs(prefill_name)),
            inputs=(m.DPD_FALLBACK,)),
        AlertRule(
            name="DpdErrorRatioHigh",
            expr=_error_rule_expr(s, t.error_ratio, floor),
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"more than {t.error_ratio:.0%} of POST requests fail with a server error on one role",
            meaning=(f"5xx over all POST invocations at the role's sidecar, above {t.error_ratio:.0%} for 10 "
                     f"minutes: over 5 minutes while the role serves more than {floor} requests/s, or over 30 "
                     f"minutes with at least {MIN_REQUESTS_SLOW_WINDOW} requests and {MIN_FAILURES_SLOW_WINDOW} "
                     "failures. 4xx (the client's fault) are "
                     "DpdClientErrorRatioHigh."),
            fix=error_fix, commands=error_commands, inputs=(m.MODEL_ERRORS, m.MODEL_INVOCATIONS)),
        AlertRule(
            name="DpdErrorRatioCritical",
            expr=_error_rule_expr(s, t.error_ratio_critical, floor),
            hold="5m", severity=Severity.CRITICAL,
            failure=f"more than {t.error_ratio_critical:.0%} of POST requests fail with a server error on one role",
            meaning=(f"5xx over all POST invocations at the role's sidecar, above {t.error_ratio_critical:.0%} "
                     f"for 5 minutes: over 5 minutes while the role serves more than {floor} requests/s, or over "
                     f"30 minutes with at least {MIN_REQUESTS_SLOW_WINDOW} requests and {MIN_FAILURES_SLOW_WINDOW} "
                     "failures, so a total outage at one "
                     "request per five minutes pages."),
            fix=error_fix, commands=error_commands, inputs=(m.MODEL_ERRORS, m.MODEL_INVOCATIONS)),
        AlertRule(
            name="DpdClientErrorRatioHigh",
            expr=_error_rule_expr(s, t.error_ratio_critical, floor, CLIENT_ERROR),
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"more than {t.error_ratio_critical:.0%} of POST requests are refused as client errors",
            meaning=("4xx over all POST invocations at the role's sidecar (a prompt beyond max_model_len, a bad "
                     "request body, a wrong model name): the clients' fault, so a warning, never a page."),
            fix=("Read the failing role's log for the refused requests (kubectl logs deploy/<resource_name> -n "
                 f"{spec.namespace}): prompts longer than max_model_len ({spec.max_model_len}) or a model name "
                 "other than the served one are the usual causes."),
            commands=(f"{logs(decode_name)} | grep -E ' 4[0-9]{{2}} '",
                      f"{logs(prefill_name)} | grep -E ' 4[0-9]{{2}} '",
                      f"kubectl exec deploy/{decode_name} -n {ns} -- curl -s localhost:{spec.port}/v1/models"),
            inputs=(m.MODEL_ERRORS, m.MODEL_INVOCATIONS)),
        AlertRule(
            name="DpdPrefillQueueDeep",
            expr=f"{prefill_waiting(s)} > {t.prefill_queue}",
            hold="5m", severity=Severity.WARNING,
            failure="requests queue for prefill",
            meaning=(f"More than {t.prefill_queue} requests wait on a prefiller for 5 minutes; TTFT grows with "
                     "the queue."),
            fix=("Add prefill replicas (prefill.replicas or prefill.autoscaling); or raise routing.threshold so "
                 "that shorter prompts go straight to the decoder."),
            commands=prefill_load_commands,
            inputs=(m.REQUESTS_WAITING,)),
        AlertRule(
            name="DpdPrefillSaturated",
            # In flight at the router counts running prefills too: only more than every reporting
            # prefiller can run at once (pods x --max-num-seqs) means requests queue.
            expr=f"{inflight_prefill(s)} > on() {prefill_capacity(s, seqs)}",
            hold="5m", severity=Severity.WARNING,
            failure="more prefill requests are in flight than the prefillers can run",
            meaning=(f"The router holds more prefill requests than the prefill pods x max_num_seqs ({seqs}) for "
                     "5 minutes: the rest queue and TTFT grows."),
            fix=("Add prefill replicas (prefill.replicas or prefill.autoscaling); or raise routing.threshold so "
                 "that shorter prompts go straight to the decoder."),
            commands=prefill_load_commands,
            inputs=(m.DPD_INFLIGHT_PREFILL, m.REQUESTS_RUNNING)),
        AlertRule(
            name="DpdDecodeKvCacheFull",
            expr=f"max({select(m.KV_CACHE_USAGE.name, s.decode)}) > {_num(t.decode_kv_cache_usage)}",
            hold="5m", severity=Severity.WARNING,
            failure="the decoder's KV cache is nearly full",
            meaning=(f"vLLM's KV cache usage on a decoder is above {t.decode_kv_cache_usage:.0%} for 5 minutes: "
                     "the decoder is at capacity and will preempt requests."),
            fix=decoder_full_fix, commands=decode_load_commands, inputs=(m.KV_CACHE_USAGE,)),
        AlertRule(
            name="DpdDecodePreempting",
            expr=f"sum(increase({select(m.PREEMPTIONS.name, s.decode)}[{RATE_WINDOW}])) > 0",
            hold="5m", severity=Severity.WARNING,
            failure="the decoder preempts requests",
            meaning="vLLM preempted requests on a decoder in each 5-minute window for 5 minutes: "
                    "it ran out of KV cache blocks and recomputes the preempted requests.",
            fix=decoder_full_fix, commands=decode_load_commands, inputs=(m.PREEMPTIONS,)),
    ]
    for role, matchers, name in (("decode", s.decode, decode_name), ("prefill", s.prefill, prefill_name)):
        # vLLM updates both on every engine step (loggers.py: the running gauge from the scheduler stats, the
        # generation counter from the iteration stats; a prefill request emits its one token there too):
        # requests held for 5 minutes and no token is a hung engine, per pod (the evidence model's stalled).
        hung = ev.stalled(PER_POD, fewest_running=f"sum by ({pod}) (min_over_time("
                                                   f"{select(m.REQUESTS_RUNNING.name, matchers)}[{RATE_WINDOW}]))",
                          generated_tokens=per_decoder_of(s, m.GENERATION_TOKENS.name, fn="increase",
                                                          window=RATE_WINDOW, matchers=matchers))
        consequence = ("its clients wait until they time out" if role == "decode" else
                       "the requests it holds never reach a decoder, and the router keeps sending it more")
        rules.append(AlertRule(
            name=f"Dpd{role.capitalize()}Stalled", expr=hung,
            hold="5m", severity=Severity.CRITICAL,
            failure=f"a {role} pod holds running requests and emits no token",
            meaning=(f"vLLM on a {role} pod reports running requests throughout 5 minutes but its generation-token "
                     "counter did not move for 10 minutes: the engine is hung (a stuck NCCL collective, a "
                     f"KV transfer that never completes) and {consequence}. One hung pod of several pages: the "
                     "test is per pod."),
            fix=(f"kubectl logs the {role} pod (-n {spec.namespace}) for the last engine step and any NCCL or "
                 "LMCache error, then delete the pod so it restarts" + (
                     f" (a restarted decoder needs the prefillers restarted too: {restart_prefill})."
                     if role == "decode" else "; the decoders need nothing (DpdPrefillRestarted).")),
            commands=(get_pods, logs(name),
                      metrics_of(name, "-e vllm:num_requests_running -e vllm:generation_tokens")),
            inputs=(m.REQUESTS_RUNNING, m.GENERATION_TOKENS)))
    long_total = f"sum({long_prompts})"
    off = " or ".join(ev.not_disaggregating(ENDPOINT, long_prompts=long_total, disaggregated=sent)
                      for sent in (f"sum{disaggregated}",
                                   f"sum(increase({select(m.MODEL_INVOCATIONS.name, s.prefill, POST)}[{KV_WINDOW}]))"))
    rules.append(AlertRule(
        name="DpdNotDisaggregating", expr=off, hold=LONG_WINDOW, severity=Severity.WARNING,
        failure="long prompts reach the decoders but none goes through a prefiller: DPD is off",
        meaning=(f"The decoders served at least {MIN_LONG_PROMPTS} prompts above routing.threshold (vLLM's "
                 f"prompt-length histogram above {bound} tokens) in {KV_WINDOW}, while the router counted no "
                 "disaggregated request or the prefillers' sidecar no request at all: the router sends long "
                 "prompts straight to the decoders, with no error anywhere. Every answer is right and every "
                 "prefill GPU is idle."),
        fix=("Compare the router's routing threshold with the spec (kubectl get inferenceendpointconfig "
             f"{spec.name} -n {ns} -o yaml), read its 'Conditional routing ... disaggregate=' lines, and check "
             "that the prefill pods are Ready and registered with the router."),
        commands=(f"{router_log} --tail=200 | grep 'Conditional routing'", get_pods,
                  f"kubectl get inferenceendpointconfig {spec.name} -n {ns} -o yaml"),
        inputs=(m.REQUEST_PROMPT_TOKENS, m.DPD_DISAGGREGATED, m.MODEL_INVOCATIONS)))
    if spec.slo is not None and spec.slo.ttft_ms is not None:
        seconds = spec.slo.ttft_ms / 1000
        p90 = router_quantile(m.DPD_E2E_TTFT, s)
        observed = f"sum{s.router_series(m.DPD_E2E_TTFT.name + '_count', per_second)}"
        # The router's buckets are undocumented, so two ways the p90 cannot be read are told apart at run
        # time, each with a value that is never NaN: no finite bucket at all (histogram_quantile gives NaN;
        # the value is the request rate), and more than 10% of requests above the top finite bucket
        # (histogram_quantile caps at that bound, so a target above it could never be breached; the value is
        # the share above it). Comparisons drop NaN, so a quiet endpoint (0/0) pages nobody.
        finite = s.router_series(m.DPD_E2E_TTFT.bucket(), per_second, FINITE_BUCKETS)
        top_finite = f"max(sum by (le) {finite})"
        beyond_top = f"(1 - ({top_finite} / {observed}))"
        rules.append(AlertRule(
            name="DpdTtftSloBreach",
            expr=(f"({p90} > {_num(seconds)}) or (({observed} > 0) and on() ({p90} != {p90})) "
                  f"or ({beyond_top} > {_num(1 - QUANTILE)})"),
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"p90 end-to-end TTFT is above the {spec.slo.ttft_ms} ms SLO, or cannot be measured",
            meaning="The router's end-to-end time to first token (prefill, KV transfer, first decode step) "
                    "breaks slo.ttft_ms for 10 minutes, or requests are observed but the p90 cannot be read: the "
                    "histogram has no finite bucket (NaN), or more than 10% of requests lie above its top finite "
                    "bucket, where histogram_quantile stops.",
            fix=("If the prefill queue is deep, add prefill replicas; if the KV transfer is slow, see "
                 "DpdKvTransferSlow; raising routing.threshold sends more short prompts straight to the decoder. "
                 "If the p90 cannot be measured, read the router's dpd_e2e_ttft_seconds_bucket bounds in the "
                 "workspace: the SLO needs a finite bucket above it."),
            commands=ttft_commands,
            inputs=(m.DPD_E2E_TTFT,)))
    if spec.slo is not None and spec.slo.tpot_ms is not None:
        seconds = spec.slo.tpot_ms / 1000
        rules.append(AlertRule(
            name="DpdTpotSloBreach",
            expr=f"{quantile(m.INTER_TOKEN_LATENCY, s.decode)} > {_num(seconds)}",
            hold=LONG_WINDOW, severity=Severity.WARNING,
            failure=f"p90 time per output token is above the {spec.slo.tpot_ms} ms SLO",
            meaning="The decoder's inter-token latency breaks slo.tpot_ms for 10 minutes. If TPOT climbs while "
                    "output throughput plateaus, the single decoder is saturated.",
            fix=decoder_full_fix, commands=decode_load_commands, inputs=(m.INTER_TOKEN_LATENCY,)))
    rules.extend(demand_absent_rules(spec, s))
    rules.extend(burn_rate_rules(spec))
    prefill_wanted = select(m.DEPLOYMENT_WANTED.name, s.deployment(prefill_name))
    for role, matchers in (("prefill", s.prefill), ("decode", s.decode)):
        expr = f"absent_over_time({select(m.REQUESTS_RUNNING.name, matchers)}[{LONG_WINDOW}])"
        inputs: tuple[m.Metric, ...] = (m.REQUESTS_RUNNING,)
        meaning = (f"Prometheus received no vLLM series from {role}-{spec.name} for 10 minutes: every other "
                   "DPD alert of this endpoint is blind.")
        if role == "decode":
            # DpdKvNotTransferred reads this family; vLLM creates its children at start, so absence is a fault.
            external = select(m.PROMPT_TOKENS_BY_SOURCE.name, matchers, f'source="{m.EXTERNAL_KV_TRANSFER}"')
            expr += f" or absent_over_time({external}[{LONG_WINDOW}])"
            inputs += (m.PROMPT_TOKENS_BY_SOURCE,)
        elif prefill_may_scale_to_zero(spec):
            # The spec lets prefill scale to zero: no pod, no series, nothing wrong.
            # ... and while it scales up from zero: no pod is Ready yet (loading a model takes minutes), which
            # DpdNoReadyPod judges with its longer hold.
            prefill_available = select(m.DEPLOYMENT_AVAILABLE.name, s.deployment(prefill_name))
            expr = (f"({expr}) unless on() (max({prefill_wanted}) == 0) "
                    f"unless on() (max({prefill_available}) == 0)")
            inputs += (m.DEPLOYMENT_WANTED, m.DEPLOYMENT_AVAILABLE)
            meaning += (" Quiet while kube-state-metrics reports the Deployment scaled to zero, as the spec allows, "
                        "or no prefill pod Ready yet (a cold start from zero; DpdNoReadyPod judges that).")
        rules.append(AlertRule(
            name=f"Dpd{role.capitalize()}MetricsAbsent",
            commands=(get_pods, metrics_of(role_deployment(spec, role), m.REQUESTS_RUNNING.name), metrics_status),
            expr=expr, hold="5m", severity=Severity.WARNING,
            failure=f"no vLLM metrics from the {role} pods",
            meaning=meaning,
            fix=("Check that the pods run, that metrics.model_metrics_port equals port (vLLM serves /metrics on "
                 "its API port; the operator scrapes 8080 by default), that no --disable-log-stats is set, and "
                 f"`kubectl get inferenceendpointconfig {spec.name} -n {spec.namespace} "
                 "-o jsonpath='{.status.metricsStatus}'` (expect state Enabled)."),
            inputs=inputs))
    rules.append(AlertRule(
        name="DpdRouterMetricsAbsent",
        expr=(f"absent_over_time({select(m.DPD_INFLIGHT_PREFILL.name, s.routers[0])}[{LONG_WINDOW}]) "
              f"and on() absent_over_time({select(m.DPD_INFLIGHT_PREFILL.name, s.routers[1])}[{LONG_WINDOW}])"),
        hold="5m", severity=Severity.WARNING,
        failure="no series from the endpoint's router",
        meaning=("Prometheus received no dpd_routing_inflight_prefill from the router for 10 minutes under "
                 "either label form: the router is gone or not scraped, and every routing alert is blind. The "
                 "router's series and their resource_name are named only by AWS's dashboard."),
        fix=(f"kubectl get deploy/{router_deployment(spec)} -n {OPERATOR_NAMESPACE} and read its log "
             f"({router_log}); if it runs, compare the resource_name of its dpd_* series in the workspace with "
             "the rule."),
        commands=(router_get, f"{router_log} --tail=200", f"kubectl get pods -n {OPERATOR_NAMESPACE}"),
        inputs=(m.DPD_INFLIGHT_PREFILL,)))
    available = select(m.DEPLOYMENT_AVAILABLE.name, s.namespace, f'deployment=~"{prefill_name}|{decode_name}"')
    wanted = select(m.DEPLOYMENT_WANTED.name, s.namespace, f'deployment=~"{prefill_name}|{decode_name}"')
    namespace_wanted = select(m.DEPLOYMENT_WANTED.name, s.namespace)
    rules.append(AlertRule(
        name="DpdNoReadyPod",
        # A role scaled to zero on purpose has nothing to be Ready. A decode Deployment gone while
        # kube-state-metrics reports the namespace's other Deployments is as unavailable as one with no
        # Ready pod; kube-state-metrics not shipped at all is DpdKubeStateMetricsAbsent, not a page.
        expr=(f"({available} == 0 and on(namespace, deployment) {wanted} > 0) or "
              f"(absent_over_time({select(m.DEPLOYMENT_WANTED.name, s.deployment(decode_name))}[{LONG_WINDOW}]) "
              f"and on() count({namespace_wanted}) > 0)"),
        hold=AVAILABILITY_HOLD, severity=Severity.CRITICAL,
        failure="a role of the endpoint has no Ready pod",
        meaning=("kube-state-metrics reports no available replica of the prefill or decode Deployment while it "
                 "wants one, for 15 minutes (longer than a 70B model takes to load from S3): without a Ready "
                 "decoder the endpoint answers nothing; without a Ready prefiller long prompts fail or fall back."),
        fix=(f"kubectl get pods -n {spec.namespace} and describe the pods that are not Ready: Pending means no "
             "node fits (GPUs, EFA), CrashLoopBackOff means read the container log (out of memory at start, a "
             "max_model_len beyond the model's context window, a bad flag)."),
        commands=(get_pods, f"kubectl describe deploy/{decode_name} deploy/{prefill_name} -n {ns}",
                  f"kubectl get events -n {ns} --sort-by=.lastTimestamp"),
        inputs=(m.DEPLOYMENT_AVAILABLE, m.DEPLOYMENT_WANTED)))
    router_wanted = select(m.DEPLOYMENT_WANTED.name, _router_deployment_matchers(spec))
    decode_wanted = select(m.DEPLOYMENT_WANTED.name, s.deployment(decode_name))
    rules.append(AlertRule(
        name="DpdRouterDown",
        # Every request enters through the router: with none Ready nothing reaches the pods, so no
        # ratio or KV alert can fire. Gone altogether counts while kube-state-metrics reports the decoder.
        expr=(f"({router_available(spec)} < {MIN_AVAILABLE} and on(namespace, deployment) {router_wanted} > 0) or "
              f"(absent_over_time({router_wanted}[{LONG_WINDOW}]) and on() count({decode_wanted}) > 0)"),
        hold="5m", severity=Severity.CRITICAL,
        failure="the endpoint's router has no Ready pod",
        meaning=(f"kube-state-metrics reports no available replica of {router_deployment(spec)} in "
                 f"{OPERATOR_NAMESPACE} (or no such Deployment while the decoder exists) for 5 minutes: every "
                 "request enters through the router, so the endpoint answers nothing."),
        fix=(f"kubectl describe deploy/{router_deployment(spec)} -n {OPERATOR_NAMESPACE} and read its log "
             f"({router_log} --previous); the operator recreates it from the InferenceEndpointConfig "
             f"(kubectl get inferenceendpointconfig {spec.name} -n {spec.namespace} -o yaml, see its status)."),
        commands=(router_get, f"kubectl describe deploy/{router_deployment(spec)} -n {OPERATOR_NAMESPACE}",
                  f"{router_log} --previous"),
        inputs=(m.DEPLOYMENT_AVAILABLE, m.DEPLOYMENT_WANTED)))
    rules.append(AlertRule(
        name="DpdKubeStateMetricsAbsent",
        expr=f"absent_over_time({wanted}[{LONG_WINDOW}])",
        hold=AVAILABILITY_HOLD, severity=Severity.WARNING,
        failure="no kube-state-metrics Deployment series for the endpoint's namespace",
        meaning=("kube_deployment_spec_replicas is absent for both roles' Deployments for 25 minutes: DpdNoReadyPod "
                 "and "
                 "DpdRouterDown are blind. The HyperPod add-on's clusterMetrics is not documented to ship "
                 "kube_deployment_*, so this may hold from the first deploy; it never pages."),
        fix=("Check the add-on's clusterMetrics level and that kube-state-metrics runs (kubectl get pods -n "
             "hyperpod-observability); meanwhile `hyperpod-dpd verify` reads the Deployments directly."),
        commands=("kubectl get pods -n hyperpod-observability", f"kubectl get deploy -n {ns}", verify),
        inputs=(m.DEPLOYMENT_WANTED,)))
    for role, name in (("decode", decode_name), ("prefill", prefill_name)):
        restarts = select(m.CONTAINER_RESTARTS.name, s.pod(name), f'container="{name}"')
        expr = f"sum(increase({restarts}[{KV_WINDOW}])) > 0"
        if role == "decode":
            rules.append(AlertRule(
                name="DpdDecodeRestarted",
                commands=(f"kubectl logs deploy/{name} -n {ns} -c {name} --previous", restart_prefill, smoke),
                expr=expr, hold="0m", severity=Severity.WARNING,
                failure="a decode container restarted; the prefillers still hold its old NIXL peer",
                meaning=("LMCache 0.4.3's PD sender (on the prefiller) connects to each decoder once, keyed by "
                         "its host and port, and never reconnects (pd_backend.py l.334-362 initialized_peers, "
                         "l.423 receiver_id); every process gets a new NIXL agent (nixl_channel.py l.616). A "
                         "restarted decode container keeps its pod IP and ports, so the prefillers keep writing "
                         "to the dead agent: transfers fail or block (pd_backend.py l.364-372) until they restart."),
                fix=(f"{restart_prefill}, then check that DpdKvNotTransferred stays quiet; read the restarted "
                     f"container's previous log (kubectl logs --previous -c {name}) for why it restarted."),
                inputs=(m.CONTAINER_RESTARTS,)))
        else:
            rules.append(AlertRule(
                name="DpdPrefillRestarted",
                commands=(f"kubectl logs deploy/{name} -n {ns} -c {name} --previous", get_pods,
                          f"kubectl get events -n {ns} --sort-by=.lastTimestamp"),
                expr=expr, hold="0m", severity=Severity.WARNING,
                failure="a prefill container restarted",
                meaning=("The requests it was prefilling failed. The decoders need nothing: LMCache 0.4.3's PD "
                         "receiver registers a restarted sender's new NIXL agent when it first connects "
                         "(nixl_channel.py l.258-286), so KV transfers resume by themselves."),
                fix=(f"Read the restarted container's previous log (kubectl logs --previous -c {name} -n "
                     f"{spec.namespace}) for why it restarted: out of memory, a failed health check, an "
                     "LMCache or NIXL error. No decoder restart is needed."),
                inputs=(m.CONTAINER_RESTARTS,)))
    xid = select(m.GPU_XID.name, s.pod(prefill_name, decode_name))
    hardware = " or ".join(f"{xid} == {code}" for code in HARDWARE_XIDS)
    rules.append(AlertRule(
        name="DpdGpuXidError",
        expr=(f"max by (namespace, pod, gpu) (({hardware}) "
              f"and on(namespace, pod, gpu, Hostname) changes({xid}[{XID_WINDOW}]) > 0)"),
        hold="0m", severity=Severity.CRITICAL,
        failure="a GPU of the endpoint raised a new hardware Xid error",
        meaning=("DCGM reports the code of the last Xid error on a GPU that serves this endpoint (value = the "
                 f"Xid) and keeps it until the exporter restarts, so only a value that changed within {XID_WINDOW} "
                 f"is new. Only hardware Xids ({', '.join(map(str, HARDWARE_XIDS))}: NVIDIA's Xid catalog "
                 "resolves them by a GPU reset or a node reboot) page; an application Xid (13, 31, 43, 45) from "
                 "a faulting or killed process does not."),
        fix=("Look the code up in NVIDIA's Xid catalog; for a hardware Xid let HyperPod replace the node "
             "(kubectl label node <node> sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement) "
             "so the pod reschedules."),
        commands=(get_pods, "kubectl describe node <node>",
                  "kubectl get node <node> -L sagemaker.amazonaws.com/node-health-status"),
        inputs=(m.GPU_XID,)))
    return tuple(rules)


def inhibit_rules() -> list[dict[str, Any]]:
    """Alertmanager inhibitions: an alert whose input is missing silences the ones that would misread it, and
    a burn-rate page its own ticket (SRE workbook ch.5: the slow tiers are for burns no page sees), per role
    for the server-error budget."""
    endpoint = ["dpd_namespace", "dpd_endpoint"]
    pairs = (("DpdDecodeMetricsAbsent",
              "DpdKvNotTransferred|DpdDecodeKvCacheFull|DpdDecodePreempting|DpdDecodeStalled", endpoint),
             ("DpdNoReadyPod", "DpdPrefillMetricsAbsent|DpdDecodeMetricsAbsent|DpdKvStoreMetricsAbsent", endpoint),
             *((f"{name}Fast", f"{name}Slow", [*endpoint, "resource_name"]) for name in BURN_ALERTS.values()))
    return [{"source_matchers": [f'alertname="{source}"'], "target_matchers": [f'alertname=~"{targets}"'],
             "equal": equal} for source, targets, equal in pairs]


# Between the namespace and the name: a character neither a Kubernetes namespace nor the endpoint's name (DNS
# labels) can hold, and that AMP's rule groups namespace names allow, so (team-a, dpd) and (team, a-dpd) differ.
GROUP_SEPARATOR = "_"


def rule_group_name(spec: DpdSpec) -> str:
    """The rule group's (and AMP rule groups namespace's) name: one per (namespace, name), never shared."""
    return f"dpd{GROUP_SEPARATOR}{spec.namespace}{GROUP_SEPARATOR}{spec.name}"


def rules_document(spec: DpdSpec) -> dict[str, Any]:
    """The Prometheus rule file for ``spec``: one group evaluated every minute, the SLO recording rules first.

    Prometheus evaluates a group's rules in order, so the burn-rate alerts read this evaluation's records.
    """
    recorded = [rule.to_prometheus(spec) for rule in recording_rules(spec)]
    return {"groups": [{"name": rule_group_name(spec), "interval": EVALUATION_INTERVAL,
                        "rules": [*recorded, *(rule.to_prometheus(spec) for rule in alert_rules(spec))]}]}


def rules_yaml(spec: DpdSpec) -> str:
    """The rule file as YAML, byte-identical for the same spec."""
    return yaml.safe_dump(rules_document(spec), sort_keys=False, width=10_000, allow_unicode=False)


# The endpoint the runbooks are written for: placeholders a reader replaces with their own names.
RUNBOOK_ENDPOINT = "<name>"
RUNBOOK_NAMESPACE = "<namespace>"


def alert_variants(spec: DpdSpec) -> tuple[AlertRule, ...]:
    """Every alert the code can emit, once each, in render order, rendered for ``spec`` with every option that
    adds an alert or changes one: both SLO targets, prefill allowed to scale to zero, and SLO autoscaling.

    ``docs/alerts.md`` has one runbook section per rule here (``scripts/docs.py`` writes them).
    """
    slo = spec.slo if spec.slo is not None else SloSpec()
    full = dataclasses.replace(spec, slo=dataclasses.replace(slo, ttft_ms=slo.ttft_ms or 2000,
                                                             tpot_ms=slo.tpot_ms or 50))
    zero = dataclasses.replace(full, prefill=dataclasses.replace(full.prefill, replicas=0))
    seen: dict[str, AlertRule] = {}
    for variant in (full, zero, slo_autoscaled(full)):
        for rule in alert_rules(variant):
            seen.setdefault(rule.name, rule)
    return tuple(seen.values())
