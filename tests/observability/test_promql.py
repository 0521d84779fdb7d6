"""Every PromQL expression the rules and the dashboard carry parses, and the rules follow the spec."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import yaml

from hyperpod_dpd import AlertThresholds, DpdSpec, MetricsSpec
from hyperpod_dpd.observability import alert_rules, rules_document, rules_yaml
from hyperpod_dpd.observability.dashboard import panel_queries
from hyperpod_dpd.observability.metrics import ALL_METRICS, series_names
from hyperpod_dpd.observability.slo import recording_rules

promql_parser = pytest.importorskip("promql_parser", reason="pip install '.[observability]'")

BASE_ALERTS = ["DpdKvTransferSlow", "DpdKvStoreMetricsAbsent", "DpdKvNotTransferred", "DpdRouterFallback",
               "DpdErrorRatioHigh", "DpdErrorRatioCritical", "DpdClientErrorRatioHigh", "DpdPrefillQueueDeep",
               "DpdPrefillSaturated", "DpdDecodeKvCacheFull", "DpdDecodePreempting", "DpdDecodeStalled",
               "DpdPrefillStalled", "DpdNotDisaggregating",
               "DpdPrefillMetricsAbsent", "DpdDecodeMetricsAbsent", "DpdRouterMetricsAbsent", "DpdNoReadyPod",
               "DpdRouterDown", "DpdKubeStateMetricsAbsent", "DpdDecodeRestarted", "DpdPrefillRestarted",
               "DpdGpuXidError"]


SLO_ALERTS = ["DpdTtftSloBreach", "DpdTpotSloBreach", "DpdTtftBudgetBurnFast", "DpdTtftBudgetBurnSlow",
              "DpdTpotBudgetBurnFast", "DpdTpotBudgetBurnSlow", "DpdErrorBudgetBurnFast", "DpdErrorBudgetBurnSlow",
              "DpdTtftSloBucketMissing"]


def test_every_alert_and_recording_expression_parses(slo_spec: DpdSpec) -> None:
    rules = alert_rules(slo_spec)
    assert sorted(r.name for r in rules) == sorted(BASE_ALERTS + SLO_ALERTS)
    records = recording_rules(slo_spec)
    assert len(records) == 3 * (7 + 4), "per indicator: the bad share over 7 windows, the event rate over 4"
    for expr in [r.expr for r in rules] + [r.expr for r in records]:
        promql_parser.parse(expr)  # raises ValueError on a syntax error


def test_recording_rules_are_named_level_metric_operations(slo_spec: DpdSpec) -> None:
    """Prometheus's naming practice for recording rules: ``level:metric:operations``, the window last."""
    import re

    for rule in recording_rules(slo_spec):
        level, metric, operations = rule.record.split(":")
        assert level in {"dpd_endpoint", "resource_name"} and metric.startswith("dpd_"), rule.record
        assert re.fullmatch(r"(ratio_rate|rate)(5m|30m|1h|2h|6h|1d|3d)", operations), rule.record
        assert ("sum by (resource_name)" in rule.expr) is (level == "resource_name"), rule.record
    assert recording_rules(dataclasses.replace(slo_spec, slo=None)) == ()


def test_every_dashboard_query_parses(slo_spec: DpdSpec) -> None:
    queries = [expr for panels in panel_queries(slo_spec).values() for panel in panels.values()
               for expr in panel.values()]
    assert len(queries) >= 16
    for expr in queries:
        promql_parser.parse(expr)


def test_the_parser_rejects_broken_promql() -> None:
    with pytest.raises(ValueError, match="parenthesis"):
        promql_parser.parse("sum(rate(vllm:num_requests_running[5m])")


def test_latency_rules_exist_only_with_an_slo(spec: DpdSpec, slo_spec: DpdSpec) -> None:
    assert [r.name for r in alert_rules(spec)] == BASE_ALERTS
    names = [r.name for r in alert_rules(slo_spec)]
    assert names[:12] == BASE_ALERTS[:12] and "DpdTtftSloBreach" in names and "DpdTpotSloBreach" in names
    ttft = next(r for r in alert_rules(slo_spec) if r.name == "DpdTtftSloBreach")
    assert ") > 2)" in ttft.expr and "dpd_e2e_ttft_seconds_bucket" in ttft.expr
    tpot = next(r for r in alert_rules(slo_spec) if r.name == "DpdTpotSloBreach")
    assert tpot.expr.endswith("> 0.05") and 'resource_name="decode-' in tpot.expr


