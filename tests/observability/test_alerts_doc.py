"""docs/alerts.md names every alert and log alarm the product renders, and marks assumed inputs."""

from __future__ import annotations

from pathlib import Path

from hyperpod_dpd import DpdSpec
from hyperpod_dpd.observability import LOG_PATTERNS, alert_rules

DOC = Path(__file__).resolve().parents[2] / "docs" / "alerts.md"


def _rows() -> dict[str, str]:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if cells and cells[0].startswith(("`Dpd", "log `")):
            rows[cells[0].removeprefix("log ").strip("`")] = line
    return rows


def test_every_alert_and_log_alarm_has_a_row(slo_spec: DpdSpec) -> None:
    expected = {r.name for r in alert_rules(slo_spec)} | {p.name for p in LOG_PATTERNS} | {"LogsNotArriving"}
    assert set(_rows()) == expected


def test_rows_of_alerts_with_unverified_inputs_say_assumed(slo_spec: DpdSpec) -> None:
    rows = _rows()
    for rule in alert_rules(slo_spec):
        if rule.unverified:
            assert "assumed" in rows[rule.name], rule.name
        for metric in rule.inputs:
            assert metric.name.removesuffix("_total").split("{")[0] in rows[rule.name], (rule.name, metric.name)
