"""docs/alerts.md names every alert and log alarm the product renders, and marks assumed inputs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import support

from hyperpod_dpd import AlertThresholds, DpdSpec, dump_spec, parse_spec
from hyperpod_dpd.observability import LOG_PATTERNS, alert_rules
from hyperpod_dpd.observability.alerts import slo_autoscaled

DOC = Path(__file__).resolve().parents[2] / "docs" / "alerts.md"


def _rows() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells and cells[0].startswith(("`Dpd", "log `")):
            rows[cells[0].removeprefix("log ").strip("`")] = line
    return rows


def test_every_alert_and_log_alarm_has_a_row(slo_spec: DpdSpec) -> None:
    rules = {r.name for spec in (slo_spec, slo_autoscaled(slo_spec)) for r in alert_rules(spec)}
    expected = rules | {p.name for p in LOG_PATTERNS} | {"LogsNotArriving"}
    assert set(_rows()) == expected


def test_rows_of_alerts_with_unverified_inputs_say_assumed(slo_spec: DpdSpec) -> None:
    rows = _rows()
    for rule in alert_rules(slo_autoscaled(slo_spec)):
        if rule.unverified:
            assert "assumed" in rows[rule.name], rule.name
        for metric in rule.inputs:
            assert metric.name.removesuffix("_total").split("{")[0] in rows[rule.name], (rule.name, metric.name)


def _emittable() -> set[str]:
    """Every alert name any spec variant renders, collected independently of alert_variants()."""
    import dataclasses

    from hyperpod_dpd import SloSpec
    from hyperpod_dpd.spec.defaults import default_spec

    base = default_spec()
    variants = [base, dataclasses.replace(base, slo=SloSpec()), dataclasses.replace(base, slo=SloSpec(ttft_ms=900)),
                dataclasses.replace(base, slo=SloSpec(tpot_ms=75)),
                dataclasses.replace(base, slo=SloSpec(ttft_ms=2000, tpot_ms=50, objective=0.999)),
                dataclasses.replace(base, prefill=dataclasses.replace(base.prefill, replicas=0)),
                support.slo_autoscaled()]
    return {rule.name for variant in variants for rule in alert_rules(variant)}


def _runbook_headings() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("<!-- BEGIN generated: runbooks -->"):text.index("<!-- END generated: runbooks -->")]
    return re.findall(r"^### (\S+)$", section, re.MULTILINE)


def _github_anchors() -> list[str]:
    """The anchor GitHub gives every heading of the page (lower case, punctuation dropped, spaces to hyphens)."""
    headings = re.findall(r"^#+ (.+)$", DOC.read_text(encoding="utf-8"), re.MULTILINE)
    return [re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings]


def test_every_alert_the_code_can_emit_has_exactly_one_runbook_section() -> None:
    headings = _runbook_headings()
    assert sorted(headings) == sorted(set(headings)), "a runbook section appears twice"
    assert set(headings) == _emittable()
    assert {"DpdErrorBudgetBurnFast", "DpdTtftSloBucketMissing", "DpdPrefillMetricsAbsent"} <= set(headings)


def test_every_runbook_has_its_meaning_three_commands_and_fix() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in _runbook_headings():
        section = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert "**What it means.**" in section and "**Fix.**" in section, name
        commands = section.split("```sh\n", 1)[1].split("\n```", 1)[0].splitlines()
        assert len(commands) == 3 and all(c.strip() for c in commands), name


def test_every_runbook_url_resolves_to_its_section(slo_spec: DpdSpec) -> None:
    anchors = _github_anchors()
    sections = {heading.lower(): heading for heading in _runbook_headings()}
    for rule in alert_rules(slo_spec):
        url = rule.to_prometheus(slo_spec)["annotations"]["runbook_url"]
        page, anchor = url.split("#")
        assert (DOC.parents[1] / page).resolve() == DOC
        assert anchors.count(anchor) == 1, (rule.name, anchor)
        assert sections[anchor] == rule.name


def test_runbook_urls_are_absolute_under_a_configured_base(slo_spec: DpdSpec) -> None:
    """O10: an e-mailed alert's link opens when the spec names where docs/alerts.md is published."""
    base = "https://git.example.com/org/hyperpod-dpd/blob/v0.1.0/docs/alerts.md"
    spec = dataclasses.replace(slo_spec, alerts=dataclasses.replace(slo_spec.alerts or AlertThresholds(),
                                                                    runbook_base_url=base))
    anchors = _github_anchors()
    for rule in alert_rules(spec):
        url = rule.to_prometheus(spec)["annotations"]["runbook_url"]
        page, anchor = url.split("#")
        assert page == base
        assert anchors.count(anchor) == 1, (rule.name, anchor)
    data = dump_spec(spec)
    assert data["alerts"]["runbook_base_url"] == base and parse_spec(data) == spec
