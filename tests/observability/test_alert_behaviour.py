"""Each alert fires on synthetic series that reproduce its failure and stays silent on a healthy endpoint.

Runs Prometheus's own rule evaluator, ``promtool test rules``, over the rendered rule file: a healthy
baseline (traffic flowing, KV transferred over EFA-speed puts, no errors) plus one injected failure
per case, and checks that exactly the expected alerts fire, with their labels and annotations.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd import DpdSpec
from hyperpod_dpd.observability import alert_rules, rules_document, rules_yaml
from hyperpod_dpd.observability.selectors import EndpointSelectors

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: install Debian's 'prometheus' package (apt-get install prometheus)")

EVAL_TIME = "25m"  # 5m rate window + 10m 'for' + margin
SAMPLES = "x40"


def _series(spec: DpdSpec) -> dict[str, str]:
    """A healthy endpoint: 1 req/s disaggregated, KV puts under 10 ms, p90 TTFT 0.9 s, no errors."""
    s = EndpointSelectors.of(spec)
    router = f'resource_name="{spec.name}"'
    flat = f"0+0{SAMPLES}"
    return {
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="0.01"}}': f"0+10{SAMPLES}",
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="0.1"}}': f"0+10{SAMPLES}",
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="1"}}': f"0+10{SAMPLES}",
        f'lmcache:store_put_time_bucket{{{s.prefill}, le="+Inf"}}': f"0+10{SAMPLES}",
        f"dpd_routing_disaggregated_total{{{router}}}": f"0+60{SAMPLES}",
        f"dpd_routing_local_total{{{router}}}": f"0+30{SAMPLES}",
        f"dpd_routing_fallback_total{{{router}}}": flat,
        f"dpd_routing_inflight_prefill{{{router}}}": f"2{SAMPLES}",
        f'vllm:prompt_tokens_by_source_total{{{s.decode}, source="external_kv_transfer"}}': f"0+6000{SAMPLES}",
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
    }


def _key(series: dict[str, str], start: str) -> str:
    (key,) = [k for k in series if k.startswith(start)]
    return key


def _cases(spec: DpdSpec) -> dict[str, tuple[dict[str, str | None], dict[str, dict[str, str]]]]:
    """Case -> (series to replace or drop (None), alerts expected to fire with their series labels)."""
    s = EndpointSelectors.of(spec)
    prefill = {"resource_name": f"prefill-{spec.name}"}
    base = _series(spec)
    put = f"lmcache:store_put_time_bucket{{{s.prefill}"
    return {
        "kv transfer slow": ({_key(base, f'{put}, le="0.01"'): f"0+0{SAMPLES}",
                              _key(base, f'{put}, le="0.1"'): f"0+0{SAMPLES}"}, {"DpdKvTransferSlow": {}}),
        "kv not transferred": ({_key(base, "vllm:prompt_tokens_by_source_total"): f"0+0{SAMPLES}"},
                               {"DpdKvNotTransferred": {}}),
        "kv transfer counter absent": ({_key(base, "vllm:prompt_tokens_by_source_total"): None},
                                       {"DpdKvNotTransferred": {}}),
        "router fallback": ({_key(base, "dpd_routing_fallback_total"): f"0+1{SAMPLES}"}, {"DpdRouterFallback": {}}),
        "10% errors on prefill": ({_key(base, f"model_errors_total{{{s.prefill}"): f"0+6{SAMPLES}"},
                                  {"DpdErrorRatioHigh": prefill}),
        "50% errors on prefill": ({_key(base, f"model_errors_total{{{s.prefill}"): f"0+30{SAMPLES}"},
                                  {"DpdErrorRatioHigh": prefill, "DpdErrorRatioCritical": prefill}),
        "all requests fail below the traffic floor": (
            {_key(base, f"model_invocations_total{{{s.prefill}"): f"0+3{SAMPLES}",
             _key(base, f"model_errors_total{{{s.prefill}"): f"0+3{SAMPLES}"}, {}),
        "prefill queue": ({_key(base, "vllm:num_requests_waiting"): f"20{SAMPLES}"}, {"DpdPrefillQueueDeep": {}}),
        "router prefill in flight": ({_key(base, "dpd_routing_inflight_prefill"): f"30{SAMPLES}"},
                                     {"DpdPrefillQueueDeep": {}}),
        "decode kv cache full": ({_key(base, "vllm:kv_cache_usage_perc"): f"0.97{SAMPLES}"},
                                 {"DpdDecodeKvCacheFull": {}}),
        "decode preempts": ({_key(base, "vllm:num_preemptions_total"): f"0+2{SAMPLES}"},
                            {"DpdDecodePreempting": {}}),
        "ttft over slo": ({_key(base, 'dpd_e2e_ttft_seconds_bucket{resource_name="' + spec.name + '", le="1"'):
                           f"0+0{SAMPLES}"}, {"DpdTtftSloBreach": {}}),
        "tpot over slo": ({_key(base, f'vllm:inter_token_latency_seconds_bucket{{{s.decode}, le="0.025"'):
                           f"0+0{SAMPLES}"}, {"DpdTpotSloBreach": {}}),
        "prefill metrics absent": ({_key(base, f"vllm:num_requests_running{{{s.prefill}"): None},
                                   {"DpdPrefillMetricsAbsent": {**prefill, "namespace": spec.namespace}}),
        "decode metrics absent": ({_key(base, f"vllm:num_requests_running{{{s.decode}"): None},
                                  {"DpdDecodeMetricsAbsent": {"resource_name": f"decode-{spec.name}",
                                                              "namespace": spec.namespace}}),
    }


def _test_group(spec: DpdSpec, name: str, changes: dict[str, str | None],
                firing: dict[str, dict[str, str]]) -> dict[str, Any]:
    rules = {r["alert"]: r for r in rules_document(spec)["groups"][0]["rules"]}
    series = {**_series(spec), **changes}
    checks = []
    for alert, rule in rules.items():
        expected = []
        if alert in firing:
            expected = [{"exp_labels": {**firing[alert], **rule["labels"]}, "exp_annotations": rule["annotations"]}]
        checks.append({"eval_time": EVAL_TIME, "alertname": alert, "exp_alerts": expected})
    return {"name": name, "interval": "1m",
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


@pytest.mark.parametrize("case", ["kv transfer slow", "kv not transferred", "kv transfer counter absent",
                                  "router fallback", "10% errors on prefill", "50% errors on prefill",
                                  "all requests fail below the traffic floor", "prefill queue",
                                  "router prefill in flight", "decode kv cache full", "decode preempts",
                                  "ttft over slo", "tpot over slo", "prefill metrics absent",
                                  "decode metrics absent"])
def test_each_failure_fires_exactly_its_alerts(tmp_path: Path, slo_spec: DpdSpec, case: str) -> None:
    changes, firing = _cases(slo_spec)[case]
    result = _promtool(tmp_path, slo_spec, [_test_group(slo_spec, case, changes, firing)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_failure_case(slo_spec: DpdSpec) -> None:
    covered = {alert for _, firing in _cases(slo_spec).values() for alert in firing}
    assert covered == {r.name for r in alert_rules(slo_spec)}


def test_promtool_notices_a_missing_alert(tmp_path: Path, slo_spec: DpdSpec) -> None:
    """The harness can fail: expecting an alert on healthy series makes promtool exit non-zero."""
    group = _test_group(slo_spec, "wrong expectation", {}, {"DpdRouterFallback": {}})
    result = _promtool(tmp_path, slo_spec, [group])
    assert result.returncode != 0
    assert "DpdRouterFallback" in result.stdout + result.stderr
