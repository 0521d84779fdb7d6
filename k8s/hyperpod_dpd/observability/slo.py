"""SLO burn-rate alerts: multi-window, multi-burn-rate, from recording rules (Google's SRE workbook, ch.5).

For each service-level indicator (TTFT and TPOT under their targets, requests without a server error) the
recording rules hold the share of bad events over seven windows; an alert fires when the error budget
(1 - ``slo.objective``) burns faster than a tier's factor over a long window *and* its short window
(1/12 of the long one), so it pages soon after a fast burn starts and stops soon after it ends. Latency
SLIs read histogram buckets: bad = 1 - rate(bucket{le=target}) / rate(count), so the target must be a
bucket bound the exporter emits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, ROUTER_CONTAINER, role_deployment, router_deployment
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.rule import (
    AlertRule,
    RecordingRule,
    Severity,
    endpoint_labels,
    failed_rate,
    invocation_rate,
    num,
)
from hyperpod_dpd.observability.selectors import EndpointSelectors, le_matcher, select
from hyperpod_dpd.spec import DpdSpec

# Window -> seconds, shortest first: every window a tier below reads.
WINDOWS = {"5m": 300, "30m": 1800, "1h": 3600, "2h": 7200, "6h": 21600, "1d": 86400, "3d": 259200}
# Two evaluations, so one evaluation over a scrape gap is not a page.
BURN_HOLD = "2m"
# At least this many bad events in the long window: one slow or failed request at low traffic burns
# 100% of a window's budget but is no incident.
MIN_BAD_EVENTS = 2


@dataclass(frozen=True, kw_only=True)
class BurnTier:
    """Fire when the budget burns faster than ``factor`` over ``long`` and over ``short`` (= long / 12)."""

    factor: float
    long: str
    short: str
    severity: Severity


# The SRE workbook, ch.5 "Alerting on SLOs" (multiwindow, multi-burn-rate alerts): page on 2% of a 30-day
# budget spent in 1 hour (14.4x) or 5% in 6 hours (6x), ticket on 10% in 3 days (1x), each with a short
# window of 1/12 of its long one. The 3x ticket over 1 day (10% in a day) is added so that a burn between
# the 6x page and the 1x ticket is seen within a day rather than three.
BURN_TIERS = (BurnTier(factor=14.4, long="1h", short="5m", severity=Severity.CRITICAL),
              BurnTier(factor=6, long="6h", short="30m", severity=Severity.CRITICAL),
              BurnTier(factor=3, long="1d", short="2h", severity=Severity.WARNING),
              BurnTier(factor=1, long="3d", short="6h", severity=Severity.WARNING))
PAGE_TIERS = tuple(t for t in BURN_TIERS if t.severity is Severity.CRITICAL)
TICKET_TIERS = tuple(t for t in BURN_TIERS if t.severity is Severity.WARNING)
FASTEST = BURN_TIERS[0]
# Indicator -> the stem of its two alerts (``...Fast`` pages, ``...Slow`` tickets).
BURN_ALERTS = {"ttft": "DpdTtftBudgetBurn", "tpot": "DpdTpotBudgetBurn", "server_errors": "DpdErrorBudgetBurn"}


def tpot_bound(tpot_ms: int) -> float:
    """The bucket bound of vLLM's inter-token latency histogram the TPOT SLI counts as good: the largest at or
    under the target, so a token between that bound and the target counts as slow, never the reverse.

    Validation refuses a target below the first bound and warns, naming this bound, when it is not one.
    """
    target = tpot_ms / 1000
    buckets = m.INTER_TOKEN_LATENCY.buckets
    return max((b for b in buckets if b <= target + 1e-12), default=buckets[0])


@dataclass(frozen=True, kw_only=True)
class Sli:
    """One indicator: the bad share and the event rate over a window, and what to say about it.

    :param key: the metric part of the recording rules' names.
    :param level: the labels the recorded series keep (the ``level`` part of the names).
    :param events: what one event is, for the texts ("request", "output token").
    """

    key: str
    level: str
    title: str
    events: str
    bad_ratio: Callable[[str], str]
    event_rate: Callable[[str], str]
    inputs: tuple[m.Metric, ...]

    def ratio_record(self, window: str) -> str:
        return f"{self.level}:dpd_{self.key}_bad:ratio_rate{window}"

    def rate_record(self, window: str) -> str:
        return f"{self.level}:dpd_{self.key}_events:rate{window}"


def _histogram_bad(good: Callable[[str], str], total: Callable[[str], str]) -> Callable[[str], str]:
    return lambda window: f"1 - ({good(window)} / {total(window)})"


def slis(spec: DpdSpec) -> tuple[Sli, ...]:
    """The spec's indicators: TTFT and TPOT when their targets are set, server errors whenever ``slo:`` is."""
    slo = spec.slo
    if slo is None or not spec.metrics.enabled:
        return ()
    s = EndpointSelectors.of(spec)
    found = []
    if slo.ttft_ms is not None:
        le = le_matcher(slo.ttft_ms / 1000)

        def router_rate(metric: str, *extra: str) -> Callable[[str], str]:
            return lambda w: f"sum{s.router_series(metric, lambda sel: f'rate({sel}[{w}])', *extra)}"

        count = router_rate(m.DPD_E2E_TTFT.name + "_count")
        found.append(Sli(key="ttft", level="dpd_endpoint", title=f"TTFT over {slo.ttft_ms} ms", events="request",
                         bad_ratio=_histogram_bad(router_rate(m.DPD_E2E_TTFT.bucket(), le), count),
                         event_rate=count, inputs=(m.DPD_E2E_TTFT,)))
    if slo.tpot_ms is not None:
        le = le_matcher(tpot_bound(slo.tpot_ms))

        def decode_rate(series: str, *extra: str) -> Callable[[str], str]:
            return lambda w: f"sum(rate({select(series, s.decode, *extra)}[{w}]))"

        count = decode_rate(m.INTER_TOKEN_LATENCY.name + "_count")
        found.append(Sli(key="tpot", level="dpd_endpoint", title=f"TPOT over {num(tpot_bound(slo.tpot_ms) * 1000)} ms",
                         events="output token",
                         bad_ratio=_histogram_bad(decode_rate(m.INTER_TOKEN_LATENCY.bucket(), le), count),
                         event_rate=count, inputs=(m.INTER_TOKEN_LATENCY,)))
    # 0 rather than nothing while no request failed: the sidecar creates the error series with the first error.
    found.append(Sli(key="server_errors", level="resource_name", title="server errors (5xx)", events="request",
                     bad_ratio=lambda w: (f"({failed_rate(s.pods, w)} or {invocation_rate(s.pods, w)} * 0) / "
                                          f"{invocation_rate(s.pods, w)}"),
                     event_rate=lambda w: invocation_rate(s.pods, w), inputs=(m.MODEL_ERRORS, m.MODEL_INVOCATIONS)))
    return tuple(found)


