"""The HPA and KEDA rules against examples worked by hand from their code (cited in hpa.py and keda.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_dpd.advisor.emulator import keda
from hyperpod_dpd.advisor.emulator.hpa import (
    Behaviour,
    Hpa,
    MetricSample,
    PolicyKind,
    ScalingPolicy,
    ScalingRules,
    TargetType,
    replicas_for_metric,
)
from hyperpod_dpd.spec.autoscaling import MetricType


def per_pod(total: float, target: float) -> MetricSample:
    return MetricSample(value=total, target=target, target_type=TargetType.AVERAGE_VALUE)


def run(hpa: Hpa, wanted: list[float], *, target: float = 1.0, start: int, period: float = 15.0) -> list[int]:
    """Sync every ``period`` with an AverageValue metric of ``wanted[i] x target`` (so it asks for ceil(wanted[i])
    pods), the scale target following every decision at once; the counts written."""
    current, written = start, []
    for i, value in enumerate(wanted):
        current = hpa.sync(now=i * period, samples=[per_pod(value * target, target)], spec_replicas=current,
                           status_replicas=current, ready_replicas=current)
        written.append(current)
    return written


def no_windows(**rules: ScalingRules) -> Behaviour:
    up = rules.get("up", ScalingRules(stabilisation_s=0, policies=Behaviour().scale_up.policies))
    down = rules.get("down", ScalingRules(stabilisation_s=0, policies=Behaviour().scale_down.policies))
    return Behaviour(scale_up=up, scale_down=down)


def test_average_value_keeps_the_count_inside_the_tolerance_band_and_divides_the_total_outside_it() -> None:
    # 10 pods at 10 per pod: 105 is a ratio of 1.05 (inside 0.9-1.1), 115 is ceil(11.5) = 12, 89 is ceil(8.9) = 9
    counts = {total: replicas_for_metric(per_pod(total, 10), spec_replicas=10, status_replicas=10, ready_replicas=10)
              for total in (105, 115, 89, 90, 110)}
    assert counts == {105: 10, 115: 12, 89: 9, 90: 10, 110: 10}  # the band's edges are inside (<=)


def test_value_targets_scale_the_ready_pods_not_the_asked_for_ones() -> None:
    sample = MetricSample(value=1.5, target=1.0, target_type=TargetType.VALUE)
    # 4 pods asked for, 2 ready (2 still loading): ceil(1.5 x 2) = 3, which is a scale-down from 4
    assert replicas_for_metric(sample, spec_replicas=4, status_replicas=4, ready_replicas=2) == 3
    inside = MetricSample(value=1.05, target=1.0, target_type=TargetType.VALUE)
    assert replicas_for_metric(inside, spec_replicas=4, status_replicas=4, ready_replicas=2) == 4
    assert replicas_for_metric(sample, spec_replicas=0, status_replicas=0, ready_replicas=0) == 2  # ceil(1.5) from 0


def test_the_largest_count_over_the_triggers_wins() -> None:
    hpa = Hpa(min_replicas=1, max_replicas=10, behaviour=no_windows())
    samples = [per_pod(30, 10), per_pod(50, 10), MetricSample(value=0.5, target=1.0, target_type=TargetType.VALUE)]
    assert hpa.sync(now=0, samples=samples, spec_replicas=2, status_replicas=2, ready_replicas=2) == 5


def test_scale_up_waits_for_the_minimum_over_the_up_window() -> None:
    up = ScalingRules(stabilisation_s=60, policies=Behaviour().scale_up.policies)
    hpa = Hpa(min_replicas=1, max_replicas=10, behaviour=no_windows(up=up))
    # the initial recommendation (1, at t=0) stays inside the window until t=60, when only 4s are left
    assert run(hpa, [4] * 6, start=1) == [1, 1, 1, 1, 4, 4]


def test_scale_down_waits_for_the_maximum_over_the_down_window() -> None:
    down = ScalingRules(stabilisation_s=300, policies=Behaviour().scale_down.policies)
    hpa = Hpa(min_replicas=1, max_replicas=10, behaviour=no_windows(down=down))
    # asks for 1 at t=0, 3 at t=15, then 1: the 4 pods hold while the initial 4 (t=0) is in the window (a
    # recommendation counts while strictly younger than 300 s), then 3 at t=300 while the t=15 one is, then 1
    written = run(hpa, [1, 3] + [1] * 20, start=4)
    assert written[:20] == [4] * 20 and written[20:] == [3, 1]


def test_default_scale_up_adds_the_larger_of_four_pods_and_100_percent_per_15_s() -> None:
    hpa = Hpa(min_replicas=1, max_replicas=20)
    assert run(hpa, [20] * 4, start=2) == [6, 12, 20, 20]  # 2+4 > 2x2; 6x2 > 6+4; then the target


def test_a_policy_counts_the_changes_made_within_its_period() -> None:
    one_a_minute = ScalingRules(stabilisation_s=0,
                                policies=(ScalingPolicy(kind=PolicyKind.PODS, value=1, period_s=60),))
    hpa = Hpa(min_replicas=1, max_replicas=10, behaviour=no_windows(up=one_a_minute))
    assert run(hpa, [8] * 6, start=2) == [3, 3, 3, 3, 4, 4]
    half = ScalingRules(stabilisation_s=0, policies=(ScalingPolicy(kind=PolicyKind.PERCENT, value=50, period_s=60),))
    hpa = Hpa(min_replicas=1, max_replicas=10, behaviour=no_windows(down=half))
    assert run(hpa, [1] * 6, start=8) == [4, 4, 4, 4, 2, 2]  # int(8 x 0.5), then int(4 x 0.5) a period later


def test_scale_events_older_than_the_longest_policy_period_are_forgotten() -> None:
    hpa = Hpa(min_replicas=1, max_replicas=10, behaviour=no_windows())
    run(hpa, [1, 2, 3, 4, 5, 4, 3, 2, 1] * 20, start=1)  # 180 syncs, each a change of one pod
    # the default policies' periods are 15 s: only the last sync's event can still limit a change
    assert len(hpa.scale_up_events) + len(hpa.scale_down_events) <= 1


def test_bounds_clamp_and_a_count_outside_them_is_corrected_without_metrics() -> None:
    hpa = Hpa(min_replicas=2, max_replicas=5, behaviour=no_windows())
    assert hpa.sync(now=0, samples=[per_pod(500, 10)], spec_replicas=4, status_replicas=4, ready_replicas=4) == 5
    assert hpa.sync(now=15, samples=[], spec_replicas=9, status_replicas=9, ready_replicas=9) == 5
    assert hpa.sync(now=30, samples=[per_pod(0, 10)], spec_replicas=1, status_replicas=1, ready_replicas=1) == 2


def test_keda_reads_an_absent_or_not_finite_result_as_zero() -> None:
    assert [keda.read_value(v) for v in (None, math.nan, math.inf, -math.inf, 2.5)] == [0.0, 0.0, 0.0, 0.0, 2.5]


def test_keda_metric_types_and_the_hpa_minimum() -> None:
    assert keda.target_type(MetricType.AVERAGE) is TargetType.AVERAGE_VALUE
    assert keda.target_type(MetricType.VALUE) is TargetType.VALUE
    assert (keda.hpa_min_replicas(0), keda.hpa_min_replicas(3)) == (1, 3)


def test_the_emulated_window_is_the_longest_range_in_the_query() -> None:
    assert keda.window_s("sum(rate(a[1m])) / sum(rate(b[5m]))") == 300
    assert keda.window_s("max(vllm:num_requests_waiting) or vector(0)") == keda.DEFAULT_WINDOW_S
    assert keda.window_s("avg_over_time(x[90s])") == 90
    # PromQL's durations: compound, sub-second, days, and a subquery's range (not its step)
    assert [keda.window_s(f"rate(x[{d}])") for d in ("1m30s", "500ms", "1d", "5m:30s", "1h30m", "2w")] == [
        90, 0.5, 86400, 300, 5400, 14 * 86400]
    assert keda.window_s("rate(x[0s])") == 0  # which the emulator refuses (test_emulator: bad inputs)


DURATIONS = st.lists(st.tuples(st.integers(min_value=0, max_value=999), st.sampled_from(["ms", "s", "m", "h", "d"])),
                     min_size=1, max_size=3, unique_by=lambda part: part[1])


@given(st.text())
def test_any_query_text_has_a_window(query: str) -> None:
    assert keda.window_s(query) >= 0


@given(parts=DURATIONS, padding=st.text(alphabet="abc(){} ", max_size=10))
def test_a_range_reads_as_its_duration_in_seconds(parts: list[tuple[int, str]], padding: str) -> None:
    order = ["d", "h", "m", "s", "ms"]  # PromQL writes a duration's units largest first
    ordered = sorted(parts, key=lambda part: order.index(part[1]))
    text = "".join(f"{amount}{unit}" for amount, unit in ordered)
    seconds = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    assert keda.window_s(f"{padding}rate(x[{text}]){padding}") == pytest.approx(
        sum(amount * seconds[unit] for amount, unit in ordered))
