"""The compiled PromQL evaluated by Prometheus's own engine (``promtool test rules``) on recorded series.

What KEDA reads is the query's value, so the fallbacks and the units are checked on the value Prometheus
returns: with the series absent, with series but no traffic, and with steady traffic whose rate is known.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import slo_autoscaled

from hyperpod_dpd import DpdSpec
from hyperpod_dpd.scaling import CompiledScaling, Signal, compile_all
from hyperpod_dpd.scaling.shape import pin_capacities

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is missing: install Debian's 'prometheus' package (apt-get install prometheus)")

SCRAPE = "15s"  # the operator's default scrape interval, which the compiled [60s] ranges assume
EVAL_TIME = "5m"  # well past the first 60 s range
POINTS = "x40"  # 40 scrapes: 10 minutes of samples
PREFILL = 'resource_name="prefill-dpd-test", namespace="default"'
DECODE = 'resource_name="decode-dpd-test", namespace="default"'


@pytest.fixture(scope="module")
def compiled() -> dict[str, CompiledScaling]:
    spec: DpdSpec = pin_capacities(slo_autoscaled(decode_max=3), {"prefill": 19000.0, "decode": 2300.0})
    return compile_all(spec)


def _query(compiled: dict[str, CompiledScaling], role: str, signal: Signal) -> tuple[str, float]:
    trigger = next(t for t in compiled[role].triggers if t.signal is signal)
    return trigger.query, trigger.fallback


def _evaluate(tmp_path: Path, series: dict[str, str], checks: list[tuple[str, float]]) -> None:
    """Assert that each ``(expr, value)`` evaluates to one label-less sample of ``value`` over ``series``."""
    test = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": SCRAPE,
        "input_series": [{"series": k, "values": v} for k, v in series.items()],
        "promql_expr_test": [{"expr": expr, "eval_time": EVAL_TIME, "exp_samples": [{"labels": "{}", "value": value}]}
                             for expr, value in checks]}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, sort_keys=False, width=10_000))
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, "test", "rules", "test.yaml"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _histogram(name: str, labels: str, per_scrape: dict[str, int]) -> dict[str, str]:
    return {f'{name}_bucket{{{labels}, le="{le}"}}': f"0+{n}{POINTS}" for le, n in per_scrape.items()}


def test_absent_series_read_as_each_fallback(tmp_path: Path, compiled: dict[str, CompiledScaling]) -> None:
    checks = [_query(compiled, role, signal) for role in ("prefill", "decode") for signal in Signal]
    # The demand fallbacks are per-replica target x planned replicas (one each here), the floors' 0.
    assert [value for _, value in checks] == [17100.0, 0.0, 0.0, 2070.0, 0.0, 0.0]
    _evaluate(tmp_path, {"up{job=\"unrelated\"}": f"1+0{POINTS}"}, checks)


def test_prefill_demand_is_the_computed_prompt_token_rate(tmp_path: Path, compiled: dict[str, CompiledScaling]
                                                           ) -> None:
    demand, _ = _query(compiled, "prefill", Signal.DEMAND)
    metric = "vllm:prompt_tokens_by_source_total"
    series = {
        # 1,500 computed tokens per 15 s scrape: 100 tokens/s, the value the demand must read.
        f'{metric}{{{PREFILL}, source="local_compute"}}': f"0+1500{POINTS}",
        # Cached tokens are not computed: neither a local hit nor a connector's transfer counts.
        f'{metric}{{{PREFILL}, source="local_cache_hit"}}': f"0+9000{POINTS}",
        f'{metric}{{{PREFILL}, source="external_kv_transfer"}}': f"0+9000{POINTS}",
        # The decoder computes short prompts itself; they are not the prefillers' demand.
        f'{metric}{{{DECODE}, source="local_compute"}}': f"0+7000{POINTS}",
    }
    _evaluate(tmp_path, series, [(demand, 100.0)])


def test_no_traffic_reads_zero_demand_and_no_slo_opinion(tmp_path: Path, compiled: dict[str, CompiledScaling]
                                                         ) -> None:
    series = {f'vllm:prompt_tokens_by_source_total{{{PREFILL}, source="local_compute"}}': f"5000+0{POINTS}",
              f"vllm:generation_tokens_total{{{DECODE}}}": f"5000+0{POINTS}",
              f"vllm:num_requests_waiting{{{PREFILL}}}": f"0+0{POINTS}",
              **_histogram("vllm:time_to_first_token_seconds", PREFILL, {"1": 0, "2.5": 0, "+Inf": 0})}
    # Series present and flat: demand 0 (the HPA keeps min_replicas); the quantile of no observations is NaN,
    # which "> 0" drops, so the SLO ratio reads its fallback 0 instead of a NaN KEDA would read as 0 anyway.
    _evaluate(tmp_path, series, [(_query(compiled, "prefill", Signal.DEMAND)[0], 0.0),
                                 (_query(compiled, "decode", Signal.DEMAND)[0], 0.0),
                                 (_query(compiled, "prefill", Signal.QUEUE)[0], 0.0),
                                 (_query(compiled, "prefill", Signal.SLO_RATIO)[0], 0.0)])


def test_steady_traffic_reads_its_rates_queue_and_slo_ratio(tmp_path: Path, compiled: dict[str, CompiledScaling]
                                                            ) -> None:
    series: dict[str, Any] = {
        f"vllm:generation_tokens_total{{{DECODE}}}": f"0+30000{POINTS}",  # 2,000 tokens/s
        # Two prefillers with 3 and 4 requests waiting: the queue is their total.
        f'vllm:num_requests_waiting{{{PREFILL}, pod_name="prefill-a"}}': f"3+0{POINTS}",
        f'vllm:num_requests_waiting{{{PREFILL}, pod_name="prefill-b"}}': f"4+0{POINTS}",
        # Every TTFT between 1 s and 2.5 s: Prometheus interpolates p90 at 1 + 0.9 x 1.5 = 2.35 s.
        **_histogram("vllm:time_to_first_token_seconds", PREFILL, {"1": 0, "2.5": 10, "+Inf": 10}),
        # Every inter-token latency between 40 and 60 ms: p90 at 0.04 + 0.9 x 0.02 = 0.058 s.
        **_histogram("vllm:inter_token_latency_seconds", DECODE, {"0.04": 0, "0.06": 10, "+Inf": 10}),
    }
    _evaluate(tmp_path, series, [(_query(compiled, "decode", Signal.DEMAND)[0], 2000.0),
                                 (_query(compiled, "prefill", Signal.QUEUE)[0], 7.0),
                                 # over the prefiller's share of the 2 s target: less the 16k prompt's KV
                                 # transfer at line rate (13 ms) and one decode step at TPOT 50 ms
                                 (_query(compiled, "prefill", Signal.SLO_RATIO)[0], 2.35 / 1.937),
                                 (_query(compiled, "decode", Signal.SLO_RATIO)[0], 0.058 / 0.05)])
