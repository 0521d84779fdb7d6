"""The per-endpoint DPD Grafana dashboard, built with Grafana's own dashboards-as-code library.

Four rows, top to bottom in the order a request travels: the router (how traffic splits, in-flight
prefill, end-to-end TTFT), the prefiller (queue, TTFT, compute time, KV store time), the decoder
(inter-token latency, KV cache usage, preemptions, where prompt tokens came from) and errors. Panels
draw the spec's alert thresholds, so a graph crossing its line is the alert about to fire.

Needs the ``observability`` extra (``grafana-foundation-sdk``); nothing imports this module eagerly.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.alerts import QUANTILE, RATE_WINDOW, thresholds_of
from hyperpod_dpd.observability.selectors import EndpointSelectors, select
from hyperpod_dpd.spec import DpdSpec

EXTRA_HINT = "pip install 'hyperpod-dpd[observability]'"
DATASOURCE_VARIABLE = "datasource"
GRID_WIDTH = 24
PANEL_HEIGHT = 8
MAX_UID = 40  # Grafana's limit on dashboard uids


class MissingExtra(ImportError):
    """The dashboard library is not installed; the message names the extra to install."""


def _sdk() -> Any:
    try:
        from grafana_foundation_sdk.builders import (  # noqa: PLC0415 - optional dependency
            common,
            dashboard,
            prometheus,
            stat,
            timeseries,
        )
        from grafana_foundation_sdk.models import common as common_models  # noqa: PLC0415
        from grafana_foundation_sdk.models import dashboard as models  # noqa: PLC0415
    except ModuleNotFoundError as err:
        raise MissingExtra(f"the DPD dashboard needs grafana-foundation-sdk: {EXTRA_HINT}") from err
    return (dashboard, prometheus, stat, timeseries, common, common_models, models)


def dashboard_uid(spec: DpdSpec) -> str:
    """A stable uid within Grafana's 40 characters: readable when it fits, else shortened with a hash."""
    readable = f"hyperpod-dpd-{spec.namespace}-{spec.name}"
    if len(readable) <= MAX_UID:
        return readable
    digest = hashlib.sha256(readable.encode()).hexdigest()[:8]
    return f"{readable[:MAX_UID - 9]}-{digest}"


def _quantile(histogram: m.Metric, matchers: str) -> str:
    return (f"histogram_quantile({QUANTILE:g}, sum by (le) "
            f"(rate({select(histogram.bucket(), matchers)}[{RATE_WINDOW}])))")


def panel_queries(spec: DpdSpec) -> dict[str, dict[str, dict[str, str]]]:
    """Every panel's PromQL by row and title (``legend -> expr`` per panel), in display order."""
    s = EndpointSelectors.of(spec)
    post = 'method="POST"'

    def rate(metric: str, matchers: str, *extra: str) -> str:
        return f"rate({select(metric, matchers, *extra)}[{RATE_WINDOW}])"

    return {
        "Router": {
            "Routing decisions per second": {
                "disaggregated": f"sum({rate(m.DPD_DISAGGREGATED.name, s.router)})",
                "local (short prompts)": f"sum({rate(m.DPD_LOCAL.name, s.router)})",
                "fallback (error)": f"sum({rate(m.DPD_FALLBACK.name, s.router)})"},
            "Disaggregated share": {
                "disaggregated / routed": (f"sum({rate(m.DPD_DISAGGREGATED.name, s.router)}) / "
                                           f"(sum({rate(m.DPD_DISAGGREGATED.name, s.router)}) + "
                                           f"sum({rate(m.DPD_LOCAL.name, s.router)}))")},
            "In-flight prefill requests": {
                "in flight": f"sum({select(m.DPD_INFLIGHT_PREFILL.name, s.router)})"},
            "End-to-end TTFT p90": {"p90": _quantile(m.DPD_E2E_TTFT, s.router)},
        },
        "Prefill": {
            "Prefill queue": {
                "waiting": f"sum({select(m.REQUESTS_WAITING.name, s.prefill)})",
                "running": f"sum({select(m.REQUESTS_RUNNING.name, s.prefill)})"},
            "Prefill TTFT p90": {"p90": _quantile(m.TTFT, s.prefill)},
            "Prefill compute time p90": {"p90": _quantile(m.PREFILL_TIME, s.prefill)},
            "KV store (put) time p90": {"p90": _quantile(m.KV_STORE_PUT_TIME, s.prefill)},
        },
        "Decode": {
            "Inter-token latency (TPOT) p90": {"p90": _quantile(m.INTER_TOKEN_LATENCY, s.decode)},
            "KV cache usage": {"max over decoders": f"max({select(m.KV_CACHE_USAGE.name, s.decode)})"},
            "Preemptions per second": {"preemptions": f"sum({rate(m.PREEMPTIONS.name, s.decode)})"},
            "Prompt tokens per second by source": {
                "{{source}}": f"sum by (source) ({rate(m.PROMPT_TOKENS_BY_SOURCE.name, s.decode)})"},
        },
        "Errors": {
            "Error ratio by role": {
                "{{resource_name}}": (f"sum by (resource_name) ({rate(m.MODEL_ERRORS.name, s.pods, post)}) / "
                                      f"sum by (resource_name) ({rate(m.MODEL_INVOCATIONS.name, s.pods, post)})")},
            "Requests per second by role": {
                "{{resource_name}}": f"sum by (resource_name) ({rate(m.MODEL_INVOCATIONS.name, s.pods, post)})"},
        },
    }


