"""The rule types both the component alerts and the SLO alerts are built from, and the queries they share.

An alert carries what the person paged needs: what broke, what it means, the first three commands to run
and the fix; the same fields render its runbook section in ``docs/alerts.md`` (``scripts/docs.py``), and
its ``runbook_url`` annotation points at that section's anchor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.selectors import select
from hyperpod_dpd.spec import DpdSpec

# The page that holds one runbook section per alert, relative to the repository's root.
RUNBOOK_PAGE = "docs/alerts.md"
SERVER_ERROR = 'status=~"5.."'
CLIENT_ERROR = 'status=~"4.."'
POST = 'method="POST"'


class Severity(Enum):
    WARNING = "warning"
    CRITICAL = "critical"


def runbook_anchor(alert: str) -> str:
    """The anchor GitHub gives the heading ``### <alert>``: lower case, spaces to hyphens, punctuation dropped."""
    return re.sub(r"[^\w\- ]", "", alert.lower()).replace(" ", "-")


def runbook_url(alert: str, base: str | None = None) -> str:
    """The link to ``alert``'s runbook section: on the page published at ``base`` when given, else in the repo."""
    return f"{base or RUNBOOK_PAGE}#{runbook_anchor(alert)}"


@dataclass(frozen=True, kw_only=True)
class AlertRule:
    """One alert: the PromQL, how long it must hold, and what to tell the person paged.

    :param failure: the failure mode, one short sentence (the ``summary``).
    :param meaning: what the signal means and why the threshold (the ``description``).
    :param fix: the troubleshooting step (the ``fix`` annotation).
    :param commands: the first three commands to run, in order (the runbook section lists them).
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
    commands: tuple[str, str, str]
    inputs: tuple[m.Metric, ...]

    @property
    def unverified(self) -> tuple[m.Metric, ...]:
        return tuple(metric for metric in self.inputs if not metric.verified)

    def to_prometheus(self, spec: DpdSpec) -> dict[str, Any]:
        annotations = {"summary": f"{spec.namespace}/{spec.name}: {self.failure}", "description": self.meaning,
                       "fix": self.fix,
                       "runbook_url": runbook_url(self.name, spec.alerts.runbook_base_url if spec.alerts else None)}
        if self.unverified:
            annotations["unverified_inputs"] = ", ".join(
                f"{metric.name} ({metric.exporter.value})" for metric in self.unverified)
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.hold,
            "labels": {"severity": self.severity.value, **endpoint_labels(spec)},
            "annotations": annotations,
        }


@dataclass(frozen=True, kw_only=True)
class RecordingRule:
    """One recording rule, named ``level:metric:operations`` (Prometheus's naming practice for recording rules).

    Its output carries the endpoint's labels, so the same rule name from two endpoints' groups never collides.
    """

    record: str
    expr: str

    def to_prometheus(self, spec: DpdSpec) -> dict[str, Any]:
        return {"record": self.record, "expr": self.expr, "labels": endpoint_labels(spec)}


def endpoint_labels(spec: DpdSpec) -> dict[str, str]:
    return {"dpd_endpoint": spec.name, "dpd_namespace": spec.namespace}


def num(value: float) -> str:
    return f"{value:g}"


def invocation_rate(matchers: str, window: str) -> str:
    return (f"sum by (resource_name) "
            f"(rate({select(m.MODEL_INVOCATIONS.name, matchers, POST)}[{window}]))")


def failed_rate(matchers: str, window: str, errors: str = SERVER_ERROR) -> str:
    """Failed (``errors``) POST invocations per second per role at the sidecar."""
    return f"sum by (resource_name) (rate({select(m.MODEL_ERRORS.name, matchers, POST, errors)}[{window}]))"


def error_ratio(matchers: str, window: str, errors: str = SERVER_ERROR) -> str:
    """Failed (``errors``) over all POST invocations per role at the sidecar, over ``window``."""
    return f"{failed_rate(matchers, window, errors)} / {invocation_rate(matchers, window)}"
