"""What the alert rules and the dashboard read: one :class:`RuleInput` per selector, with who reads it.

Derived from the rendered expressions themselves (:func:`hyperpod_dpd.observability.promql.selectors`),
so ``verify`` asks the workspace for exactly what the rules select, labels included. The router's
series are read under two label forms joined by ``or`` (:meth:`EndpointSelectors.router_series`): the
two selectors of one series are one input, present when either form is.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.alerts import alert_rules
from hyperpod_dpd.observability.promql import Selector, absence_selectors, selectors
from hyperpod_dpd.observability.selectors import EndpointSelectors
from hyperpod_dpd.observability.slo import recording_rules
from hyperpod_dpd.spec import DpdSpec

# What it means when an exporter's series are not in the workspace with the rules' labels.
ABSENT_CAUSE = {
    m.Exporter.ROUTER: "the router's series carry a resource_name neither form the rules select matches, or the "
    "router is not scraped (its series and labels are named only by AWS's dashboard)",
    m.Exporter.SIDECAR: "the reverse-proxy sidecar's invocation series (port 9113) are not scraped into the "
    "workspace, or carry another resource_name",
    m.Exporter.VLLM: "the operator's scrape of the model pods' /metrics does not reach the workspace, or labels "
    "them with another resource_name (check metrics.model_metrics_port and the "
    "InferenceEndpointConfig's metricsStatus)",
    m.Exporter.LMCACHE: "LMCache's histogram does not reach vLLM's /metrics (PROMETHEUS_MULTIPROC_DIR), or the "
    "scrape does not reach the workspace",
    m.Exporter.KUBE_STATE_METRICS: "kube-state-metrics' series are not shipped to the workspace (the observability "
    "add-on's clusterMetrics level does not include them)",
    m.Exporter.DCGM: "dcgm-exporter's series do not carry the namespace and pod of the GPU's workload (its "
    "Kubernetes pod mapping is off), so no GPU series can be tied to this endpoint",
}


@dataclass(frozen=True, kw_only=True)
class RuleInput:
    """One series the rules read.

    :param forms: the selectors of the series; the input is present when any one of them matches.
    :param readers: the alerts (by name) and panels (``panel '<title>'``) that read it, in rule order.
    :param blind: for each alert reader, its failure sentence: what nobody is told while the input is missing.
    :param guards: the alerts that read it only through ``absent()``: they can fire on its absence, not miss it.
    :param recorded: written by the rules' own recording rules, so its absence says the rule group is not loaded
        or not evaluated, even when every raw input it reads is there.
    """

    series: str
    metric: m.Metric | None
    forms: tuple[Selector, ...]
    readers: tuple[str, ...]
    blind: tuple[str, ...]
    guards: tuple[str, ...] = ()
    recorded: bool = False


def _family(series: str) -> m.Metric | None:
    return next((metric for metric in m.ALL_METRICS if series in m.series_names(metric)), None)


def rule_inputs(spec: DpdSpec, *, panels: dict[str, dict[str, dict[str, str]]] | None = None) -> tuple[RuleInput, ...]:
    """Every selector of ``spec``'s alert rules and of ``panels`` (the dashboard's :func:`panel_queries`), each once.

    Raises ``ImportError`` without ``promql-parser``.
    """
    s = EndpointSelectors.of(spec)
    router_forms = [frozenset(selectors(f"x{{{form}}}")[0].matchers) for form in s.routers]

    def key(selector: Selector) -> tuple[str, str]:
        # A bucket matcher (le) narrows the same series: it does not make another input.
        is_router = frozenset(mt for mt in selector.matchers if mt.label != "le") in router_forms
        return (selector.name, "router" if is_router else selector.promql())

    forms: dict[tuple[str, str], dict[Selector, None]] = {}
    readers: dict[tuple[str, str], dict[str, None]] = {}
    blind: dict[tuple[str, str], dict[str, None]] = {}
    guards: dict[tuple[str, str], dict[str, None]] = {}

    # A recorded series (the SLO burn-rate rules read only these) needs the series its rule reads, and the rule
    # group loaded and evaluated: both are inputs to look for in the workspace.
    recorded = {rule.record: rule.expr for rule in recording_rules(spec)}

    def add(expr: str, reader: str, failure: str | None) -> None:
        guarded = absence_selectors(expr) if failure is not None else ()
        for selector in selectors(expr):
            if selector.name in recorded:
                add(recorded[selector.name], reader, failure)  # then the recorded series itself, below
            k = key(selector)
            forms.setdefault(k, {})[selector] = None
            readers.setdefault(k, {})[reader] = None
            if selector in guarded:
                guards.setdefault(k, {})[reader] = None
            elif failure is not None:
                blind.setdefault(k, {})[f"{reader} ({failure})"] = None

    for rule in alert_rules(spec):
        add(rule.expr, rule.name, rule.failure)
    for row in (panels or {}).values():
        for title, lines in row.items():
            for expr in lines.values():
                add(expr, f"panel '{title}'", None)
    return tuple(
        RuleInput(
            series=k[0],
            metric=_family(k[0]),
            forms=tuple(forms[k]),
            readers=tuple(readers[k]),
            blind=tuple(blind.get(k, {})),
            guards=tuple(guards.get(k, {})),
            recorded=k[0] in recorded,
        )
        for k in forms
    )