def recording_rules(spec: DpdSpec) -> tuple[RecordingRule, ...]:
    """Per indicator: the bad share over every window, the event rate over every long window."""
    rules = []
    longs = {t.long for t in BURN_TIERS}
    for sli in slis(spec):
        rules += [RecordingRule(record=sli.ratio_record(w), expr=sli.bad_ratio(w)) for w in WINDOWS]
        rules += [RecordingRule(record=sli.rate_record(w), expr=sli.event_rate(w)) for w in WINDOWS if w in longs]
    return tuple(rules)


def budget(spec: DpdSpec) -> float:
    """The error budget: the share of events allowed to be bad."""
    assert spec.slo is not None
    return 1 - spec.slo.objective


def burn_threshold(spec: DpdSpec, tier: BurnTier) -> float:
    """The bad share at which ``tier`` fires: its factor times the budget."""
    return round(tier.factor * budget(spec), 12)


def _condition(spec: DpdSpec, sli: Sli, tier: BurnTier) -> str:
    labels = ", ".join(f'{k}="{v}"' for k, v in endpoint_labels(spec).items())
    limit = num(burn_threshold(spec, tier))
    long_ratio, short_ratio = (f"{sli.ratio_record(w)}{{{labels}}}" for w in (tier.long, tier.short))
    bad_events = f"{long_ratio} * {sli.rate_record(tier.long)}{{{labels}}} * {WINDOWS[tier.long]}"
    return f"({long_ratio} > {limit} and {short_ratio} > {limit} and {bad_events} >= {MIN_BAD_EVENTS})"


def _tiers_text(spec: DpdSpec, tiers: tuple[BurnTier, ...]) -> str:
    return " or ".join(f"{num(t.factor)}x over {t.long} and {t.short} (bad share above "
                       f"{num(burn_threshold(spec, t) * 100)}%)" for t in tiers)