def _thresholds(spec: DpdSpec) -> dict[str, tuple[float, str]]:
    """Panel title -> (alert threshold, unit) drawn as a dashed red line."""
    t = thresholds_of(spec)
    lines: dict[str, tuple[float, str]] = {
        "In-flight prefill requests": (t.prefill_queue, "short"),
        "Prefill queue": (t.prefill_queue, "short"),
        "KV store (put) time p90": (t.kv_store_p90_seconds, "s"),
        "KV cache usage": (t.decode_kv_cache_usage, "percentunit"),
        "Error ratio by role": (t.error_ratio, "percentunit"),
    }
    if spec.slo is not None and spec.slo.ttft_ms is not None:
        lines["End-to-end TTFT p90"] = (spec.slo.ttft_ms / 1000, "s")
    if spec.slo is not None and spec.slo.tpot_ms is not None:
        lines["Inter-token latency (TPOT) p90"] = (spec.slo.tpot_ms / 1000, "s")
    return lines


UNITS = {"End-to-end TTFT p90": "s", "Prefill TTFT p90": "s", "Prefill compute time p90": "s",
         "KV store (put) time p90": "s", "Inter-token latency (TPOT) p90": "s", "KV cache usage": "percentunit",
         "Disaggregated share": "percentunit", "Error ratio by role": "percentunit"}
STAT_PANELS = {"Disaggregated share"}


def build_dashboard(spec: DpdSpec) -> Any:
    """The dashboard model (``grafana_foundation_sdk.models.dashboard.Dashboard``) for ``spec``."""
    dashboard, prometheus, stat, timeseries, common, common_models, models = _sdk()
    datasource = models.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
    lines = _thresholds(spec)
    builder = (dashboard.Dashboard(f"DPD {spec.namespace}/{spec.name}")
               .uid(dashboard_uid(spec))
               .description(f"Disaggregated prefill/decode endpoint {spec.name} in namespace {spec.namespace} "
                            "(hyperpod-dpd).")
               .tags(["hyperpod-dpd", "dpd"])
               .time("now-3h", "now").refresh("30s").timezone("browser").readonly()
               .with_variable(dashboard.DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus")
                              .type("prometheus")))
    panel_id = 0
    for row, panels in panel_queries(spec).items():
        panel_id += 1
        builder = builder.with_row(dashboard.Row(row).id(panel_id))
        for title, queries in panels.items():
            panel_id += 1
            kind = stat if title in STAT_PANELS else timeseries
            panel = kind.Panel().id(panel_id).title(title).datasource(datasource).height(PANEL_HEIGHT).span(
                GRID_WIDTH // len(panels))
            for index, (legend, expr) in enumerate(queries.items()):
                panel = panel.with_target(prometheus.Dataquery().expr(expr).legend_format(legend)
                                          .ref_id(chr(ord("A") + index)).datasource(datasource))
            if title in UNITS:
                panel = panel.unit(UNITS[title])
            if title in lines:
                value, _unit = lines[title]
                panel = panel.thresholds(dashboard.ThresholdsConfig().mode(models.ThresholdsMode.ABSOLUTE).steps([
                    models.Threshold(value=None, color="green"), models.Threshold(value=value, color="red")]))
                if kind is timeseries:
                    panel = panel.thresholds_style(common.GraphThresholdsStyleConfig().mode(
                        common_models.GraphThresholdsStyleMode.DASHED))
            builder = builder.with_panel(panel)
    return builder.build()


def dashboard_json(spec: DpdSpec) -> str:
    """The dashboard as Grafana JSON, byte-identical for the same spec."""
    model = build_dashboard(spec)  # raises MissingExtra first when the library is absent
    from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: PLC0415 - optional dependency

    return json.dumps(model, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
