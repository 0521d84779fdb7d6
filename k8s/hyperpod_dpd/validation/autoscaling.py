"""Autoscaling: the replica bounds, the KEDA triggers, and scaling that leaves DPD without a role.

See ``docs/checks.md`` for what is checked and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.spec import AutoscalingSpec, CloudWatchTrigger, PrometheusTrigger
from hyperpod_dpd.validation.context import Finding, RuleContext, problem
from hyperpod_dpd.validation.naming import DNS_LABEL

AMP_WORKSPACE = re.compile(
    r"^https://aps-workspaces\.[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+$")
# KEDA's Prometheus scaler reads one number (the query must return a single-element vector): an
# aggregation without grouping (or scalar()) at the top of the query.
SINGLE_VALUE = re.compile(r"^\s*(sum|avg|max|min|count|scalar|histogram_quantile|quantile)\s*\(")
GROUPED = re.compile(r"^\s*(sum|avg|max|min|count|quantile)\s*(by|without)\s*\(|\)\s*(by|without)\s*\([^()]*\)\s*$")


def _scaled_roles(ctx: RuleContext) -> Iterator[tuple[str, AutoscalingSpec]]:
    """The roles that autoscale, with their autoscaling; both rules below read the same pairs."""
    for role_name, role in ctx.spec.roles():
        if role.autoscaling is not None:
            yield role_name, role.autoscaling


def autoscaling(ctx: RuleContext) -> Iterator[Finding]:
    for role_name, scaling in _scaled_roles(ctx):
        field = f"{role_name}.autoscaling"
        if scaling.min_replicas < 0 or scaling.max_replicas < max(1, scaling.min_replicas):
            yield problem(field, f"{scaling.min_replicas}..{scaling.max_replicas}", "needs 0 <= min_replicas <= "
                          "max_replicas and max_replicas >= 1", "fix the bounds")
        elif role_name == "decode" and scaling.min_replicas < 1:
            yield problem(f"{field}.min_replicas", scaling.min_replicas, "must be at least 1: every request, short "
                          "or long, ends on the decoder, so a decoder scaled to zero serves nothing",
                          "set min_replicas: 1 (prefill may scale lower)")
        for name, value in (("polling_interval_seconds", scaling.polling_interval_seconds),
                            ("cooldown_seconds", scaling.cooldown_seconds)):
            if value < 0:
                yield problem(f"{field}.{name}", value, "must not be negative", "use 0 or more seconds")
        if not scaling.triggers:
            yield problem(f"{field}.triggers", [], "autoscaling needs at least one trigger",
                          "add a cloudwatch or prometheus trigger, or remove autoscaling")
        yield from _triggers(field, scaling.triggers)
        if role_name == "decode" and scaling.max_replicas > DECODE_DEPLOYMENTS:
            yield SpecWarning(code="SingleDecoder", field=f"{field}.max_replicas",
                          message="the current operator runs one decode deployment per endpoint; scaling decode "
                                  "above 1 is unverified")


def _triggers(field: str, triggers: Sequence[CloudWatchTrigger | PrometheusTrigger]) -> Iterator[Finding]:
    names: set[str] = set()
    for i, trigger in enumerate(triggers):
        path = f"{field}.triggers[{i}]"
        if not DNS_LABEL.match(trigger.name):
            yield problem(f"{path}.name", trigger.name, "must be a DNS label", "use e.g. 'requests-per-pod'")
        if trigger.name in names:
            yield problem(f"{path}.name", trigger.name, "is used by another trigger", "give each trigger its own name")
        names.add(trigger.name)
        if trigger.target_value <= 0:
            yield problem(f"{path}.target_value", trigger.target_value, "must be positive", "set the per-pod target")
        if isinstance(trigger, PrometheusTrigger) and not AMP_WORKSPACE.match(trigger.server_address):
            yield problem(f"{path}.server_address", trigger.server_address, "must be an Amazon Managed Prometheus "
                          "workspace URL", "write https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id>")
        if isinstance(trigger, CloudWatchTrigger) and trigger.period_seconds < 1:
            yield problem(f"{path}.period_seconds", trigger.period_seconds, "must be positive", "use e.g. 300")


def autoscaling_signals(ctx: RuleContext) -> Iterator[Finding]:
    """Autoscaling that leaves no prefiller, or that KEDA cannot evaluate."""
    for role_name, scaling in _scaled_roles(ctx):
        if role_name == "prefill" and scaling.min_replicas == 0:
            yield SpecWarning(code="PrefillScalesToZero", field="prefill.autoscaling.min_replicas",
                          message="0 leaves no prefiller while the trigger is idle: long prompts then have no "
                                  "disaggregated path until KEDA activates one (DpdNoReadyPod stays quiet on "
                                  "purpose); use 1 to keep DPD on")
        for i, trigger in enumerate(scaling.triggers):
            if not isinstance(trigger, PrometheusTrigger):
                continue
            field = f"{role_name}.autoscaling.triggers[{i}].query"
            if not SINGLE_VALUE.match(trigger.query) or GROUPED.search(trigger.query):
                yield Problem(field=field, value=trigger.query,
                              message="may return several series; KEDA's Prometheus scaler needs a query that "
                                      "returns exactly one value and errors otherwise, so the role never scales",
                              fix="wrap it in an aggregation without 'by', e.g. sum(...) or max(...)")
            elif "vllm:" in trigger.query and not ctx.spec.metrics.enabled:
                yield Problem(field=field, value=trigger.query,
                              message="reads vLLM metrics, but metrics.enabled is false, so nothing is scraped",
                              fix="set metrics.enabled: true or scale on another signal")
