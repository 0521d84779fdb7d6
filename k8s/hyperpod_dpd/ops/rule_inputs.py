"""Are the rules' inputs in the workspace where the rules run? One row per series the alerts and panels read.

Smoke reads each pod's ``/metrics``: that proves vLLM exports a series, not that Amazon Managed
Prometheus holds it with the labels the rules select (the router's ``resource_name``, kube-state-metrics'
Deployment series, DCGM's pod labels). Here each selector of :func:`rule_inputs` is counted in the
workspace itself, and a missing one is told apart: the series is there under other labels (what
they are is shown), not there at all, or not scraped yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from hyperpod_dpd.clients.amp import AmpError, PrometheusApi, Send, Workspace, describe_workspace, urllib_send
from hyperpod_dpd.clients.aws import NO_CREDENTIALS, AwsClients
from hyperpod_dpd.clients.checks import Check, errored, failed, passed, skipped
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.alerts import EVALUATION_INTERVAL, EVALUATION_SECONDS
from hyperpod_dpd.observability.dashboard import EXTRA_HINT, panel_queries
from hyperpod_dpd.observability.inputs import ABSENT_CAUSE, RuleInput, rule_inputs
from hyperpod_dpd.observability.promql import parser
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.validation.observability import between_buckets

ROW = "amp input"
TTFT_BUCKETS = "amp ttft buckets"
WORKSPACE_ROW = "amp workspace"
# The operator's default scrape interval (MetricsSpec.scrape_interval_seconds).
DEFAULT_SCRAPE_SECONDS = 15
SEEN_SHOWN = 3  # label sets of a mismatched series shown in the detail
RECORDED_CAUSE = ("the rule group is not loaded or not evaluated yet (a recording rule writes its series on each "
                  f"evaluation, every {EVALUATION_INTERVAL}): check the workspace's rule groups namespace is ACTIVE "
                  "(aws amp list-rule-groups-namespaces)")


def _count(api: PrometheusApi, promql: str) -> int:
    return sum(int(float(sample["value"][1])) for sample in api.query(f"count({promql})"))


def _seen(api: PrometheusApi, item: RuleInput) -> list[str]:
    """The label values the workspace holds ``item``'s series under, for the labels its forms select on."""
    labels = sorted({label for form in item.forms for label in form.labels()} - {"le"})
    by = f" by ({', '.join(labels)})" if labels else ""
    rows = api.query(f'count{by} ({{__name__="{item.series}"}})')
    return sorted(
        ", ".join(f"{label}={sample['metric'].get(label, '(none)')!r}" for label in labels) or "no labels"
        for sample in rows
    )


def _blind(item: RuleInput) -> str:
    panels = [reader for reader in item.readers if reader.startswith("panel ")]
    parts = [f"blind: {', '.join(item.blind) if item.blind else 'no alert'}"]
    if item.guards:
        parts.append(f"read through absent() by: {', '.join(item.guards)}")
    if panels:
        parts.append(f"empty: {', '.join(panels)}")
    return "; ".join(parts)


def check_input(api: PrometheusApi, item: RuleInput, *, namespace_scraped: bool, evaluated: bool = True) -> Check:
    """PASS when a form of the selector has series; SKIP when none can exist yet; FAIL naming who goes blind.

    ``evaluated`` is False within the rule group's first evaluation interval: a recorded series has none yet.
    """
    name = f"{ROW} {item.series}"
    head = " or ".join(form.promql() for form in item.forms)
    for form in item.forms:
        found = _count(api, form.promql())
        if found:
            which = f" under {form.promql()}" if len(item.forms) > 1 else ""
            return passed(name, f"{head}\n  present: {found} series{which}")
    if not namespace_scraped:
        return skipped(name, f"{head}\n  not yet scraped: the workspace holds no series of the endpoint's namespace")
    if item.recorded:
        if not evaluated:
            return skipped(name, f"{head}\n  not evaluated yet: {RECORDED_CAUSE}")
        return failed(name, f"{head}\n  absent: the workspace holds no {item.series}\n  why: {RECORDED_CAUSE}\n"
                      f"  {_blind(item)}")
    if item.metric is not None and item.metric.first_sample:
        return skipped(name, f"{head}\n  no samples yet: {item.metric.first_sample}")
    seen = _seen(api, item)
    if seen:
        more = f"; ... {len(seen) - SEEN_SHOWN} more" if len(seen) > SEEN_SHOWN else ""
        shown = "; ".join(seen[:SEEN_SHOWN]) + more
        where = f"absent with these labels; the workspace holds {item.series} with {shown}"
    else:
        where = f"absent: the workspace holds no {item.series} at all"
    cause = ABSENT_CAUSE[item.metric.exporter] if item.metric is not None else "no exporter known for it"
    return failed(name, f"{head}\n  {where}\n  why: {cause}\n  {_blind(item)}")