def test_threshold_overrides_reach_the_expressions(spec: DpdSpec, slo_spec: DpdSpec) -> None:
    by_name = {r.name: r.expr for r in alert_rules(slo_spec)}
    assert by_name["DpdPrefillQueueDeep"].endswith("> 5")
    assert by_name["DpdPrefillSaturated"].endswith("* 16)"), "in flight is compared with pods x max_num_seqs"
    bigger = dataclasses.replace(spec, prefill=dataclasses.replace(spec.prefill, max_num_seqs=64))
    assert next(r.expr for r in alert_rules(bigger) if r.name == "DpdPrefillSaturated").endswith("* 64)")
    assert by_name["DpdDecodeKvCacheFull"].endswith("> 0.8")
    defaults = {r.name: r.expr for r in alert_rules(spec)}
    assert defaults["DpdDecodeKvCacheFull"].endswith("> 0.9")
    floored = dataclasses.replace(spec, alerts=AlertThresholds(min_requests_per_second=2))
    assert "> 2" in next(r.expr for r in alert_rules(floored) if r.name == "DpdErrorRatioHigh")


def test_rules_select_only_this_endpoint(spec: DpdSpec) -> None:
    for rule in alert_rules(spec):
        assert spec.name in rule.expr, rule.name
    pods = next(r.expr for r in alert_rules(spec) if r.name == "DpdDecodeKvCacheFull")
    assert f'resource_name="decode-{spec.name}", namespace="{spec.namespace}"' in pods


def test_every_rule_says_what_broke_and_what_to_do(slo_spec: DpdSpec) -> None:
    group = rules_document(slo_spec)["groups"][0]
    assert group["name"] == f"dpd_{slo_spec.namespace}_{slo_spec.name}"
    records = [r for r in group["rules"] if "record" in r]
    assert records and group["rules"][:len(records)] == records, "recording rules come first"
    assert all(r["labels"] == {"dpd_endpoint": slo_spec.name, "dpd_namespace": slo_spec.namespace} for r in records)
    for rule in group["rules"][len(records):]:
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert rule["labels"]["dpd_endpoint"] == slo_spec.name
        assert rule["annotations"]["summary"].startswith(f"{slo_spec.namespace}/{slo_spec.name}: ")
        assert len(rule["annotations"]["fix"]) > 40


def test_no_rules_when_metrics_are_off(spec: DpdSpec) -> None:
    off = dataclasses.replace(spec, metrics=MetricsSpec(enabled=False))
    assert alert_rules(off) == ()
    assert yaml.safe_load(rules_yaml(off))["groups"][0]["rules"] == []


def test_rules_yaml_is_deterministic_and_loads_back(slo_spec: DpdSpec) -> None:
    text = rules_yaml(slo_spec)
    assert text == rules_yaml(slo_spec)
    assert yaml.safe_load(text) == rules_document(slo_spec)


def _selected(node: object) -> Iterator[str]:
    """The metric names every vector selector in a parsed PromQL expression reads."""
    if type(node).__name__ == "VectorSelector":
        yield str(node.name)
        return
    for attribute in ("lhs", "rhs", "expr", "args", "vector_selector", "param"):
        child = getattr(node, attribute, None)
        for item in child if isinstance(child, list) else [child] if child is not None else []:
            yield from _selected(item)


def test_the_walker_finds_every_selector() -> None:
    expr = 'sum(rate(a{x="1"}[5m])) > on() count(B_C) or absent_over_time(c[1m]) unless max by (x) (d)'
    assert sorted(_selected(promql_parser.parse(expr))) == ["B_C", "a", "c", "d"]


