"""The dashboard round-trips through the library's types, draws the spec's thresholds, and is stable."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from hyperpod_dpd import DpdSpec

pytest.importorskip("grafana_foundation_sdk", reason="pip install '.[observability]'")

from grafana_foundation_sdk.models.dashboard import Dashboard

from hyperpod_dpd.observability import alert_rules
from hyperpod_dpd.observability.alerts import thresholds_of
from hyperpod_dpd.observability.dashboard import MAX_UID, alert_lines, dashboard_json, dashboard_uid, panel_queries


def _panels(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["title"]: p for p in document["panels"]}


def test_dashboard_json_loads_back_into_the_library_model(slo_spec: DpdSpec) -> None:
    document = json.loads(dashboard_json(slo_spec))
    model = Dashboard.from_json(document)
    assert model.title == f"DPD {slo_spec.namespace}/{slo_spec.name}"
    assert json.loads(json.dumps(model.to_json(), default=lambda o: o.to_json())) == document


def test_layout_rows_follow_the_request_path(spec: DpdSpec) -> None:
    document = json.loads(dashboard_json(spec))
    rows = [p["title"] for p in document["panels"] if p["type"] == "row"]
    assert rows == ["DPD health", "Router", "Prefill", "Decode", "Errors"]
    panels = _panels(document)
    for title in ("Routing decisions per second", "In-flight prefill requests", "End-to-end TTFT p90",
                  "Prefill queue", "KV store (put) time p90", "Inter-token latency (TPOT) p90", "KV cache usage",
                  "Preemptions per second", "Prompt tokens per second by source", "Server error (5xx) ratio by role"):
        assert title in panels
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
    assert all(p["gridPos"]["w"] * 1 <= 24 for p in document["panels"])


def test_panels_draw_the_alert_thresholds(spec: DpdSpec, slo_spec: DpdSpec) -> None:
    panels = _panels(json.loads(dashboard_json(slo_spec)))
    steps = panels["KV cache usage"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1] == {"color": "red", "value": 0.8}
    ttft = panels["End-to-end TTFT p90"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert ttft[-1]["value"] == 2
    no_slo = _panels(json.loads(dashboard_json(spec)))
    assert "thresholds" not in no_slo["End-to-end TTFT p90"].get("fieldConfig", {}).get("defaults", {})


def test_every_query_uses_the_datasource_variable(spec: DpdSpec) -> None:
    document = json.loads(dashboard_json(spec))
    assert document["templating"]["list"][0]["name"] == "datasource"
    targets = [t for p in document["panels"] for t in p.get("targets", [])]
    assert targets and all(t["datasource"]["uid"] == "${datasource}" for t in targets)


def test_uid_is_stable_and_within_grafanas_limit(spec: DpdSpec) -> None:
    assert dashboard_uid(spec) == f"hyperpod-dpd-{spec.namespace}-{spec.name}"
    long = dataclasses.replace(spec, name="a" * 50)
    other = dataclasses.replace(spec, name="a" * 49 + "b")
    assert len(dashboard_uid(long)) == MAX_UID
    assert dashboard_uid(long) != dashboard_uid(other)


def test_dashboard_snapshot(slo_spec: DpdSpec, snapshot: Any) -> None:
    text = dashboard_json(slo_spec)
    assert text == dashboard_json(slo_spec)
    assert text == snapshot


def test_rules_snapshot(slo_spec: DpdSpec, snapshot: Any) -> None:
    from hyperpod_dpd.observability import rules_yaml

    assert rules_yaml(slo_spec) == snapshot


def test_panels_that_show_an_alert_draw_its_expression_and_threshold(slo_spec: DpdSpec) -> None:
    """Audit T4-14: a panel drawn beside an alert plots what the alert compares, with the alert's threshold."""
    rules = {r.name: r.expr for r in alert_rules(slo_spec)}
    queries = {title: exprs for panels in panel_queries(slo_spec).values() for title, exprs in panels.items()}
    panels = _panels(json.loads(dashboard_json(slo_spec)))
    lines = alert_lines(slo_spec)
    assert len(lines) == 7
    for title, (alert, compared) in lines.items():
        assert compared in rules[alert], (title, alert)
        assert any(compared in expr for expr in queries[title].values()), title
        steps = panels[title].get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
        if steps:
            threshold = steps[-1]["value"]
            assert f"{compared} > {threshold:g}" in rules[alert] or f"{compared}) > {threshold:g}" in rules[alert], (
                title, threshold)
    # In flight is compared with pods x max_num_seqs, which the panel draws as a second line, not a constant.
    inflight = queries["In-flight prefill requests"]
    assert any("* 16" in expr for expr in inflight.values()) and "* 16" in rules["DpdPrefillSaturated"]
    assert "thresholds" not in panels["In-flight prefill requests"].get("fieldConfig", {}).get("defaults", {})
    # The error panel shows 0, not No data, while nothing failed, and only server errors.
    errors = next(iter(queries["Server error (5xx) ratio by role"].values()))
    assert 'status=~"5.."' in errors and errors.endswith("* 0)")


def _steps(panel: dict[str, Any]) -> list[dict[str, Any]]:
    return panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])


