"""The per-endpoint DPD Grafana dashboard, built with Grafana's own dashboards-as-code library.

First the DPD health row (KV transfer per decoder, the router, errors, TTFT and TPOT against the SLO, the
error budget's burn rate, each at its alert's own threshold), then four rows in the order a request
travels: the router (how traffic splits, in-flight prefill, end-to-end TTFT), the prefiller (queue,
TTFT, compute time, KV store time), the decoder (inter-token latency, KV cache usage, preemptions,
where prompt tokens came from) and errors. Panels draw the spec's alert thresholds, so a graph crossing
its line is the alert about to fire.

Needs the ``observability`` extra (``grafana-foundation-sdk``); nothing imports this module eagerly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.errors import DpdError, install_extra
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.alerts import (
    MIN_AVAILABLE,
    MIN_LONG_PROMPTS,
    RATE_WINDOW,
    decoder_tokens,
    inflight_prefill,
    long_prompts_per_decoder,
    per_second,
    prefill_capacity,
    prefill_max_num_seqs,
    prefill_waiting,
    quantile,
    router_available,
    router_quantile,
    thresholds_of,
)
from hyperpod_dpd.observability.rule import endpoint_labels, error_ratio, invocation_rate, num
from hyperpod_dpd.observability.selectors import PIPELINE_POD, EndpointSelectors, select
from hyperpod_dpd.observability.slo import FASTEST, budget, slis
from hyperpod_dpd.spec import DpdSpec

EXTRA_HINT = install_extra("observability")
DATASOURCE_VARIABLE = "datasource"
GRID_WIDTH = 24
PANEL_HEIGHT = 8
MAX_UID = 40  # Grafana's limit on dashboard uids


class MissingExtra(DpdError, ImportError):
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


def panel_queries(spec: DpdSpec) -> dict[str, dict[str, dict[str, str]]]:
    """Every panel's PromQL by row and title (``legend -> expr`` per panel), in display order.

    Where a panel shows what an alert compares, it draws the alert's own left-hand side (and, for the
    in-flight panel, the alert's right-hand side as a second line): see :func:`alert_lines`.
    """
    s = EndpointSelectors.of(spec)

    def rate(metric: str, matchers: str, *extra: str) -> str:
        return f"rate({select(metric, matchers, *extra)}[{RATE_WINDOW}])"

    def router_rate(metric: str) -> str:
        return f"sum{s.router_series(metric, per_second)}"

    return {
        HEALTH_ROW: {title: queries for title, (queries, _line) in health_panels(spec).items()},
        "Router": {
            "Routing decisions per second": {
                "disaggregated": router_rate(m.DPD_DISAGGREGATED.name),
                "local (short prompts)": router_rate(m.DPD_LOCAL.name),
                "fallback (error)": router_rate(m.DPD_FALLBACK.name)},
            "Disaggregated share": {
                "disaggregated / routed": (f"{router_rate(m.DPD_DISAGGREGATED.name)} / "
                                           f"({router_rate(m.DPD_DISAGGREGATED.name)} + "
                                           f"{router_rate(m.DPD_LOCAL.name)})")},
            "In-flight prefill requests": {
                "in flight": inflight_prefill(s),
                "prefill capacity (pods x max_num_seqs)": prefill_capacity(s, prefill_max_num_seqs(spec))},
            "End-to-end TTFT p90": {"p90": router_quantile(m.DPD_E2E_TTFT, s)},
        },
        "Prefill": {
            "Prefill queue": {
                "waiting (longest queue)": prefill_waiting(s),
                "running (all prefillers)": f"sum({select(m.REQUESTS_RUNNING.name, s.prefill)})"},
            "Prefill TTFT p90": {"p90": quantile(m.TTFT, s.prefill)},
            # vLLM's prefill-time buckets start at 0.3 s (loggers.py l.873), too coarse for a p90 of
            # short prefills: the mean from _sum / _count is exact.
            "Prefill compute time (mean)": {
                "mean": (f"sum({rate(m.PREFILL_TIME.name + '_sum', s.prefill)}) / "
                         f"sum({rate(m.PREFILL_TIME.name + '_count', s.prefill)})")},
            "KV store (put) time p90": {"p90": quantile(m.KV_STORE_PUT_TIME, s.prefill)},
        },
        "Decode": {
            "Inter-token latency (TPOT) p90": {"p90": quantile(m.INTER_TOKEN_LATENCY, s.decode)},
            "KV cache usage": {"max over decoders": f"max({select(m.KV_CACHE_USAGE.name, s.decode)})"},
            "Preemptions per second": {"preemptions": f"sum({rate(m.PREEMPTIONS.name, s.decode)})"},
            "Prompt tokens per second by source": {
                "{{source}}": f"sum by (source) ({rate(m.PROMPT_TOKENS_BY_SOURCE.name, s.decode)})"},
        },
        "Errors": {
            "Server error (5xx) ratio by role": {"{{resource_name}}": server_errors_or_zero(s)},
            "Requests per second by role": {"{{resource_name}}": invocation_rate(s.pods, RATE_WINDOW)},
        },
    }


HEALTH_ROW = "DPD health"
KV_RECEIVED = "{{pod_name}} KV tokens received (decoders the alert counts)"


def server_errors_or_zero(s: EndpointSelectors) -> str:
    """The 5xx ratio per role, 0 rather than No data while no request has failed (the sidecar creates the error
    series with the first error)."""
    return f"({error_ratio(s.pods, RATE_WINDOW)}) or ({invocation_rate(s.pods, RATE_WINDOW)} * 0)"


@dataclass(frozen=True, kw_only=True)
class Line:
    """A panel's threshold: the alert it belongs to, the value the alert compares with, and which side is bad.

    :param only: the one query (by legend) the threshold colours; the panel's other lines are not judged by it.
    :param marker: (legend, value) of a neutral line, where the alert starts counting rather than a bad state.
    """

    alert: str
    value: float
    unit: str
    below_is_bad: bool = False
    only: str | None = None
    marker: tuple[str, float] | None = None


def health_panels(spec: DpdSpec) -> dict[str, tuple[dict[str, str], Line]]:
    """The first row: one panel per DPD failure, each drawing what its alert compares, at the alert's own threshold.

    The values come from the alert's constants and the spec, never restated here.
    """
    s = EndpointSelectors.of(spec)
    t = thresholds_of(spec)
    panels: dict[str, tuple[dict[str, str], Line]] = {
        # DpdKvNotTransferred's bad state is a decoder with enough long prompts and no KV token: the KV line is
        # drawn only for decoders the alert counts, red at 0, green from one token on; the long-prompt line
        # carries only a neutral marker at MIN_LONG_PROMPTS, so a busy healthy decoder stays green.
        "KV transfer per decoder (15m)": (
            {"{{pod_name}} long prompts served": long_prompts_per_decoder(spec),
             KV_RECEIVED: (f"{decoder_tokens(s, m.EXTERNAL_KV_TRANSFER)} and on({PIPELINE_POD}) "
                           f"({long_prompts_per_decoder(spec)} >= {MIN_LONG_PROMPTS})")},
            Line(alert="DpdKvNotTransferred", value=1, unit="short", below_is_bad=True, only=KV_RECEIVED,
                 marker=("{{pod_name}} long prompts served", MIN_LONG_PROMPTS))),
        "Router available replicas": (
            {"available": router_available(spec)},
            Line(alert="DpdRouterDown", value=MIN_AVAILABLE, unit="short", below_is_bad=True)),
        "Server error (5xx) ratio": (
            {"{{resource_name}}": server_errors_or_zero(s)},
            Line(alert="DpdErrorRatioHigh", value=t.error_ratio, unit="percentunit")),
    }
    slo = spec.slo
    if slo is not None and slo.ttft_ms is not None:
        panels["TTFT p90 vs SLO"] = ({"p90": router_quantile(m.DPD_E2E_TTFT, s)},
                                     Line(alert="DpdTtftSloBreach", value=slo.ttft_ms / 1000, unit="s"))
    if slo is not None and slo.tpot_ms is not None:
        panels["TPOT p90 vs SLO"] = ({"p90": quantile(m.INTER_TOKEN_LATENCY, s.decode)},
                                     Line(alert="DpdTpotSloBreach", value=slo.tpot_ms / 1000, unit="s"))
    if slo is not None:
        labels = ", ".join(f'{k}="{v}"' for k, v in endpoint_labels(spec).items())
        burns = {f"{sli.key}" + (" {{resource_name}}" if sli.level == "resource_name" else ""):
                 f"{sli.ratio_record(FASTEST.long)}{{{labels}}} / {num(budget(spec))}" for sli in slis(spec)}
        panels[f"Error budget burn rate ({FASTEST.long})"] = (
            burns, Line(alert="DpdErrorBudgetBurnFast", value=FASTEST.factor, unit="short"))
    return panels


def alert_lines(spec: DpdSpec) -> dict[str, tuple[str, str]]:
    """Panel title -> (alert, the PromQL the alert compares with its threshold), for panels that draw one."""
    s = EndpointSelectors.of(spec)
    lines = {"In-flight prefill requests": ("DpdPrefillSaturated", inflight_prefill(s)),
             "Prefill queue": ("DpdPrefillQueueDeep", prefill_waiting(s)),
             "KV store (put) time p90": ("DpdKvTransferSlow", quantile(m.KV_STORE_PUT_TIME, s.prefill)),
             "KV cache usage": ("DpdDecodeKvCacheFull", f"max({select(m.KV_CACHE_USAGE.name, s.decode)})"),
             "Server error (5xx) ratio by role": ("DpdErrorRatioHigh", error_ratio(s.pods, RATE_WINDOW))}
    if spec.slo is not None and spec.slo.ttft_ms is not None:
        lines["End-to-end TTFT p90"] = ("DpdTtftSloBreach", router_quantile(m.DPD_E2E_TTFT, s))
    if spec.slo is not None and spec.slo.tpot_ms is not None:
        lines["Inter-token latency (TPOT) p90"] = ("DpdTpotSloBreach", quantile(m.INTER_TOKEN_LATENCY, s.decode))
    return lines


def _thresholds(spec: DpdSpec) -> dict[str, tuple[float, str]]:
    """Panel title -> (alert threshold, unit) drawn as a dashed red line.

    The in-flight panel has none: its alert compares with the prefill capacity, which the panel draws.
    """
    t = thresholds_of(spec)
    lines: dict[str, tuple[float, str]] = {
        "Prefill queue": (t.prefill_queue, "short"),
        "KV store (put) time p90": (t.kv_store_p90_seconds, "s"),
        "KV cache usage": (t.decode_kv_cache_usage, "percentunit"),
        "Server error (5xx) ratio by role": (t.error_ratio, "percentunit"),
    }
    if spec.slo is not None and spec.slo.ttft_ms is not None:
        lines["End-to-end TTFT p90"] = (spec.slo.ttft_ms / 1000, "s")
    if spec.slo is not None and spec.slo.tpot_ms is not None:
        lines["Inter-token latency (TPOT) p90"] = (spec.slo.tpot_ms / 1000, "s")
    return lines


def panel_lines(spec: DpdSpec) -> dict[str, Line]:
    """Every panel's threshold line: the health row's and the rows' below."""
    lines = {title: Line(alert="", value=value, unit=unit) for title, (value, unit) in _thresholds(spec).items()}
    lines.update({title: line for title, (_queries, line) in health_panels(spec).items()})
    return lines


