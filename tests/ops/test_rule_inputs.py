"""verify's 'amp input' rows against a recorded AMP query API: a workspace of series built the way each
exporter labels them, answering Prometheus' /api/v1/query as Prometheus does."""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.parse
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.stub import Stubber

from hyperpod_dpd.clients.amp import AmpError, PrometheusApi, Workspace
from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.checks import Check, Status
from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, role_deployment, router_deployment
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.observability.dashboard import panel_queries
from hyperpod_dpd.observability.inputs import rule_inputs
from hyperpod_dpd.observability.promql import selectors
from hyperpod_dpd.observability.rule import endpoint_labels
from hyperpod_dpd.observability.slo import recording_rules
from hyperpod_dpd.ops.rule_inputs import ROW, TTFT_BUCKETS, WORKSPACE_ROW, amp_input_checks, check_rule_inputs
from hyperpod_dpd.spec import DpdSpec, SloSpec

promql_parser = pytest.importorskip("promql_parser", reason="pip install '.[observability]'")

REGION = "us-west-2"
ENDPOINT = f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/ws-1234abcd-12ab-34cd-56ef-1234567890ab/"
WS_ID = "ws-1234abcd-12ab-34cd-56ef-1234567890ab"
WS_ARN = f"arn:aws:aps:{REGION}:123456789012:workspace/{WS_ID}"
NOW = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
Series = dict[str, str]