def test_the_health_row_comes_first_and_draws_the_alerts_own_thresholds(slo_spec: DpdSpec) -> None:
    """Each health panel plots what its alert compares, and its red step is the alert's threshold, read from the
    alert's constants and the spec; a spec with other thresholds moves both together."""
    from hyperpod_dpd import AlertThresholds, SloSpec
    from hyperpod_dpd.observability.alerts import MIN_AVAILABLE, MIN_LONG_PROMPTS
    from hyperpod_dpd.observability.rule import endpoint_labels, num
    from hyperpod_dpd.observability.slo import FASTEST, burn_threshold, slis

    other = dataclasses.replace(slo_spec, alerts=AlertThresholds(error_ratio=0.07),
                                slo=SloSpec(ttft_ms=1500, tpot_ms=75, objective=0.995))
    for spec in (slo_spec, other):
        document = json.loads(dashboard_json(spec))
        assert document["panels"][0]["title"] == "DPD health"
        health = {p["title"]: p for p in document["panels"][1:7]}
        rules = {r.name: r.expr for r in alert_rules(spec)}
        assert spec.slo is not None and spec.slo.ttft_ms is not None and spec.slo.tpot_ms is not None
        expected = {"KV transfer per decoder (15m)": ("DpdKvNotTransferred", MIN_LONG_PROMPTS),
                    "Router available replicas": ("DpdRouterDown", MIN_AVAILABLE),
                    "Server error (5xx) ratio": ("DpdErrorRatioHigh", thresholds_of(spec).error_ratio),
                    "TTFT p90 vs SLO": ("DpdTtftSloBreach", spec.slo.ttft_ms / 1000),
                    "TPOT p90 vs SLO": ("DpdTpotSloBreach", spec.slo.tpot_ms / 1000),
                    "Error budget burn rate (1h)": ("DpdErrorBudgetBurnFast", FASTEST.factor)}
        assert set(health) == set(expected)
        for title, (alert, value) in expected.items():
            if title != "KV transfer per decoder (15m)":  # thresholds per line: see the test below
                assert _steps(health[title])[-1]["value"] == value, title
            for target in health[title]["targets"]:
                expr = target["expr"]
                if title == "Error budget burn rate (1h)":
                    continue
                if title == "KV transfer per decoder (15m)":
                    assert all(part in rules[alert] for part in expr.split(" and on(pod_name) ")), (title, expr)
                    continue
                if title == "Server error (5xx) ratio":
                    expr = expr.split(") or (")[0].removeprefix("(")
                assert expr in rules[alert], (title, expr)
        assert f"{rules_expr_value(rules['DpdErrorRatioHigh'])}" == num(thresholds_of(spec).error_ratio)
        assert f"< {MIN_AVAILABLE} and" in rules["DpdRouterDown"]
        assert f">= {MIN_LONG_PROMPTS})" in rules["DpdKvNotTransferred"]
        # Router up: red below the line, green at or above it.
        assert [s["color"] for s in _steps(health["Router available replicas"])] == ["red", "green"]
        # Burn rate: 1h bad share / budget against the fastest tier; the alert compares the same share with
        # factor x budget.
        labels = ", ".join(f'{k}="{v}"' for k, v in endpoint_labels(spec).items())
        burns = [t["expr"] for t in health["Error budget burn rate (1h)"]["targets"]]
        assert len(burns) == len(slis(spec)) == 3
        for sli, burn in zip(slis(spec), burns, strict=True):
            record = f"{sli.ratio_record(FASTEST.long)}{{{labels}}}"
            assert burn == f"{record} / {num(1 - spec.slo.objective)}"
            fast = next(v for k, v in rules.items() if k.endswith("BudgetBurnFast") and record in v)
            assert f"{record} > {num(burn_threshold(spec, FASTEST))}" in fast


def rules_expr_value(expr: str) -> str:
    """The ratio threshold of an error rule (``... > 0.05) and ...``)."""
    return expr.split(" > ", 1)[1].split(")", 1)[0]


def test_without_slo_the_health_row_has_no_latency_or_burn_panels(spec: DpdSpec) -> None:
    document = json.loads(dashboard_json(spec))
    rows = [i for i, p in enumerate(document["panels"]) if p["type"] == "row"]
    health = [p["title"] for p in document["panels"][rows[0] + 1:rows[1]]]
    assert health == ["KV transfer per decoder (15m)", "Router available replicas", "Server error (5xx) ratio"]


def _colour(steps: list[dict[str, Any]], value: float) -> str:
    """The colour Grafana gives ``value`` under absolute ``steps``: the last step at or below it."""
    return [step["color"] for step in steps if step["value"] is None or value >= step["value"]][-1]


def test_the_kv_panel_is_green_for_a_healthy_decoder_and_red_for_the_alerts_failure(spec: DpdSpec) -> None:
    """Only the KV line is judged, and only for decoders the alert counts: 0 KV tokens is red, any is green; the
    long-prompt line carries a neutral marker at the alert's floor, never red."""
    from hyperpod_dpd.observability.alerts import MIN_LONG_PROMPTS

    document = json.loads(dashboard_json(spec))
    panel = next(p for p in document["panels"] if p["title"] == "KV transfer per decoder (15m)")
    refs = {t["legendFormat"]: t["refId"] for t in panel["targets"]}
    kv_expr = next(t["expr"] for t in panel["targets"] if "KV tokens" in t["legendFormat"])
    assert kv_expr.endswith(f">= {MIN_LONG_PROMPTS})")  # drawn only where the alert counts long prompts
    assert "thresholds" not in panel["fieldConfig"].get("defaults", {})
    by_ref = {o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
              for o in panel["fieldConfig"]["overrides"] if o["matcher"]["id"] == "byFrameRefID"}
    kv = by_ref[refs["{{pod_name}} KV tokens received (decoders the alert counts)"]]["thresholds"]["steps"]
    prompts = by_ref[refs["{{pod_name}} long prompts served"]]["thresholds"]["steps"]
    healthy = {"kv": 41_800.0, "prompts": 20.0}
    broken = {"kv": 0.0, "prompts": 20.0}
    assert _colour(kv, healthy["kv"]) == "green" and _colour(kv, broken["kv"]) == "red"
    for state in (healthy, broken):
        assert _colour(prompts, state["prompts"]) != "red"
    assert prompts[-1]["value"] == MIN_LONG_PROMPTS
