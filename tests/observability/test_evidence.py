"""The evidence model: one arithmetic, evaluated over numbers (verify, bench) and rendered as PromQL (alerts).

Each case is a decoder's counter growth as vLLM 0.19.0 counts it (``vllm:prompt_tokens_by_source`` by source);
the same window is evaluated in Python and, through promtool, as the PromQL the model renders, and both must
agree.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from hyperpod_dpd.observability import evidence as ev

PROMTOOL = shutil.which("promtool")

# 10 long prompts of 6,000 tokens (bench and smoke know the length; 10 x 6,000 = 60,000).
WINDOWS = {
    # healthy: all but a last partial block arrives
    "healthy": dict(long_prompts=10, long_prompt_tokens=60000, external_tokens=59900, cache_hit_tokens=0,
                    computed_tokens=100),
    # bench audit B7: --prefix-share 0.9 and every transfer failed; the decoder's own cache holds 90%
    "prefix hits mask a failed transfer": dict(long_prompts=10, long_prompt_tokens=60000, external_tokens=0,
                                               cache_hit_tokens=54000, computed_tokens=6000),
    # ... and its healthy twin: the 10% the cache lacks arrives
    "prefix hits, transfer works": dict(long_prompts=10, long_prompt_tokens=60000, external_tokens=5990,
                                        cache_hit_tokens=54000, computed_tokens=10),
    # observability audit O1: 1,024 of each 6,000 tokens arrive
    "partial transfer": dict(long_prompts=10, long_prompt_tokens=60000, external_tokens=10240, cache_hit_tokens=0,
                             computed_tokens=49760),
    # repeated identical prompts: the decoder's cache held them whole, nothing was needed
    "nothing needed": dict(long_prompts=10, long_prompt_tokens=60000, external_tokens=0, cache_hit_tokens=60000,
                           computed_tokens=10),
    # too few long prompts to judge
    "two prompts": dict(long_prompts=2, long_prompt_tokens=12000, external_tokens=0, cache_hit_tokens=0,
                        computed_tokens=12000),
}
SHORT = {"prefix hits mask a failed transfer", "partial transfer"}


def _numbers(name: str) -> ev.DecoderWindow[ev.Number]:
    return ev.DecoderWindow(chunk_tokens=256.0, **{k: float(v) for k, v in WINDOWS[name].items()})


@pytest.mark.parametrize("name", list(WINDOWS))
def test_kv_short_in_numbers(name: str) -> None:
    assert ev.judged(ev.kv_short(ev.NUMBERS, _numbers(name))) == (name in SHORT)


def test_the_decoders_own_cache_hits_are_never_received_kv() -> None:
    masked = _numbers("prefix hits mask a failed transfer")
    assert ev.arrived_share(ev.NUMBERS, masked) == 0.0
    assert ev.arrived_share(ev.NUMBERS, _numbers("prefix hits, transfer works")) == pytest.approx(0.9983, abs=1e-4)
    assert ev.arrived_share(ev.NUMBERS, _numbers("nothing needed")) is None


def test_a_missing_counter_judges_nothing() -> None:
    window = ev.DecoderWindow(long_prompts=10.0, long_prompt_tokens=60000.0, external_tokens=None,
                              cache_hit_tokens=0.0, computed_tokens=60000.0, chunk_tokens=256.0)
    assert ev.kv_short(ev.NUMBERS, window) is None


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is missing: apt-get install prometheus")
def test_the_promql_agrees_with_the_numbers(tmp_path: Path) -> None:
    """Every window as a gauge per pod: the rendered PromQL selects exactly the pods the numbers judge short."""
    fields = ("long_prompts", "long_prompt_tokens", "external_tokens", "cache_hit_tokens", "computed_tokens")
    window = ev.DecoderWindow(chunk_tokens="256", **{f: f"sum by (pod_name) ({f})" for f in fields})
    rule = {"alert": "Short", "expr": ev.kv_short(ev.PromQL(), window)}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [rule]}]}))
    series = [{"series": f'{f}{{pod_name="{name}"}}', "values": f"{values[f]}x5"}
              for name, values in WINDOWS.items() for f in fields]
    expected = [{"exp_labels": {"pod_name": name}} for name in sorted(SHORT)]
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       "alert_rule_test": [{"eval_time": "2m", "alertname": "Short", "exp_alerts": expected}]}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test, width=10_000))
    assert PROMTOOL is not None
    result = subprocess.run([PROMTOOL, "test", "rules", "test.yaml"], capture_output=True, text=True, cwd=tmp_path,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_stalled_and_not_disaggregating() -> None:
    assert ev.judged(ev.stalled(ev.NUMBERS, fewest_running=15.0, generated_tokens=0.0))
    assert not ev.judged(ev.stalled(ev.NUMBERS, fewest_running=0.0, generated_tokens=0.0))
    assert not ev.judged(ev.stalled(ev.NUMBERS, fewest_running=4.0, generated_tokens=60.0))
    assert ev.judged(ev.not_disaggregating(ev.NUMBERS, long_prompts=7.0, disaggregated=0.0))
    assert not ev.judged(ev.not_disaggregating(ev.NUMBERS, long_prompts=7.0, disaggregated=7.0))
    assert not ev.judged(ev.not_disaggregating(ev.NUMBERS, long_prompts=2.0, disaggregated=0.0))


def test_served_short_and_slow_siblings() -> None:
    assert ev.served_short(ev.NUMBERS, sent=44.0, served=29.0) == 15.0
    assert ev.served_short(ev.NUMBERS, sent=44.0, served=44.0) is None
    assert ev.slow_siblings({"d0": 0.010, "d1": 0.030}) == {"d1": pytest.approx(3.0)}
    assert ev.slow_siblings({"d0": 0.010, "d1": 0.012, "d2": 0.011}) == {}
    assert ev.slow_siblings({"d0": 0.010}) == {}
