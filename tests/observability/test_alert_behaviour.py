"""Each alert fires on synthetic series that reproduce its failure and stays silent on a healthy endpoint.

Runs Prometheus's own rule evaluator, ``promtool test rules``, over the rendered rule file: a healthy
baseline (traffic flowing, KV transferred over EFA-speed puts, no errors) plus one injected failure
per case, and checks that exactly the expected alerts fire, with their labels and annotations.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd import DpdSpec, SloSpec
from hyperpod_dpd.contracts.operator import router_deployment
from hyperpod_dpd.observability import alert_rules, rules_document, rules_yaml
from hyperpod_dpd.observability.selectors import EndpointSelectors
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.validation.observability import MAX_SCRAPE_INTERVAL_SECONDS, MIN_TPOT_MS

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: install Debian's 'prometheus' package (apt-get install prometheus)")

EVAL_TIME = "25m"  # 5m rate window + 10m 'for' + margin
SAMPLES = "x40"


def _series(spec: DpdSpec) -> dict[str, str]:
    """A healthy endpoint: 1 req/s disaggregated, KV puts under 10 ms, p90 TTFT 0.9 s, no errors.

    Series names and labels are the ones the exporters emit (see ``hyperpod_dpd.observability.metrics``):
    the router's under its Deployment name, kube-state-metrics' with ``namespace``/``deployment``/``pod``,
    DCGM's with the pod mapping's ``pod``.
    """
    s = EndpointSelectors.of(spec)
    router = f'resource_name="{router_deployment(spec)}"'
    ns = f'namespace="{spec.namespace}"'
    prefill, decode = f"prefill-{spec.name}", f"decode-{spec.name}"
    flat = f"0+0{SAMPLES}"
    return {
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="0.01"}}': f"0+10{SAMPLES}",
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="0.1"}}': f"0+10{SAMPLES}",
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="1"}}': f"0+10{SAMPLES}",
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="+Inf"}}': f"0+10{SAMPLES}",
        f"lmcache:store_put_time_count{{{s.prefill}}}": f"0+10{SAMPLES}",
        f"dpd_routing_disaggregated_total{{{router}}}": f"0+60{SAMPLES}",
        f"dpd_routing_local_total{{{router}}}": f"0+30{SAMPLES}",
        f"dpd_routing_fallback_total{{{router}}}": flat,
        f"dpd_routing_inflight_prefill{{{router}}}": f"12{SAMPLES}",  # above the waiting threshold, below 16
        f'vllm:prompt_tokens_by_source_total{{{s.decode}, source="external_kv_transfer"}}': f"0+6000{SAMPLES}",
        f'vllm:prompt_tokens_by_source_total{{{s.decode}, source="local_compute"}}': f"0+90{SAMPLES}",
        f'vllm:prompt_tokens_by_source_total{{{s.decode}, source="local_cache_hit"}}': f"0+30{SAMPLES}",
        f'model_invocations_total{{{s.prefill}, method="POST"}}': f"0+60{SAMPLES}",
        f'model_invocations_total{{{s.decode}, method="POST"}}': f"0+90{SAMPLES}",
        f'model_errors_total{{{s.prefill}, method="POST"}}': flat,
        f'model_errors_total{{{s.decode}, method="POST"}}': flat,
        f"vllm:num_requests_waiting{{{s.prefill}}}": f"1{SAMPLES}",
        f"vllm:num_requests_running{{{s.prefill}}}": f"4{SAMPLES}",
        f"vllm:num_requests_running{{{s.decode}}}": f"8{SAMPLES}",
        f"vllm:kv_cache_usage_perc{{{s.decode}}}": f"0.5{SAMPLES}",
        f"vllm:num_preemptions_total{{{s.decode}}}": flat,
        f'dpd_e2e_ttft_seconds_bucket{{{router}, le="1"}}': f"0+10{SAMPLES}",
        f'dpd_e2e_ttft_seconds_bucket{{{router}, le="10"}}': f"0+10{SAMPLES}",
        f'dpd_e2e_ttft_seconds_bucket{{{router}, le="+Inf"}}': f"0+10{SAMPLES}",
        f'vllm:inter_token_latency_seconds_bucket{{{s.decode}, le="0.025"}}': f"0+10{SAMPLES}",
        f'vllm:inter_token_latency_seconds_bucket{{{s.decode}, le="0.1"}}': f"0+10{SAMPLES}",
        f'vllm:inter_token_latency_seconds_bucket{{{s.decode}, le="+Inf"}}': f"0+10{SAMPLES}",
        f'kube_deployment_status_replicas_available{{{ns}, deployment="{prefill}"}}': f"1{SAMPLES}",
        f'kube_deployment_status_replicas_available{{{ns}, deployment="{decode}"}}': f"1{SAMPLES}",
        f'kube_deployment_spec_replicas{{{ns}, deployment="{prefill}"}}': f"1{SAMPLES}",
        f'kube_deployment_spec_replicas{{{ns}, deployment="{decode}"}}': f"1{SAMPLES}",
        f'kube_pod_container_status_restarts_total{{{ns}, pod="{prefill}-5d8f7c9b4-x2k9p", '
        f'container="{prefill}"}}': flat,
        f'DCGM_FI_DEV_XID_ERRORS{{{ns}, pod="{decode}-6c9d8b7f5-q8w4z", gpu="0", Hostname="hyperpod-i-0abc"}}':
            f"0{SAMPLES}",
    }


def _key(series: dict[str, str], start: str) -> str:
    (key,) = [k for k in series if k.startswith(start)]
    return key


Firing = dict[str, list[dict[str, str]]]


def _cases(spec: DpdSpec) -> dict[str, tuple[dict[str, str | None], Firing]]:
    """Case -> (series to replace or drop (None), alerts expected to fire, each with its series labels)."""
    s = EndpointSelectors.of(spec)
    ns = {"namespace": spec.namespace}
    prefill = {"resource_name": f"prefill-{spec.name}"}
    decode = {"resource_name": f"decode-{spec.name}", **ns}
    base = _series(spec)
    put = f"lmcache:store_put_time_bucket{{{s.prefill}"
    tokens = f"vllm:prompt_tokens_by_source_total{{{s.decode}"
    external = _key(base, f'{tokens}, source="external_kv_transfer"')
    decode_series = {k: None for k in base if s.decode in k}
    xid = _key(base, "DCGM_FI_DEV_XID_ERRORS")
    return {
        "kv transfer slow": ({_key(base, f'{put}, le="0.01"'): f"0+0{SAMPLES}",
                              _key(base, f'{put}, le="0.1"'): f"0+0{SAMPLES}"}, {"DpdKvTransferSlow": [{}]}),
        "lmcache metrics not exported": ({k: None for k in base if k.startswith("lmcache:")},
                                         {"DpdKvStoreMetricsAbsent": [{}]}),
        "kv not transferred": ({external: f"0+0{SAMPLES}", _key(base, f'{tokens}, source="local_compute"'):
                                f"0+6000{SAMPLES}"}, {"DpdKvNotTransferred": [{}]}),
        # Audit O4: repeated identical long prompts come from the decoder's own prefix cache.
        "repeated identical prompts": ({external: f"0+0{SAMPLES}",
                                        _key(base, f'{tokens}, source="local_cache_hit"'): f"0+6000{SAMPLES}"},
                                       {}),
        "kv transfer counter absent": ({external: None},
                                       {"DpdKvNotTransferred": [{}],
                                        "DpdDecodeMetricsAbsent": [{**decode, "source": "external_kv_transfer"}]}),
        # Audit O4 (test B): a broken decoder scrape is an absent-input warning, not a critical KV failure.
        "decoder metrics missing": (decode_series, {"DpdDecodeMetricsAbsent": [
            decode, {**decode, "source": "external_kv_transfer"}]}),
        "router fallback": ({_key(base, "dpd_routing_fallback_total"): f"0+1{SAMPLES}"}, {"DpdRouterFallback": [{}]}),
        "10% errors on prefill": ({_key(base, f"model_errors_total{{{s.prefill}"): f"0+6{SAMPLES}"},
                                  {"DpdErrorRatioHigh": [prefill]}),
        "50% errors on prefill": ({_key(base, f"model_errors_total{{{s.prefill}"): f"0+30{SAMPLES}"},
                                  {"DpdErrorRatioHigh": [prefill], "DpdErrorRatioCritical": [prefill]}),
        "all requests fail below the traffic floor": (
            {_key(base, f"model_invocations_total{{{s.prefill}"): f"0+3{SAMPLES}",
             _key(base, f"model_errors_total{{{s.prefill}"): f"0+3{SAMPLES}"}, {}),
        "prefill queue": ({_key(base, "vllm:num_requests_waiting"): f"20{SAMPLES}"}, {"DpdPrefillQueueDeep": [{}]}),
        # Audit O7: in flight at the router counts running prefills; only more than pods x max_num_seqs queue.
        "router prefill in flight beyond capacity": ({_key(base, "dpd_routing_inflight_prefill"): f"30{SAMPLES}"},
                                                     {"DpdPrefillSaturated": [{}]}),
        "decode kv cache full": ({_key(base, "vllm:kv_cache_usage_perc"): f"0.97{SAMPLES}"},
                                 {"DpdDecodeKvCacheFull": [{}]}),
        "decode preempts": ({_key(base, "vllm:num_preemptions_total"): f"0+2{SAMPLES}"},
                            {"DpdDecodePreempting": [{}]}),
        "ttft over slo": ({_key(base, 'dpd_e2e_ttft_seconds_bucket{resource_name="' + router_deployment(spec)
                                + '", le="1"'): f"0+0{SAMPLES}"}, {"DpdTtftSloBreach": [{}]}),
        "tpot over slo": ({_key(base, f'vllm:inter_token_latency_seconds_bucket{{{s.decode}, le="0.025"'):
                           f"0+0{SAMPLES}"}, {"DpdTpotSloBreach": [{}]}),
        "prefill metrics absent": ({_key(base, f"vllm:num_requests_running{{{s.prefill}"): None},
                                   {"DpdPrefillMetricsAbsent": [{**prefill, **ns}]}),
        "decode metrics absent": ({_key(base, f"vllm:num_requests_running{{{s.decode}"): None},
                                  {"DpdDecodeMetricsAbsent": [decode]}),
        "no ready decode pod": ({_key(base, f'kube_deployment_status_replicas_available{{namespace="{spec.namespace}", '
                                            f'deployment="decode-'): f"0{SAMPLES}"},
                                {"DpdNoReadyPod": [{**ns, "deployment": f"decode-{spec.name}"}]}),
        "prefill scaled to zero on purpose": (
            {_key(base, f'kube_deployment_status_replicas_available{{namespace="{spec.namespace}", '
                        f'deployment="prefill-'): f"0{SAMPLES}",
             _key(base, f'kube_deployment_spec_replicas{{namespace="{spec.namespace}", deployment="prefill-'):
                 f"0{SAMPLES}"}, {}),
        "decode deployment gone": ({k: None for k in base if f'deployment="decode-{spec.name}"' in k},
                                   {"DpdNoReadyPod": [{**ns, "deployment": f"decode-{spec.name}"}]}),
        "prefill restarted": ({_key(base, "kube_pod_container_status_restarts_total"): "0x20 1x20"},
                              {"DpdPrefillRestarted": [{}]}),
        "gpu xid": ({xid: f"79{SAMPLES}"}, {"DpdGpuXidError": [
            {**ns, "pod": f"decode-{spec.name}-6c9d8b7f5-q8w4z", "gpu": "0"}]}),
    }


def _test_group(spec: DpdSpec, name: str, changes: dict[str, str | None], firing: Firing, *,
                interval: str = "1m", extra: dict[str, str] | None = None) -> dict[str, Any]:
    rules = {r["alert"]: r for r in rules_document(spec)["groups"][0]["rules"]}
    series = {**_series(spec), **changes, **(extra or {})}
    checks = []
    for alert, rule in rules.items():
        expected = [{"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": rule["annotations"]}
                    for labels in firing.get(alert, [])]
        checks.append({"eval_time": EVAL_TIME, "alertname": alert, "exp_alerts": expected})
    return {"name": name, "interval": interval,
            "input_series": [{"series": k, "values": v} for k, v in series.items() if v is not None],
            "alert_rule_test": checks}


def _promtool(tmp_path: Path, spec: DpdSpec, groups: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "rules.yaml").write_text(rules_yaml(spec))
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
                                         "tests": groups}, sort_keys=False, width=10_000))
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, "test", "rules", str(test_file)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, check=False)


def test_promtool_accepts_the_rule_file(tmp_path: Path, slo_spec: DpdSpec) -> None:
    (tmp_path / "rules.yaml").write_text(rules_yaml(slo_spec))
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, "check", "rules", "rules.yaml"], capture_output=True, text=True,
                            cwd=tmp_path, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(alert_rules(slo_spec))} rules found" in result.stdout


def test_a_healthy_endpoint_raises_no_alert(tmp_path: Path, slo_spec: DpdSpec) -> None:
    result = _promtool(tmp_path, slo_spec, [_test_group(slo_spec, "healthy", {}, {})])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("case", list(_cases(default_spec())))
def test_each_failure_fires_exactly_its_alerts(tmp_path: Path, slo_spec: DpdSpec, case: str) -> None:
    changes, firing = _cases(slo_spec)[case]
    result = _promtool(tmp_path, slo_spec, [_test_group(slo_spec, case, changes, firing)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_another_endpoints_router_does_not_alert_this_one(tmp_path: Path, spec: DpdSpec) -> None:
    """Audit O5 (test C): endpoint ``dpd`` stays quiet while ``dpd-test`` in the same namespace falls back."""
    short = dataclasses.replace(spec, name="dpd")
    longer = dataclasses.replace(spec, name="dpd-test")
    neighbour = {f'dpd_routing_fallback_total{{resource_name="{router_deployment(longer)}"}}': "0 0 0 1+1x37",
                 f'dpd_routing_disaggregated_total{{resource_name="{router_deployment(longer)}"}}': f"0+60{SAMPLES}"}
    result = _promtool(tmp_path, short, [_test_group(short, "neighbour falls back", {}, {}, extra=neighbour)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_slowest_accepted_scrape_still_fires(tmp_path: Path, spec: DpdSpec) -> None:
    """Audit O9: at the largest scrape interval validation accepts, every 5-minute rate() still has data."""
    changes = {_key(_series(spec), f"model_errors_total{{{EndpointSelectors.of(spec).prefill}"): f"0+60{SAMPLES}"}
    interval = f"{MAX_SCRAPE_INTERVAL_SECONDS}s"
    prefill = {"resource_name": f"prefill-{spec.name}"}
    group = _test_group(spec, "slow scrape", changes,
                        {"DpdErrorRatioHigh": [prefill], "DpdErrorRatioCritical": [prefill]}, interval=interval)
    result = _promtool(tmp_path, spec, [group])
    assert result.returncode == 0, result.stdout + result.stderr
    # The audit's D2: a 5-minute scrape leaves one sample per window, and the same total failure is silent.
    slow = _test_group(spec, "5-minute scrape", changes, {}, interval="5m")
    result = _promtool(tmp_path, spec, [slow])
    assert result.returncode == 0, "beyond the limit the rate() windows are empty: " + result.stdout + result.stderr


def test_tokens_below_the_first_bucket_meet_the_smallest_accepted_slo(tmp_path: Path, spec: DpdSpec) -> None:
    """Audit O8: every token at 4 ms with the smallest TPOT SLO validation accepts stays quiet."""
    slo = dataclasses.replace(spec, slo=SloSpec(tpot_ms=MIN_TPOT_MS))
    s = EndpointSelectors.of(slo)
    fast = {k: (f"0+600{SAMPLES}" if "inter_token_latency" in k else v) for k, v in _series(slo).items()}
    fast[f'vllm:inter_token_latency_seconds_bucket{{{s.decode}, le="0.01"}}'] = f"0+600{SAMPLES}"
    result = _promtool(tmp_path, slo, [_test_group(slo, "fast tokens", fast, {})])
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_failure_case(slo_spec: DpdSpec) -> None:
    covered = {alert for _, firing in _cases(slo_spec).values() for alert in firing}
    assert covered == {r.name for r in alert_rules(slo_spec)}


def test_promtool_notices_a_missing_alert(tmp_path: Path, slo_spec: DpdSpec) -> None:
    """The harness can fail: expecting an alert on healthy series makes promtool exit non-zero."""
    group = _test_group(slo_spec, "wrong expectation", {}, {"DpdRouterFallback": [{}]})
    result = _promtool(tmp_path, slo_spec, [group])
    assert result.returncode != 0
    assert "DpdRouterFallback" in result.stdout + result.stderr
