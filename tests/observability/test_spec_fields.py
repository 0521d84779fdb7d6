"""The optional ``slo`` and ``alerts`` spec fields: loading, round trip and the rules that check them."""

from __future__ import annotations

import dataclasses

import pytest

from hyperpod_dpd import (
    AlertThresholds,
    DpdSpec,
    MetricsSpec,
    SloSpec,
    SpecError,
    check,
    dump_spec,
    parse_spec,
)


def test_defaults_leave_the_spec_file_unchanged(spec: DpdSpec) -> None:
    data = dump_spec(spec)
    assert "slo" not in data and "alerts" not in data


def test_fields_round_trip(slo_spec: DpdSpec) -> None:
    data = dump_spec(slo_spec)
    assert data["slo"] == {"ttft_ms": 2000, "tpot_ms": 50, "objective": 0.99}
    assert data["alerts"]["prefill_queue"] == 5
    assert parse_spec(data) == slo_spec


def test_a_wrong_type_names_the_field(spec: DpdSpec) -> None:
    data = {**dump_spec(spec), "slo": {"ttft_ms": "fast"}}
    with pytest.raises(SpecError, match=r"slo.ttft_ms: must be an integer, not a string"):
        parse_spec(data)


@pytest.mark.parametrize(("alerts", "field", "message"), [
    (AlertThresholds(kv_store_p90_seconds=0), "alerts.kv_store_p90_seconds", "must be greater than 0"),
    (AlertThresholds(error_ratio=0), "alerts.error_ratio", "must be in (0, 1]"),
    (AlertThresholds(error_ratio=0.3, error_ratio_critical=0.2), "alerts.error_ratio_critical",
     "is below alerts.error_ratio"),
    (AlertThresholds(prefill_queue=0), "alerts.prefill_queue", "must be at least 1"),
    (AlertThresholds(decode_kv_cache_usage=90), "alerts.decode_kv_cache_usage", "must be in (0, 1]"),
    (AlertThresholds(min_requests_per_second=-1), "alerts.min_requests_per_second", "must not be negative"),
    (AlertThresholds(runbook_base_url="docs/alerts.md"), "alerts.runbook_base_url", "must be an absolute http(s) URL"),
    (AlertThresholds(runbook_base_url="https://example.com/alerts.md#top"), "alerts.runbook_base_url",
     "without a '#' fragment"),
])
def test_bad_thresholds_are_refused(spec: DpdSpec, alerts: AlertThresholds, field: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        check(dataclasses.replace(spec, alerts=alerts))
    assert [p.field for p in raised.value.problems] == [field]
    assert message in raised.value.problems[0].message


def test_slo_targets_below_histogram_resolution_are_refused(spec: DpdSpec) -> None:
    with pytest.raises(SpecError) as raised:
        check(dataclasses.replace(spec, slo=SloSpec(ttft_ms=5, tpot_ms=0)))
    assert [p.field for p in raised.value.problems] == ["slo.ttft_ms", "slo.tpot_ms"]


def test_good_values_pass(slo_spec: DpdSpec) -> None:
    assert check(slo_spec).spec == slo_spec


def test_slo_with_metrics_off_warns(spec: DpdSpec) -> None:
    off = dataclasses.replace(spec, metrics=MetricsSpec(enabled=False), slo=SloSpec(ttft_ms=2000))
    codes = [w.code for w in check(off).warnings]
    assert "ALERTS_WITHOUT_METRICS" in codes


def test_the_kv_alert_allows_the_chunk_lmcache_is_given(spec: DpdSpec) -> None:
    """A transferred prompt leaves the decoder at most one partial chunk: kv_cache.chunk_tokens, which the chart
    renders as LMCACHE_CHUNK_SIZE, not LMCache's default."""
    from hyperpod_dpd.observability.alerts import alert_rules
    from hyperpod_dpd.spec import KvCacheSpec

    def kv_rule(chunk: int) -> str:
        sized = dataclasses.replace(spec, kv_cache=KvCacheSpec(chunk_tokens=chunk))
        (rule,) = [r for r in alert_rules(sized) if r.name == "DpdKvNotTransferred"]
        return rule.expr

    assert " * 1024))" in kv_rule(1024) and " * 256))" not in kv_rule(1024)
    assert " * 256))" in kv_rule(256)


@pytest.mark.parametrize(("objective", "message"), [
    (1.0, "must be between 0 and 1"), (0, "must be between 0 and 1"),
    # 14.4 x (1 - 0.93) = 1.008: the fastest page would need more than every request to fail.
    (0.93, "can never fire"),
])
def test_slo_objectives_without_a_burnable_budget_are_refused(spec: DpdSpec, objective: float, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        check(dataclasses.replace(spec, slo=SloSpec(ttft_ms=2000, objective=objective)))
    assert [p.field for p in raised.value.problems] == ["slo.objective"]
    assert message in raised.value.problems[0].message
    assert raised.value.problems[0].fix


def test_slo_objective_defaults_to_99_percent_and_0_95_is_accepted(spec: DpdSpec) -> None:
    assert SloSpec().objective == 0.99
    looser = dataclasses.replace(spec, slo=SloSpec(objective=0.95))
    assert check(looser).spec == looser


def test_a_tpot_target_between_buckets_warns_which_bucket_the_burn_rate_uses(spec: DpdSpec) -> None:
    from hyperpod_dpd.observability.slo import slis

    between = dataclasses.replace(spec, slo=SloSpec(tpot_ms=60))
    (warning,) = [w for w in check(between).warnings if w.code == "SLO_BETWEEN_BUCKETS"]
    assert "under the 50 ms bucket" in warning.message
    tpot = next(sli for sli in slis(between) if sli.key == "tpot")
    assert 'le=~"0\\\\.05"' in tpot.bad_ratio("1h")
    exact = dataclasses.replace(spec, slo=SloSpec(tpot_ms=50))
    assert not [w for w in check(exact).warnings if w.code == "SLO_BETWEEN_BUCKETS"]