def test_every_series_read_is_in_the_metrics_contract(slo_spec: DpdSpec) -> None:
    """A name typed into a rule or panel without an entry in the contract would be an unsourced guess."""
    known = {name for metric in ALL_METRICS for name in series_names(metric)}
    recorded = {r.record for r in recording_rules(slo_spec)}
    expressions = [r.expr for r in alert_rules(slo_spec)] + [r.expr for r in recording_rules(slo_spec)] + [
        expr for panels in panel_queries(slo_spec).values() for panel in panels.values() for expr in panel.values()]
    used = {name for expr in expressions for name in _selected(promql_parser.parse(expr))}
    assert used and used <= known | recorded, used - known - recorded
    assert all(m.provenance for m in ALL_METRICS)
    assert {m.name for m in ALL_METRICS if not m.verified} == {
        "dpd_routing_disaggregated_total", "dpd_routing_local_total", "dpd_routing_fallback_total",
        "dpd_routing_inflight_prefill", "dpd_e2e_ttft_seconds", "lmcache:store_put_time", "DCGM_FI_DEV_XID_ERRORS"}


def test_each_rule_declares_what_it_reads_and_names_its_assumptions(slo_spec: DpdSpec) -> None:
    by_family = {name: metric for metric in ALL_METRICS for name in series_names(metric)}
    records = {r.record: r.expr for r in recording_rules(slo_spec)}

    def read_by(expr: str) -> set[str]:
        names = set(_selected(promql_parser.parse(expr)))
        return {n for name in names for n in (read_by(records[name]) if name in records else {name})}

    for rule in alert_rules(slo_spec):
        read = {by_family[name] for name in read_by(rule.expr)}
        assert read == set(rule.inputs), rule.name
        annotation = rule.to_prometheus(slo_spec)["annotations"].get("unverified_inputs", "")
        for metric in rule.inputs:
            assert (metric.name in annotation) is (not metric.verified), (rule.name, metric.name)


def test_a_gauge_has_no_bucket_series() -> None:
    from hyperpod_dpd.observability.metrics import KV_CACHE_USAGE

    with pytest.raises(ValueError, match="gauge, not a histogram"):
        KV_CACHE_USAGE.bucket()


def test_the_kv_check_counts_prompts_above_a_bucket_that_clears_the_threshold(spec: DpdSpec) -> None:
    """vLLM's prompt-length buckets are 1-2-5 up to max_model_len: 4,096 -> 5,000; else the largest bound."""
    from hyperpod_dpd.observability.alerts import long_prompt_bound

    assert long_prompt_bound(spec) == 5000 and spec.routing.threshold == 4096
    kv = next(r.expr for r in alert_rules(spec) if r.name == "DpdKvNotTransferred")
    assert 'le=~"5000(\\\\.0)?"' in kv and "sum by (pod_name)" in kv
    assert long_prompt_bound(dataclasses.replace(spec, max_model_len=4500)) == 2000
    assert long_prompt_bound(dataclasses.replace(spec, max_model_len=5000)) == 5000


def test_selectors_come_from_the_syntax_tree_with_their_matchers() -> None:
    from hyperpod_dpd.observability.promql import absence_selectors, selectors

    expr = ('sum by (le) (rate(a_bucket{x="1", b=~"p\\\\.q|r"}[5m])) > 2 or absent_over_time(b{c!="z"}[10m]) '
            'or (b{c!="z"} and on() {__name__="d", e!~"f"} offset 5m) or max_over_time(g[30m:1m])')
    found = selectors(expr)
    assert [s.promql() for s in found] == ['a_bucket{b=~"p\\\\.q|r", x="1"}', 'b{c!="z"}', 'd{e!~"f"}', "g{}"]
    assert found[0].labels() == ("b", "x")
    assert [s.promql() for s in absence_selectors(expr)] == [], "b is also read outside absent_over_time"
    assert [s.promql() for s in absence_selectors('absent(up{job="x"}) and on() y')] == ['up{job="x"}']


def test_every_rule_selector_is_a_series_of_the_metrics_contract(slo_spec: DpdSpec) -> None:
    from hyperpod_dpd.observability.inputs import rule_inputs

    inputs = rule_inputs(slo_spec, panels=panel_queries(slo_spec))
    # Every raw input is a contract series; the rest are the rule group's own records.
    assert all(item.metric is not None or item.recorded for item in inputs), [
        i.series for i in inputs if i.metric is None and not i.recorded]
    assert any(item.recorded for item in inputs)
    router = [item for item in inputs if item.series == "dpd_routing_inflight_prefill"]
    assert len(router) == 1 and len(router[0].forms) == 2, "the router's two label forms are one input"
    assert router[0].guards == ("DpdRouterMetricsAbsent",)
    assert router[0].readers[-1] == "panel 'In-flight prefill requests'"
