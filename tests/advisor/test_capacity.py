"""One replica's capacity at the SLO, by the advisor, checked against independent computations from its step times."""

from __future__ import annotations

import dataclasses
import math
import sys
from importlib import metadata

import pytest
from support import slo_autoscaled, with_slo_options

from hyperpod_dpd import DpdSpec, SpecError
from hyperpod_dpd.advisor import queueing
from hyperpod_dpd.advisor.capacity import _estimator, capacities, resolve, role_capacity
from hyperpod_dpd.advisor.comparison import kv_room
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.planner import plan
from hyperpod_dpd.scaling import DecodeBound, RoleCapacity, compile_all
from hyperpod_dpd.scaling.shape import pin_capacities, prompt_lengths, request_shape, role_shape
from hyperpod_dpd.validation import check


def _steps(spec: DpdSpec):  # type: ignore[no-untyped-def]
    return _estimator(spec, role_shape(spec, "decode"), None).steps(spec.tensor_parallel_size), PhaseFactors()


def test_the_decode_capacity_is_the_largest_batch_within_tpot_over_its_step(slo_spec: DpdSpec,
                                                                           advised: dict[str, RoleCapacity]) -> None:
    steps, factors = _steps(slo_spec)
    isl, osl = request_shape(slo_spec, slo_spec.decode.autoscaling.slo)  # type: ignore[union-attr, arg-type]
    limit = min(kv_room(plan(slo_spec, prompt_tokens=isl).decode.kv_cache_tokens, isl + osl),
                DEFAULT_MAX_NUM_SEQS["decode"])
    # Dynamo's law by a plain scan (the code bisects): every batch up to the limit, the largest within 50 ms.
    best = max(b for b in range(1, limit + 1) if factors.decode * steps.decode_step_s(b) <= 0.050)
    expected = best / (factors.decode * steps.decode_step_s(best))
    assert advised["decode"].tokens_per_s == pytest.approx(expected, rel=1e-12)
    assert f"batch {best} of {limit}" in advised["decode"].source


def test_the_decode_capacity_names_what_holds_its_batch(advised: dict[str, RoleCapacity]) -> None:
    # The default layout: batch 32 of 32 at ~14 ms per step, far within TPOT 50 ms: max_num_seqs holds it.
    assert advised["decode"].bound is DecodeBound.MAX_NUM_SEQS
    assert "held by max_num_seqs" in advised["decode"].source
    tight = role_capacity(slo_autoscaled(tpot_ms=12), "decode")  # one step at batch 32 takes about 13.7 ms
    assert tight.bound is DecodeBound.TPOT and "held by TPOT" in tight.source


LONGEST = 16384 - 256  # the longest prompt max_model_len leaves room for with the default output


def test_the_prefill_capacity_holds_p90_ttft_at_the_target_and_not_much_beyond(
        slo_spec: DpdSpec, advised: dict[str, RoleCapacity]) -> None:
    shape = role_shape(slo_spec, "prefill").at_prompt(LONGEST)
    steps, factors = _estimator(slo_spec, shape, None).steps(slo_spec.tensor_parallel_size), PhaseFactors()
    assert f"of {LONGEST} tokens" in advised["prefill"].source
    service = factors.prefill * steps.prefill_s(LONGEST)
    rate = advised["prefill"].tokens_per_s / LONGEST
    assert rate < 1 / service  # below what one lane prefills back to back (M/D/1 stability)
    transfer = plan(slo_spec, prompt_tokens=LONGEST).request.transfer_seconds_at_line_rate
    room = kv_room(plan(slo_spec, prompt_tokens=LONGEST).decode.kv_cache_tokens, LONGEST + 256)
    first = factors.decode * steps.decode_step_s(min(room, DEFAULT_MAX_NUM_SEQS["decode"]))
    stations = queueing.Stations(prefill_lanes=1, decoders=1, slots=1 << 30, prefill_s=lambda _: service,
                                 tpot_s=lambda _: first, handoff_s=transfer)

    def p90(at: float) -> float:
        return queueing.open_loop(stations, osl=2, rate=at, capacity_per_s=1 / service).ttft_p90_s

    assert p90(rate) <= 2.0
    # 5% more load is past the knee: the seeded simulation's p90 is not strictly monotone in the rate, but
    # its reversals are far smaller than what 5% more load adds this close to the lane's capacity.
    assert p90(min(rate * 1.05, 0.999 / service)) > 2.0


def test_the_prefill_capacity_is_the_lowest_over_the_prompts_a_prefiller_gets(
        slo_spec: DpdSpec, advised: dict[str, RoleCapacity]) -> None:
    # At the threshold (4,096 tokens) one prefiller serves ~19,000 tokens/s, at 16,128 ~11,600: a target
    # from the threshold alone would overstate what the longer prompts get by ~40%.
    assert prompt_lengths(slo_spec, slo_spec.prefill.autoscaling.slo) == (4096, LONGEST)  # type: ignore[union-attr, arg-type]
    at_threshold = role_capacity(with_slo_options(slo_spec, input_tokens=4096), "prefill")
    assert advised["prefill"].tokens_per_s < 0.7 * at_threshold.tokens_per_s
    assert "the lowest in tokens/s over prompts of 4096 and 16128 tokens" in advised["prefill"].source
    assert "over prompts" not in at_threshold.source  # a given length is the only one