UNITS = {"End-to-end TTFT p90": "s", "Prefill TTFT p90": "s", "Prefill compute time (mean)": "s",
         "KV store (put) time p90": "s", "Inter-token latency (TPOT) p90": "s", "KV cache usage": "percentunit",
         "Disaggregated share": "percentunit", "Server error (5xx) ratio by role": "percentunit"}
STAT_PANELS = {"Disaggregated share", "Router available replicas"}


def build_dashboard(spec: DpdSpec) -> Any:
    """The dashboard model (``grafana_foundation_sdk.models.dashboard.Dashboard``) for ``spec``."""
    dashboard, prometheus, stat, timeseries, common, common_models, models = _sdk()
    datasource = models.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE_VARIABLE}}}")
    lines = panel_lines(spec)
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
            if title in lines:
                panel = panel.unit(lines[title].unit)
            elif title in UNITS:
                panel = panel.unit(UNITS[title])
            if title in lines:
                line = lines[title]
                below, above = ("red", "green") if line.below_is_bad else ("green", "red")
                steps = [models.Threshold(value=None, color=below), models.Threshold(value=line.value, color=above)]
                dashed = models.DynamicConfigValue(id_val="custom.thresholdsStyle", value={"mode": "dashed"})
                ref = {legend: chr(ord("A") + index) for index, legend in enumerate(queries)}
                if line.only is None:
                    panel = panel.thresholds(dashboard.ThresholdsConfig().mode(models.ThresholdsMode.ABSOLUTE)
                                             .steps(steps))
                else:
                    panel = panel.with_override(
                        models.MatcherConfig(id_val="byFrameRefID", options=ref[line.only]),
                        [models.DynamicConfigValue(id_val="thresholds", value=models.ThresholdsConfig(
                            mode=models.ThresholdsMode.ABSOLUTE, steps=steps)),
                         models.DynamicConfigValue(id_val="color", value={"mode": "thresholds"}), dashed])
                if line.marker is not None:
                    legend, at = line.marker
                    panel = panel.with_override(
                        models.MatcherConfig(id_val="byFrameRefID", options=ref[legend]),
                        [models.DynamicConfigValue(id_val="thresholds", value=models.ThresholdsConfig(
                            mode=models.ThresholdsMode.ABSOLUTE, steps=[models.Threshold(value=None, color="green"),
                                                                       models.Threshold(value=at, color="blue")])),
                         dashed])
                if kind is timeseries and line.only is None:
                    panel = panel.thresholds_style(common.GraphThresholdsStyleConfig().mode(
                        common_models.GraphThresholdsStyleMode.DASHED))
            builder = builder.with_panel(panel)
    return builder.build()


def dashboard_json(spec: DpdSpec) -> str:
    """The dashboard as Grafana JSON, byte-identical for the same spec."""
    model = build_dashboard(spec)  # raises MissingExtra first when the library is absent
    from grafana_foundation_sdk.cog.encoder import JSONEncoder  # noqa: PLC0415 - optional dependency

    return json.dumps(model, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