class RecordedAmp:
    """Answers ``count(<selector>)`` and ``count by (labels) ({__name__="x"})`` over ``series`` as Prometheus does
    (regex matchers anchored at both ends), and records every signed request."""

    def __init__(self, series: Iterable[Series], *, status: int = 200) -> None:
        self.series, self.status = list(series), status
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def __call__(self, method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        self.requests.append((method, url, headers))
        if self.status != 200:
            return self.status, json.dumps({"status": "error", "errorType": "forbidden", "error": "denied"}).encode()
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["query"][0]
        tree = promql_parser.parse(query)
        (selector,) = selectors(query)
        by = list(tree.modifier.labels) if tree.modifier is not None else []
        groups: dict[tuple[tuple[str, str], ...], int] = {}
        for labels in self.series:
            if selector.name and labels["__name__"] != selector.name:
                continue
            if all(_matches(labels.get(mt.label, ""), mt.op, mt.value) for mt in selector.matchers):
                key = tuple((label, labels[label]) for label in by if label in labels)
                groups[key] = groups.get(key, 0) + 1
        result = [{"metric": dict(key), "value": [NOW.timestamp(), str(n)]} for key, n in groups.items()]
        return 200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def _matches(have: str, op: str, want: str) -> bool:
    hit = re.fullmatch(want, have) is not None if op in ("=~", "!~") else have == want
    return hit if op in ("=", "=~") else not hit


def _pod(deployment: str, n: int = 0) -> str:
    return f"{deployment}-6f8d{n}-kl{n}no"


def exporters(
    spec: DpdSpec,
    *,
    router_resource: str | None = None,
    dcgm_pods: bool = True,
    kube_state_metrics: bool = True,
    router_buckets: tuple[str, ...] = ("1.0", "10.0", "+Inf"),
    rule_group: bool = True,
) -> list[Series]:
    """One healthy endpoint's series, labelled as each exporter and the HyperPod pipeline label them."""
    ns, prefill, decode = spec.namespace, role_deployment(spec, "prefill"), role_deployment(spec, "decode")
    router = router_deployment(spec)
    out: list[Series] = []
    for role in (prefill, decode):
        pod = {"resource_name": role, "namespace": ns, "pod_name": _pod(role)}
        for name in (
            "vllm:num_requests_running",
            "vllm:num_requests_waiting",
            "vllm:kv_cache_usage_perc",
            "vllm:num_preemptions_total",
            "vllm:generation_tokens_total",
        ):
            out.append({"__name__": name, **pod})
        for source in (m.LOCAL_COMPUTE, m.LOCAL_CACHE_HIT, m.EXTERNAL_KV_TRANSFER):  # all three created at start
            out.append({"__name__": m.PROMPT_TOKENS_BY_SOURCE.name, "source": source, **pod})
        for histogram in (m.TTFT, m.INTER_TOKEN_LATENCY, m.PREFILL_TIME, m.REQUEST_PROMPT_TOKENS):
            # vLLM emits every bound of its buckets; the SLO burn rules read the inter-token one at slo.tpot_ms.
            les = ("0.05", "5000.0", "+Inf") if histogram is m.INTER_TOKEN_LATENCY else ("2000.0", "5000.0", "+Inf")
            out += [{"__name__": f"{histogram.name}_bucket", "le": le, **pod} for le in les]
            out += [{"__name__": f"{histogram.name}{suffix}", **pod} for suffix in ("_sum", "_count")]
        out.append({"__name__": m.MODEL_INVOCATIONS.name, "method": "POST", **pod})
        out += [{"__name__": m.MODEL_ERRORS.name, "method": "POST", "status": code, **pod} for code in ("503", "400")]
    prefill_pod = {"resource_name": prefill, "namespace": ns, "pod_name": _pod(prefill)}
    out += [
        {"__name__": "lmcache:store_put_time_bucket", "le": "0.01", "role": "sender", **prefill_pod},
        {"__name__": "lmcache:store_put_time_count", "role": "sender", **prefill_pod},
    ]
    routed = {"resource_name": router_resource or _pod(router)}
    for metric in (m.DPD_DISAGGREGATED, m.DPD_LOCAL, m.DPD_FALLBACK, m.DPD_INFLIGHT_PREFILL):
        out.append({"__name__": metric.name, **routed})
    out += [{"__name__": m.DPD_E2E_TTFT.bucket(), "le": le, **routed} for le in router_buckets]
    out.append({"__name__": f"{m.DPD_E2E_TTFT.name}_count", **routed})
    if kube_state_metrics:
        for namespace, deployment in ((ns, prefill), (ns, decode), (OPERATOR_NAMESPACE, router)):
            for metric in (m.DEPLOYMENT_AVAILABLE, m.DEPLOYMENT_WANTED):
                out.append({"__name__": metric.name, "namespace": namespace, "deployment": deployment})
        for role in (prefill, decode):
            out.append({"__name__": m.CONTAINER_RESTARTS.name, "namespace": ns, "pod": _pod(role), "container": role})
    for gpu in range(2):
        labels = {"__name__": m.GPU_XID.name, "gpu": str(gpu), "Hostname": "hyperpod-i-0abc"}
        out.append(labels | ({"namespace": ns, "pod": _pod(decode)} if dcgm_pods else {}))
    if rule_group:  # what AMP's ruler writes each evaluation once the stack's rule group is loaded
        out += [{"__name__": rule.record, **endpoint_labels(spec)} for rule in recording_rules(spec)]
    return out


@pytest.fixture
def slo_spec(spec: DpdSpec) -> DpdSpec:
    """With an SLO: the TTFT and TPOT rules read the router's and the decoder's latency histograms too."""
    return dataclasses.replace(spec, slo=SloSpec(ttft_ms=2000, tpot_ms=50))


def _workspace(created: datetime = NOW - timedelta(days=3), status: str = "ACTIVE") -> Workspace:
    return Workspace(workspace_id=WS_ID, status=status, query_endpoint=ENDPOINT, created_at=created)


def _run(spec: DpdSpec, amp: RecordedAmp, workspace: Workspace | None = None) -> dict[str, list[Check]]:
    api = PrometheusApi(endpoint=ENDPOINT, region=REGION, credentials=Credentials("AKIDEXAMPLE", "secret"), send=amp)
    rows = check_rule_inputs(
        api,
        workspace or _workspace(),
        rule_inputs(spec, panels=panel_queries(spec)),
        namespace=spec.namespace,
        now=NOW,
        scrape_seconds=spec.metrics.scrape_interval_seconds,
        ttft_ms=spec.slo.ttft_ms if spec.slo is not None else None,
    )
    by: dict[str, list[Check]] = {}
    for row in rows:
        by.setdefault(row.name, []).append(row)
    return by


def test_every_input_is_present_in_a_healthy_workspace(slo_spec: DpdSpec) -> None:
    amp = RecordedAmp(exporters(slo_spec))
    rows = _run(slo_spec, amp)
    inputs = rule_inputs(slo_spec, panels=panel_queries(slo_spec))
    assert sum(len(found) for found in rows.values()) == len(inputs) + 2 >= 30
    assert [row.status for found in rows.values() for row in found] == [Status.PASS] * (len(inputs) + 2)
    (buckets,) = rows[TTFT_BUCKETS]
    assert buckets.detail.splitlines() == [
        "dpd_e2e_ttft_seconds buckets in the workspace: 1, 10 s",
        "  2000 ms is not a bucket bound of the router's dpd_e2e_ttft_seconds histogram: the alert reads the p90 "
        "inside the bucket (1000, 10000] ms, interpolated as if observations spread evenly across it, so it fires "
        "early or late by up to the bucket's width (9000 ms); use 1000 for an exact threshold",
    ]
    (router,) = rows[f"{ROW} {m.DPD_INFLIGHT_PREFILL.name}"]
    assert router.detail.splitlines()[1].startswith(
        '  present: 1 series under dpd_routing_inflight_prefill{resource_name=~"dpd-test-default-router'
    )
    method, url, headers = amp.requests[0]
    assert method == "GET" and url.startswith(f"{ENDPOINT}api/v1/query?query=count%28")
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20")
    assert f"/{REGION}/aps/aws4_request" in headers["Authorization"] and "X-Amz-Date" in headers


def test_a_router_under_another_resource_name_is_absent_with_the_labels_it_has(slo_spec: DpdSpec) -> None:
    rows = _run(slo_spec, RecordedAmp(exporters(slo_spec, router_resource="hyperpod-router")))
    router_rows = [row for name, found in rows.items() if name.startswith(f"{ROW} dpd_") and ":" not in name
                   for row in found]  # a recorded series is named level:metric:operations
    assert len(router_rows) == 6 and {row.status for row in router_rows} == {Status.FAIL}
    (inflight,) = rows[f"{ROW} {m.DPD_INFLIGHT_PREFILL.name}"]
    lines = inflight.detail.splitlines()
    assert lines[1] == (
        "  absent with these labels; the workspace holds dpd_routing_inflight_prefill with "
        "namespace='(none)', resource_name='hyperpod-router'"
    )
    assert lines[2].startswith("  why: the router's series carry a resource_name neither form")
    assert lines[3] == (
        "  blind: DpdPrefillSaturated (more prefill requests are in flight than the prefillers can "
        "run); read through absent() by: DpdRouterMetricsAbsent; empty: panel 'In-flight prefill "
        "requests'"
    )
    others = [row for name, found in rows.items() if not name.startswith(f"{ROW} dpd_") for row in found]
    assert {row.status for row in others} == {Status.PASS}, "only the router's rows fail"


@pytest.mark.parametrize(
    ("buckets", "message"),
    [
        (
            ("0.5", "1.0", "+Inf"),
            "2000 ms is above the top finite bucket of the router's dpd_e2e_ttft_seconds "
            "histogram (1000 ms): histogram_quantile never reads a p90 above it",
        ),
        (("+Inf",), "none finite, only +Inf: no p90 can be read"),
        (("1", "1.0", "+Inf"), "dpd_e2e_ttft_seconds buckets in the workspace: 1 s\n"),
    ],
)
def test_router_ttft_buckets_that_cannot_resolve_the_slo_fail(
    slo_spec: DpdSpec, buckets: tuple[str, ...], message: str
) -> None:
    """T4-12 where the rule runs: the router's buckets are known only from the workspace."""
    (row,) = _run(slo_spec, RecordedAmp(exporters(slo_spec, router_buckets=buckets)))[TTFT_BUCKETS]
    assert row.status is Status.FAIL and message in row.detail


def test_dcgm_without_pod_labels_blinds_the_xid_alert(spec: DpdSpec) -> None:
    (xid,) = _run(spec, RecordedAmp(exporters(spec, dcgm_pods=False)))[f"{ROW} {m.GPU_XID.name}"]
    assert xid.status is Status.FAIL
    lines = xid.detail.splitlines()
    assert lines[0] == (
        'DCGM_FI_DEV_XID_ERRORS{namespace="default", pod=~"(prefill-dpd-test|decode-dpd-test)-[a-z0-9]+-[a-z0-9]+"}'
    )
    assert lines[1] == (
        "  absent with these labels; the workspace holds DCGM_FI_DEV_XID_ERRORS with namespace='(none)', pod='(none)'"
    )
    assert "Kubernetes pod mapping is off" in lines[2]
    assert lines[3] == "  blind: DpdGpuXidError (a GPU of the endpoint raised a new hardware Xid error)"


def test_kube_state_metrics_not_shipped_names_the_availability_alerts(spec: DpdSpec) -> None:
    rows = _run(spec, RecordedAmp(exporters(spec, kube_state_metrics=False)))
    ksm = [row for name, found in rows.items() if name.startswith(f"{ROW} kube_") for row in found]
    assert len(ksm) == 8 and {row.status for row in ksm} == {Status.FAIL}
    assert all("absent: the workspace holds no kube_" in row.detail for row in ksm)
    assert all("the observability add-on's clusterMetrics level" in row.detail for row in ksm)
    blind = " ".join(row.detail for row in ksm)
    assert (
        "  blind: DpdNoReadyPod (a role of the endpoint has no Ready pod); read through absent() by: "
        "DpdKubeStateMetricsAbsent"
    ) in blind
    for alert in (
        "DpdNoReadyPod",
        "DpdRouterDown",
        "DpdKubeStateMetricsAbsent",
        "DpdDecodeRestarted",
        "DpdPrefillRestarted",
    ):
        assert alert in blind
    assert {row.status for name, found in rows.items() if not name.startswith(f"{ROW} kube_") for row in found} == {
        Status.PASS
    }


def test_not_yet_scraped_and_first_event_series_are_skipped_not_failed(spec: DpdSpec) -> None:
    young = _run(spec, RecordedAmp([]), _workspace(created=NOW - timedelta(seconds=5)))
    assert {row.status for name, found in young.items() if name != WORKSPACE_ROW for row in found} == {Status.SKIP}
    assert "not yet scraped: the workspace is 5 s old, younger than one scrape interval (15 s)" in (
        young[f"{ROW} {m.GPU_XID.name}"][0].detail
    )
    empty = _run(spec, RecordedAmp([{"__name__": "up", "namespace": "kube-system"}]))
    assert {row.status for name, found in empty.items() if name != WORKSPACE_ROW for row in found} == {Status.SKIP}
    assert "the workspace holds no series of the endpoint's namespace" in empty[f"{ROW} {m.GPU_XID.name}"][0].detail
    healthy_no_errors = [
        s
        for s in exporters(spec)
        if s["__name__"] not in (m.MODEL_ERRORS.name, "lmcache:store_put_time_bucket", "lmcache:store_put_time_count")
    ]
    rows = _run(spec, RecordedAmp(healthy_no_errors))
    errors = rows[f"{ROW} {m.MODEL_ERRORS.name}"]
    assert len(errors) == 2 and {row.status for row in errors} == {Status.SKIP}
    assert "no samples yet: the sidecar creates a status's error series with the first failed request" in (
        errors[0].detail
    )
    assert rows[f"{ROW} lmcache:store_put_time_bucket"][0].status is Status.SKIP


def test_a_denied_query_is_an_error_row_and_an_inactive_workspace_a_failure(spec: DpdSpec) -> None:
    denied = _run(spec, RecordedAmp(exporters(spec), status=403))
    assert list(denied) == [WORKSPACE_ROW]
    (row,) = denied[WORKSPACE_ROW]
    assert row.status is Status.ERROR and "the caller needs aps:QueryMetrics" in row.detail
    (creating,) = _run(spec, RecordedAmp([]), _workspace(status="CREATING"))[WORKSPACE_ROW]
    assert creating.status is Status.FAIL and "is CREATING, not ACTIVE" in creating.detail


def _strict_query(url: str) -> str:
    """The canonical query string AWS computes server-side: each name and value decoded, then encoded with only
    the unreserved characters left bare (a space is %20), sorted (AWS docs, "Create a canonical request")."""
    pairs = urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query, keep_blank_values=True)
    enc = [(urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")) for k, v in pairs]
    return "&".join(f"{k}={v}" for k, v in sorted(enc))


def test_the_signed_query_encodes_spaces_as_percent_20_as_sigv4_requires() -> None:
    amp = RecordedAmp([{"__name__": "up", "namespace": "a b"}])
    api = PrometheusApi(endpoint=ENDPOINT, region=REGION, credentials=Credentials("AKIDEXAMPLE", "secret"), send=amp)
    api.query('count by (namespace) ({__name__="up", namespace="a b"})')
    ((method, url, headers),) = amp.requests
    raw = urllib.parse.urlsplit(url).query
    assert "+" not in raw and "%20" in raw
    assert raw == _strict_query(url)  # what AMP re-derives is what was sent
    signed = AWSRequest(method=method, url=url, headers={k: v for k, v in headers.items() if k != "Authorization"})
    canonical = SigV4Auth(Credentials("AKIDEXAMPLE", "secret"), "aps", REGION).canonical_request(signed)
    assert canonical.split("\n")[2] == _strict_query(url)


def test_a_refused_signature_is_not_reported_as_a_missing_permission() -> None:
    def refuse(method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
        return 403, b'{"message": "signature does not match", "__type": "InvalidSignatureException"}'

    api = PrometheusApi(endpoint=ENDPOINT, region=REGION, credentials=Credentials("AKIDEXAMPLE", "secret"), send=refuse)
    with pytest.raises(AmpError, match="refused the request's SigV4 signature") as err:
        api.query("up")
    assert "aps:QueryMetrics" not in str(err.value)


def _clients(stubbed: Any) -> AwsClients:
    return AwsClients(
        region=REGION,
        factory=lambda service, region_name=None: stubbed,
        credentials=lambda: Credentials("AKIDEXAMPLE", "secret"),
    )


def _described(stub: Stubber) -> None:
    """DescribeWorkspace's answer for the ACTIVE workspace the recorded AMP serves, created a day ago."""
    stub.add_response(
        "describe_workspace",
        {
            "workspace": {
                "workspaceId": WS_ID,
                "arn": WS_ARN,
                "status": {"statusCode": "ACTIVE"},
                "prometheusEndpoint": ENDPOINT,
                "createdAt": NOW - timedelta(days=1),
            }
        },
        {"workspaceId": WS_ID},
    )


def test_the_workspace_is_described_then_queried(spec: DpdSpec) -> None:
    amp_client = boto3.client("amp", region_name=REGION, aws_access_key_id="a", aws_secret_access_key="b")
    with Stubber(amp_client) as stub:
        _described(stub)
        amp = RecordedAmp(exporters(spec))
        rows = amp_input_checks(spec, clients=_clients(amp_client), workspace=WS_ARN, send=amp, now=NOW)
    assert rows[0].status is Status.PASS and rows[0].detail.startswith(f"{WS_ID} ACTIVE; ")
    assert len(rows) > 25 and all(row.status is Status.PASS for row in rows)
    assert [r.detail for r in amp_input_checks(spec, clients=_clients(amp_client), workspace=None, send=amp)] == [
        "no AMP workspace known: pass --amp-workspace, or --stack/--outputs-file of a stack deployed with observability"
    ]
    (bad,) = amp_input_checks(spec, clients=_clients(amp_client), workspace="my-workspace", send=amp)
    assert bad.status is Status.FAIL and bad.detail.startswith("'my-workspace' is neither an AMP workspace ARN")


@pytest.mark.usefixtures("aws")
def test_verify_json_carries_the_amp_rows(
    stubs: Any, fakes: Any, spec: DpdSpec, capsys: pytest.CaptureFixture[str]
) -> None:
    from hyperpod_dpd.cli import main
    from hyperpod_dpd.clients.kube import KubeError
    from hyperpod_dpd.clients.seams import Seams

    amp_client = boto3.client("amp", region_name=REGION, aws_access_key_id="a", aws_secret_access_key="b")
    stub = Stubber(amp_client)
    _described(stub)
    stub.activate()
    made = dataclasses.replace(
        fakes.clients_with(stubs, amp=amp_client), credentials=lambda: Credentials("AKIDEXAMPLE", "secret")
    )
    stubs.describe("dpd")
    stubs.nodes("dpd", [fakes.node("workers", "ml.p5.48xlarge", 1), fakes.node("workers", "ml.p5.48xlarge", 2)])

    def no_kubeconfig(context: str | None, kubeconfig: str | None) -> Any:
        raise KubeError("no kubeconfig")

    seams = Seams(aws_clients=lambda region, profile, fallback_region=None: made, kube_api=no_kubeconfig,
                  amp_send=RecordedAmp(exporters(spec, dcgm_pods=False)))
    assert main(["verify", "--cluster-name", "dpd", "--no-wait", "--json", "--amp-workspace", WS_ARN],
                seams=seams) == 1
    rows = json.loads(capsys.readouterr().out)["checks"]
    amp = [row for row in rows if row["check"].startswith("amp ")]
    assert amp[0] == {
        "check": WORKSPACE_ROW,
        "status": "PASS",
        "detail": f"{WS_ID} ACTIVE; {len(amp) - 1} series the alerts and panels read",
    }
    failing = [row["check"] for row in amp if row["status"] != "PASS"]
    assert failing == [f"{ROW} {m.GPU_XID.name}"]
    stub.deactivate()


def test_burn_rate_records_missing_say_the_rule_group_is_not_loaded(slo_spec: DpdSpec) -> None:
    """Every raw input there but no recorded series: the burn-rate alerts are blind, and the row says why; within
    the first evaluation after the deploy it is a SKIP, later a FAIL."""
    records = {rule.record for rule in recording_rules(slo_spec)}
    inputs = {item.series: item for item in rule_inputs(slo_spec, panels=panel_queries(slo_spec))}
    assert records <= set(inputs) and all(inputs[r].recorded for r in records)
    assert not any(item.recorded for name, item in inputs.items() if name not in records)
    fast = next(name for name in records if name.endswith("ratio_rate1h") and "ttft" in name)
    assert any(reader.startswith("DpdTtftBudgetBurnFast") for reader in inputs[fast].blind), inputs[fast].blind
    series = exporters(slo_spec, rule_group=False)
    late = _run(slo_spec, RecordedAmp(series))
    early = _run(slo_spec, RecordedAmp(series), _workspace(created=NOW - timedelta(seconds=45)))
    for name in records:
        (row,) = late[f"{ROW} {name}"]
        assert row.status is Status.FAIL, name
        assert "the rule group is not loaded or not evaluated yet" in row.detail and "blind: Dpd" in row.detail
        assert early[f"{ROW} {name}"][0].status is Status.SKIP
    raw = [row for name, found in late.items() if name.removeprefix(f"{ROW} ") not in records for row in found]
    assert {row.status for row in raw} == {Status.PASS}


def test_verify_checks_the_demand_series_the_slo_triggers_read(slo_spec: DpdSpec) -> None:
    """With autoscaling.slo the demand-absent alerts read the triggers' demand series, so verify's amp input rows
    count them in the workspace (the prefiller's local-compute prompt counter, the decoder's generated tokens)."""
    from hyperpod_dpd.observability.alerts import slo_autoscaled

    inputs = rule_inputs(slo_autoscaled(slo_spec))  # one input per series and selector: a series can have several

    def readers(series: str) -> set[str]:
        return {reader for item in inputs if item.series == series for reader in item.readers}

    assert "DpdPrefillDemandSeriesAbsent" in readers(m.PROMPT_TOKENS_BY_SOURCE.name)
    assert any('source="local_compute"' in form.promql() and f"prefill-{slo_spec.name}" in form.promql()
               for item in inputs if item.series == m.PROMPT_TOKENS_BY_SOURCE.name for form in item.forms)
    assert "DpdDecodeDemandSeriesAbsent" in readers(m.GENERATION_TOKENS.name)
    assert "DpdPrefillDemandSeriesAbsent" not in {r for item in rule_inputs(slo_spec) for r in item.readers}