def test_a_tiny_threshold_is_not_modelled_as_tiny_prompts_and_warns() -> None:
    spec = dataclasses.replace(slo_autoscaled(), routing=dataclasses.replace(slo_autoscaled().routing, threshold=0))
    assert prompt_lengths(spec, spec.prefill.autoscaling.slo) == (1024, LONGEST)  # type: ignore[union-attr, arg-type]
    warning = next(w for w in check(spec).warnings if w.code == "SloShortPrompts")
    assert warning.field == "routing.threshold" and "input_tokens" in warning.message
    given = with_slo_options(spec, input_tokens=512)
    assert prompt_lengths(given, given.prefill.autoscaling.slo) == (512,)  # type: ignore[union-attr, arg-type]
    assert "SloShortPrompts" not in [w.code for w in check(given).warnings]


def test_a_tighter_tpot_lowers_the_decode_target(advised: dict[str, RoleCapacity]) -> None:
    tight = role_capacity(slo_autoscaled(tpot_ms=12), "decode")  # one step at batch 32 takes about 13.7 ms
    assert tight.tokens_per_s < advised["decode"].tokens_per_s
    spec = pin_capacities(slo_autoscaled(tpot_ms=12), {"decode": tight.tokens_per_s, "prefill": 1000.0})
    assert compile_all(spec)["decode"].triggers[0].target < math.floor(advised["decode"].tokens_per_s * 0.9)


def test_calibrated_factors_are_used(slo_spec: DpdSpec, advised: dict[str, RoleCapacity]) -> None:
    slower = PhaseFactors(decode=2 * PhaseFactors().decode, source="a bench run (test)")
    found = role_capacity(slo_spec, "decode", factors=slower)
    assert found.tokens_per_s < advised["decode"].tokens_per_s
    assert "a bench run (test)" in found.source


def test_the_source_names_the_advisor_and_its_versions(advised: dict[str, RoleCapacity]) -> None:
    for capacity in advised.values():
        assert f"aiconfigurator {metadata.version('aiconfigurator')}" in capacity.source
        assert "h100_sxm" in capacity.source and "TP8" in capacity.source


def test_the_same_spec_gives_the_same_capacity(slo_spec: DpdSpec, advised: dict[str, RoleCapacity]) -> None:
    assert role_capacity(slo_spec, "prefill") == advised["prefill"]


@pytest.mark.parametrize(("slo", "field"), [({"tpot_ms": 5}, "slo.tpot_ms"), ({"ttft_ms": 100}, "slo.ttft_ms")])
def test_a_target_no_replica_meets_is_a_spec_error(slo: dict[str, int], field: str) -> None:
    spec = slo_autoscaled(**slo)
    with pytest.raises(SpecError) as caught:
        capacities(spec)
    assert field in [p.field for p in caught.value.problems]
    assert "Fix:" in str(caught.value)
    # Lowering routing.threshold moves no long prompt off the prefiller: it is never the fix.
    assert "routing.threshold" not in str(caught.value)


def test_resolve_pins_every_capacity_so_the_charts_need_no_advisor(slo_spec: DpdSpec, resolved: DpdSpec,
                                                                   advised: dict[str, RoleCapacity]) -> None:
    for role, spec in resolved.roles():
        assert spec.autoscaling is not None and spec.autoscaling.slo is not None
        assert spec.autoscaling.slo.capacity_tokens_per_s == round(advised[role].tokens_per_s, 1)
    assert resolve(resolved) is resolved  # nothing left to compute
    assert slo_spec.prefill.autoscaling.slo.capacity_tokens_per_s is None  # type: ignore[union-attr]


def test_without_the_advisor_extra_an_unpinned_capacity_is_a_spec_error(slo_spec: DpdSpec,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    with pytest.raises(SpecError) as caught:
        resolve(slo_spec)
    problem = caught.value.problems[0]
    assert problem.field == "prefill.autoscaling.slo.capacity_tokens_per_s"
    assert "needs the advisor extra to compute" in problem.message
    assert "pip install '.[advisor]' in the hyperpod-dpd checkout" in problem.fix and "pin it" in problem.fix


def test_a_pinned_capacity_needs_no_advisor(resolved: DpdSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.charts import render_inference_endpoint_config

    monkeypatch.setitem(sys.modules, "aiconfigurator_core.sdk.perf_database", None)
    monkeypatch.setitem(sys.modules, "aiconfigurator.cli.api", None)
    assert resolve(resolved) is resolved
    rendered = render_inference_endpoint_config(resolved, region="us-west-2")
    assert rendered["spec"]["pdSpec"]["autoScalingSpec"]["prefillAutoScaling"]["prometheusTriggerList"]


def test_half_the_utilisation_halves_the_target(resolved: DpdSpec) -> None:
    scaling = resolved.decode.autoscaling
    assert scaling is not None and scaling.slo is not None
    half = with_slo_options(resolved, "decode", utilisation=0.45)
    full, halved = compile_all(resolved)["decode"], compile_all(half)["decode"]
    assert halved.triggers[0].target == math.floor(scaling.slo.capacity_tokens_per_s * 0.45)  # type: ignore[operator]
    assert halved.triggers[0].target < full.triggers[0].target