def burn_rate_rules(spec: DpdSpec) -> tuple[AlertRule, ...]:
    """A page (fast burn) and a ticket (slow burn) per indicator, and the TTFT bucket guard."""
    if spec.slo is None:
        return ()
    ns = spec.namespace
    prefill_name, decode_name = role_deployment(spec, "prefill"), role_deployment(spec, "decode")
    router_log = f"kubectl logs -n {OPERATOR_NAMESPACE} deploy/{router_deployment(spec)} -c {ROUTER_CONTAINER}"
    objective = f"{num(spec.slo.objective * 100)}%"
    fixes = {
        "ttft": ("Find the TTFT term that grew: a deep prefill queue (add prefill replicas), a slow KV transfer "
                 "(see DpdKvTransferSlow), or short prompts queueing on the decoder (raise routing.threshold or "
                 "add decode replicas)."),
        "tpot": ("The decoder is saturated or preempts: add decode replicas (decode.replicas or "
                 "decode.autoscaling), or lower decode.max_num_seqs."),
        "server_errors": ("Read the failing role's log (the resource_name label) and describe its pods; see "
                          "DpdErrorRatioCritical for the usual causes."),
    }
    commands = {
        "ttft": (f"kubectl exec deploy/{prefill_name} -n {ns} -- curl -s localhost:{spec.port}/metrics | "
                 "grep vllm:num_requests_waiting",
                 f"{router_log} --tail=200 | grep 'Conditional routing'",
                 f"kubectl logs deploy/{prefill_name} -n {ns} --tail=200 | grep Stored"),
        "tpot": (f"kubectl exec deploy/{decode_name} -n {ns} -- curl -s localhost:{spec.port}/metrics | "
                 "grep -e vllm:num_requests_running -e vllm:num_preemptions",
                 f"kubectl get deploy/{decode_name} -n {ns}", f"kubectl get scaledobject,hpa -n {ns}"),
        "server_errors": (f"kubectl get pods -n {ns} -o wide", f"kubectl logs deploy/{prefill_name} -n {ns} --tail=200",
                          f"kubectl logs deploy/{decode_name} -n {ns} --tail=200"),
    }
    rules = []
    for sli in slis(spec):
        for suffix, tiers, kind in (("Fast", PAGE_TIERS, "pages"), ("Slow", TICKET_TIERS, "tickets")):
            rules.append(AlertRule(
                name=f"{BURN_ALERTS[sli.key]}{suffix}",
                expr=" or ".join(_condition(spec, sli, t) for t in tiers),
                hold=BURN_HOLD, severity=tiers[0].severity,
                failure=f"{sli.title}: the SLO's error budget burns {'fast' if suffix == 'Fast' else 'slowly'}",
                meaning=(f"{sli.events.capitalize()}s with {sli.title} spend the error budget (objective "
                         f"{objective} good, so {num(budget(spec) * 100)}% may be bad) at "
                         f"{_tiers_text(spec, tiers)}, with at least {MIN_BAD_EVENTS} bad {sli.events}s in the "
                         f"long window. This {kind[:-1]} follows the SRE workbook's multi-window, multi-burn-rate "
                         "alerts: the long window says the burn is big enough, the short one that it still goes on."),
                fix=fixes[sli.key], commands=commands[sli.key], inputs=sli.inputs))
    if spec.slo.ttft_ms is not None:
        s = EndpointSelectors.of(spec)
        seconds = spec.slo.ttft_ms / 1000
        observed = s.router_series(m.DPD_E2E_TTFT.name + "_count", lambda sel: f"rate({sel}[30m])")
        bucket = s.router_series(m.DPD_E2E_TTFT.bucket(), lambda sel: sel, le_matcher(seconds))
        rules.append(AlertRule(
            name="DpdTtftSloBucketMissing",
            expr=f"(sum{observed} > 0) unless on() (count{bucket} > 0)",
            hold="15m", severity=Severity.WARNING,
            failure=f"the router's TTFT histogram has no bucket at the {spec.slo.ttft_ms} ms SLO",
            meaning=(f"The router observes requests but exports no dpd_e2e_ttft_seconds bucket with le={num(seconds)}: "
                     "the TTFT burn-rate alerts read that bucket and are blind. The router's bucket bounds are "
                     "documented nowhere, so this cannot be checked at synth time."),
            fix=("Set slo.ttft_ms to a bound the router emits (read the le values of dpd_e2e_ttft_seconds_bucket "
                 "in the workspace); until then DpdTtftSloBreach still watches the p90."),
            commands=(f"kubectl get deploy/{router_deployment(spec)} -n {OPERATOR_NAMESPACE} "
                      "-o jsonpath='{.spec.template.spec.containers[*].image}'",
                      f"{router_log} --tail=50", "hyperpod-dpd verify <spec.yaml>"),
            inputs=(m.DPD_E2E_TTFT,)))
    return tuple(rules)