def check_ttft_buckets(api: PrometheusApi, inputs: Sequence[RuleInput], ttft_ms: float) -> Check | None:
    """The router's TTFT buckets as the workspace holds them, against ``slo.ttft_ms``; None without the series.

    No source documents the router's buckets, so only here can the bucket the SLO alert reads be named.
    """
    item = next((i for i in inputs if i.series == m.DPD_E2E_TTFT.bucket()), None)
    if item is None:
        return None
    bounds: set[str] = set()
    for form in item.forms:
        bounds |= {str(sample["metric"].get("le", "")) for sample in api.query(f"count by (le) ({form.promql()})")}
    if not bounds:
        return None
    # One bound may arrive as 1 and 1.0 (prometheus_client writes floats, a relabelling pipeline may not).
    finite = sorted({float(b) for b in bounds if b not in ("+Inf", "")})
    detail = f"dpd_e2e_ttft_seconds buckets in the workspace: {', '.join(f'{b:g}' for b in finite) or 'none'}"
    if not finite:
        return failed(
            TTFT_BUCKETS,
            f"{detail} finite, only +Inf: no p90 can be read, so DpdTtftSloBreach can "
            "only say the SLO cannot be measured",
        )
    message = between_buckets(ttft_ms, finite, "the router's dpd_e2e_ttft_seconds histogram")
    if finite[-1] < ttft_ms / 1000:
        return failed(TTFT_BUCKETS, f"{detail} s\n  {message}")
    return passed(TTFT_BUCKETS, f"{detail} s\n  {message}")


def check_rule_inputs(
    api: PrometheusApi,
    workspace: Workspace,
    inputs: Sequence[RuleInput],
    *,
    namespace: str,
    now: datetime,
    scrape_seconds: int | None,
    ttft_ms: float | None = None,
) -> list[Check]:
    """The workspace's row, then one row per input; a workspace younger than one scrape interval has none yet."""
    interval = scrape_seconds or DEFAULT_SCRAPE_SECONDS
    if workspace.status != "ACTIVE":
        return [
            failed(
                WORKSPACE_ROW, f"{workspace.workspace_id} is {workspace.status}, not ACTIVE: the rules do not run there"
            )
        ]
    try:
        if workspace.created_at is not None and (now - workspace.created_at).total_seconds() < interval:
            age = (now - workspace.created_at).total_seconds()
            return [
                passed(WORKSPACE_ROW, f"{workspace.workspace_id} ACTIVE"),
                *(
                    skipped(
                        f"{ROW} {item.series}",
                        f"{' or '.join(f.promql() for f in item.forms)}\n  not yet "
                        f"scraped: the workspace is {age:.0f} s old, younger than one scrape interval "
                        f"({interval} s)",
                    )
                    for item in inputs
                ),
            ]
        scraped = _count(api, f'{{namespace="{namespace}"}}') > 0
        rows = [
            passed(WORKSPACE_ROW, f"{workspace.workspace_id} ACTIVE; {len(inputs)} series the alerts and panels read")
        ]
        # The workspace's age stands in for the rule group's: the stack creates both together.
        created = workspace.created_at
        evaluated = created is None or (now - created).total_seconds() >= EVALUATION_SECONDS
        rows += [check_input(api, item, namespace_scraped=scraped, evaluated=evaluated) for item in inputs]
        buckets = check_ttft_buckets(api, inputs, ttft_ms) if ttft_ms is not None else None
        return rows + ([buckets] if buckets is not None else [])
    except AmpError as err:
        return [errored(WORKSPACE_ROW, f"{workspace.workspace_id}: {err}")]


def amp_input_checks(
    spec: DpdSpec,
    *,
    clients: AwsClients | None,
    workspace: str | None,
    send: Send = urllib_send,
    now: datetime | None = None,
) -> list[Check]:
    """The rows of :func:`check_rule_inputs` for ``spec``'s rules and dashboard, or one row saying why not."""
    if not spec.metrics.enabled:
        return [skipped(WORKSPACE_ROW, "metrics.enabled is false: no alert rule reads the workspace")]
    if workspace is None:
        return [
            skipped(
                WORKSPACE_ROW,
                "no AMP workspace known: pass --amp-workspace, or --stack/--outputs-file of "
                "a stack deployed with observability",
            )
        ]
    credentials = clients.credentials() if clients is not None and clients.credentials is not None else None
    if clients is None or credentials is None:
        return [skipped(WORKSPACE_ROW, f"{NO_CREDENTIALS}; the workspace is queried with them")]
    if parser() is None:
        return [skipped(WORKSPACE_ROW, f"the rules' selectors are read with promql-parser: {EXTRA_HINT}")]
    try:
        found = describe_workspace(clients, workspace)
    except ValueError as err:
        return [failed(WORKSPACE_ROW, f"{err}: pass the stack's AmpWorkspaceArn output or its ws-... id")]
    except AmpError as err:
        return [errored(WORKSPACE_ROW, str(err))]
    api = PrometheusApi(endpoint=found.query_endpoint, region=clients.region, credentials=credentials, send=send)
    return check_rule_inputs(
        api,
        found,
        rule_inputs(spec, panels=panel_queries(spec)),
        namespace=spec.namespace,
        now=now or datetime.now(UTC),
        scrape_seconds=spec.metrics.scrape_interval_seconds,
        ttft_ms=spec.slo.ttft_ms if spec.slo is not None else None,
    )
