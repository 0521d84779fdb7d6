"""Autoscaling: the replica bounds, the KEDA triggers, and scaling that leaves DPD without a role.

See ``docs/checks.md`` for what is checked and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.observability.promql import parser as _promql
from hyperpod_dpd.spec import AutoscalingSpec, CloudWatchTrigger, PrometheusTrigger
from hyperpod_dpd.validation.context import Finding, RuleContext, problem
from hyperpod_dpd.validation.naming import DNS_LABEL

# Matched with fullmatch: ``$`` would accept a trailing newline.
AMP_WORKSPACE = re.compile(
    r"https://aps-workspaces\.[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+")
# KEDA's Prometheus scaler (kedacore/keda pkg/scalers/prometheus_scaler.go, ExecutePromQuery) sends the
# query to /api/v1/query and decodes data.result as a list of {metric, value} samples: more than one
# element is an error ("returned multiple elements"), and a scalar result ([time, "value"]) does not
# decode at all. So the query must be an instant vector of at most one series. Without the PromQL
# parser (the 'observability' extra), the top of the query is read with these patterns instead.
SINGLE_VALUE = re.compile(r"^\s*(sum|avg|max|min|count|histogram_quantile|quantile)\s*\(")
GROUPED = re.compile(r"^\s*(sum|avg|max|min|count|quantile)\s*(by|without)\s*\(|\)\s*(by|without)\s*\([^()]*\)\s*$")
# A Grafana dashboard variable ($namespace, ${pod}, $__rate_interval, [[var]]): Prometheus knows none of them.
GRAFANA_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\[\[[A-Za-z_][A-Za-z0-9_]*\]\]")
# Aggregations whose ungrouped result is one series; topk/bottomk/limitk with k = 1 keep one too.
_ONE_SERIES_AGGREGATIONS = {"sum", "avg", "min", "max", "count", "stddev", "stdvar", "group", "quantile"}
_K_AGGREGATIONS = {"topk", "bottomk", "limitk"}
_SCALAR_FUNCTIONS = {"scalar", "time", "pi", "minute", "hour", "day_of_month", "day_of_week", "day_of_year",
                     "days_in_month", "month", "year"}

# KEDA's CloudWatch scaler (kedacore/keda pkg/scalers/aws_cloudwatch_scaler.go): checkMetricStatPeriod
# takes 1, 5, 10, 30, 60 or a multiple of 60 seconds; Validate needs metricCollectionTime to be a multiple
# of metricStatPeriod; dimensionName and dimensionValue are split on ';' and must pair up. The operator
# passes metricCollectionPeriod as metricStatPeriod (AWS's examples use 30 and 60, valid only as that)
# and metricCollectionStartTime, which the spec leaves at the CRD's default of 300, as metricCollectionTime.
CLOUDWATCH_SHORT_PERIODS = (1, 5, 10, 30, 60)
CLOUDWATCH_COLLECTION_TIME = 300
# The statistics KEDA's scaler checked against before it moved to aws-sdk-go-v2 (cloudwatch.Statistic_Values());
# GetMetricData also takes extended statistics (p99, tm90, ...; CloudWatch User Guide, "Statistics definitions").
CLOUDWATCH_STATISTICS = ("SampleCount", "Average", "Sum", "Minimum", "Maximum")
EXTENDED_STATISTIC = re.compile(r"^(p|tm|wm|tc|ts)\d{1,2}(\.\d{1,10})?$|^(TM|WM|TC|TS|PR)\([^()]*\)$|^IQM$")
# CloudWatch API Dimension: Name 1-255 characters, Value 1-1024; a metric has at most 30 dimensions.
DIMENSION_NAME_MAX, DIMENSION_VALUE_MAX, MAX_DIMENSIONS = 255, 1024, 30


def _scaled_roles(ctx: RuleContext) -> Iterator[tuple[str, AutoscalingSpec]]:
    """The roles that autoscale, with their autoscaling; both rules below read the same pairs."""
    for role_name, role in ctx.spec.roles():
        if role.autoscaling is not None:
            yield role_name, role.autoscaling


def autoscaling(ctx: RuleContext) -> Iterator[Finding]:
    roles = dict(ctx.spec.roles())
    for role_name, scaling in _scaled_roles(ctx):
        field = f"{role_name}.autoscaling"
        if scaling.min_replicas < 0 or scaling.max_replicas < max(1, scaling.min_replicas):
            yield problem(field, f"{scaling.min_replicas}..{scaling.max_replicas}", "needs 0 <= min_replicas <= "
                          "max_replicas and max_replicas >= 1", "fix the bounds")
        elif roles[role_name].replicas > scaling.max_replicas:
            yield problem(f"{role_name}.replicas", roles[role_name].replicas, f"is above autoscaling.max_replicas "
                          f"{scaling.max_replicas}: KEDA scales the role down to at most {scaling.max_replicas} at "
                          "once, while the instance group is sized for the replicas", f"set replicas to at most "
                          f"{scaling.max_replicas}, or raise max_replicas")
        elif role_name == "decode" and scaling.min_replicas < 1:
            yield problem(f"{field}.min_replicas", scaling.min_replicas, "must be at least 1: every request, short "
                          "or long, ends on the decoder, so a decoder scaled to zero serves nothing",
                          "set min_replicas: 1 (prefill may scale lower)")
        for name, value in (("polling_interval_seconds", scaling.polling_interval_seconds),
                            ("cooldown_seconds", scaling.cooldown_seconds)):
            if value < 0:
                yield problem(f"{field}.{name}", value, "must not be negative", "use 0 or more seconds")
        if not scaling.triggers and scaling.slo is None:
            yield problem(f"{field}.triggers", [], "autoscaling needs at least one trigger",
                          "add a cloudwatch or prometheus trigger, or slo: true, or remove autoscaling")
        yield from _triggers(field, scaling.triggers)
        if role_name == "decode" and scaling.max_replicas > DECODE_DEPLOYMENTS and scaling.slo is None:
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
        if isinstance(trigger, PrometheusTrigger) and not AMP_WORKSPACE.fullmatch(trigger.server_address):
            yield problem(f"{path}.server_address", trigger.server_address, "must be an Amazon Managed Prometheus "
                          "workspace URL", "write https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id>")
        if isinstance(trigger, CloudWatchTrigger):
            yield from _cloudwatch(path, trigger)


CLOUDWATCH_NAME_MAX = 255


def _cloudwatch(path: str, trigger: CloudWatchTrigger) -> Iterator[Finding]:
    period = trigger.period_seconds
    if period < 1:
        yield problem(f"{path}.period_seconds", period, "must be positive", "use e.g. 300")
    elif (period <= 60 and period not in CLOUDWATCH_SHORT_PERIODS) or (period > 60 and period % 60):
        yield problem(f"{path}.period_seconds", period, "is not a period KEDA's CloudWatch scaler accepts: 1, 5, 10, "
                      "30, 60 or a multiple of 60 seconds; the ScaledObject would fail and the role never scale",
                      "use e.g. 60 or 300")
    elif CLOUDWATCH_COLLECTION_TIME % period:
        yield problem(f"{path}.period_seconds", period, f"does not divide the {CLOUDWATCH_COLLECTION_TIME}-second "
                      "window the operator collects (metricCollectionStartTime's default); KEDA requires the window "
                      "to be a multiple of the period, so the ScaledObject would fail",
                      f"use a divisor of {CLOUDWATCH_COLLECTION_TIME}: 1, 5, 10, 30, 60 or 300")
    statistic = trigger.statistic
    if statistic not in CLOUDWATCH_STATISTICS:
        if EXTENDED_STATISTIC.match(statistic):
            yield SpecWarning(code="ExtendedStatistic", field=f"{path}.statistic",
                              message=f"{statistic!r} is an extended statistic: GetMetricData takes it, but KEDA "
                                      "releases built on aws-sdk-go v1 accept only "
                                      f"{', '.join(CLOUDWATCH_STATISTICS)}; check the add-on's KEDA version")
        else:
            near = next((s for s in CLOUDWATCH_STATISTICS if s.lower() == statistic.lower()), None)
            yield problem(f"{path}.statistic", statistic, f"is not a CloudWatch statistic: KEDA and GetMetricData "
                          f"take {', '.join(CLOUDWATCH_STATISTICS)} (case matters) or an extended statistic such "
                          "as p99", f"write {near!r}" if near else "use e.g. 'Average' or 'Sum'")
    # CloudWatch's Metric: MetricName and Namespace 1-255 characters (API_Metric, API_GetMetricData).
    for name, text in (("metric_name", trigger.metric_name), ("namespace", trigger.namespace)):
        if not 1 <= len(text) <= CLOUDWATCH_NAME_MAX:
            yield problem(f"{path}.{name}", text if len(text) <= 60 else f"{text[:57]}...",
                          f"must be 1-{CLOUDWATCH_NAME_MAX} characters ({len(text)} given): CloudWatch refuses the "
                          "query and KEDA's scaler never reads the metric", f"use the metric's real {name}")
    if len(trigger.dimensions) > MAX_DIMENSIONS:
        yield problem(f"{path}.dimensions", len(trigger.dimensions), f"a CloudWatch metric has at most "
                      f"{MAX_DIMENSIONS} dimensions", "drop the dimensions that do not identify the metric")
    for name, value in trigger.dimensions.items():
        where = f"{path}.dimensions.{name}"
        if ";" in name or ";" in value:
            yield problem(where, value if ";" not in name else name, "contains ';': KEDA splits dimension names and "
                          "values on ';', so the pairs would no longer match (or match the wrong metric)",
                          "remove the ';'; CloudWatch dimensions cannot be expressed with it through KEDA")
        elif not 1 <= len(name) <= DIMENSION_NAME_MAX or not 1 <= len(value) <= DIMENSION_VALUE_MAX:
            yield problem(where, value, f"CloudWatch dimension names are 1-{DIMENSION_NAME_MAX} characters and values "
                          f"1-{DIMENSION_VALUE_MAX}", "give both a name and a value, e.g. LoadBalancer: app/my-alb/...")


def _is_scalar(expr: Any) -> bool:
    kind = type(expr).__name__
    if kind == "NumberLiteral":
        return True
    if kind in ("ParenExpr", "UnaryExpr"):
        return _is_scalar(expr.expr)
    if kind == "Call":
        return bool(expr.func.name in _SCALAR_FUNCTIONS)
    if kind == "BinaryExpr":
        return _is_scalar(expr.lhs) and _is_scalar(expr.rhs)
    return False


def _one_series(expr: Any) -> bool:
    """Whether ``expr`` is an instant vector of at most one series, read from its syntax tree."""
    kind = type(expr).__name__
    if kind in ("ParenExpr", "UnaryExpr"):
        return _one_series(expr.expr)
    if kind == "AggregateExpr":
        modifier, op = expr.modifier, str(expr.op)
        ungrouped = modifier is None or (str(modifier.type).endswith("By") and not modifier.labels)
        if op in _K_AGGREGATIONS:
            return ungrouped and type(expr.param).__name__ == "NumberLiteral" and float(expr.param.val) == 1
        return ungrouped and op in _ONE_SERIES_AGGREGATIONS
    if kind == "Call":
        name = expr.func.name
        if name in ("vector", "absent", "absent_over_time"):
            return True
        if name in _SCALAR_FUNCTIONS:
            return False
        if name == "histogram_quantile" and len(expr.args) == 2:
            buckets = expr.args[1]
            while type(buckets).__name__ == "ParenExpr":
                buckets = buckets.expr
            if type(buckets).__name__ == "AggregateExpr" and buckets.modifier is not None and str(
                    buckets.modifier.type).endswith("By") and list(buckets.modifier.labels) == ["le"]:
                return True
        # Every other function maps each series of its (first) vector argument to one series.
        for arg in expr.args:
            arg_kind = type(arg).__name__
            if arg_kind == "SubqueryExpr":
                return _one_series(arg.expr)
            if arg_kind == "MatrixSelector":
                return False
            if not _is_scalar(arg) and arg_kind != "StringLiteral":
                return _one_series(arg)
        return False
    if kind == "BinaryExpr":
        lhs_scalar, rhs_scalar = _is_scalar(expr.lhs), _is_scalar(expr.rhs)
        if lhs_scalar and rhs_scalar:
            return False
        if lhs_scalar or rhs_scalar:
            return _one_series(expr.rhs if lhs_scalar else expr.lhs)
        return _one_series(expr.lhs) and _one_series(expr.rhs)
    return False


def prometheus_query_problem(query: str) -> tuple[str, str] | None:
    """What KEDA's Prometheus scaler cannot use in ``query`` (message and fix), or None."""
    variable = GRAFANA_VARIABLE.search(query)
    if variable is not None:
        return (f"holds {variable.group(0)!r}, a Grafana dashboard variable: Prometheus does not expand it, so the "
                "query fails (or matches nothing) and the role never scales",
                "replace it with its value, e.g. [1m] for [$__rate_interval] and the namespace itself for $namespace")
    parser = _promql()
    if parser is None:
        one = SINGLE_VALUE.match(query) is not None and GROUPED.search(query) is None
    else:
        try:
            tree = parser.parse(query)
        except ValueError as error:
            return (f"is not PromQL: {error}", "fix the expression; test it in the workspace's query editor")
        one = _one_series(tree)
    if not one:
        return ("may return several series, or a scalar; KEDA's Prometheus scaler needs an instant vector of at most "
                "one series and errors otherwise, so the role never scales",
                "wrap it in an aggregation without 'by', e.g. sum(...) or max(...)")
    return None


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
            found = prometheus_query_problem(trigger.query)
            if found is not None:
                yield Problem(field=field, value=trigger.query, message=found[0], fix=found[1])
            elif "vllm:" in trigger.query and not ctx.spec.metrics.enabled:
                yield Problem(field=field, value=trigger.query,
                              message="reads vLLM metrics, but metrics.enabled is false, so nothing is scraped",
                              fix="set metrics.enabled: true or scale on another signal")
