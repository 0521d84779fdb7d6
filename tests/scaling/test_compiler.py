"""The compiler: one series per query, contracted series only, a fallback that holds the plan, CRD-valid output."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from support import SLO_WORKSPACE, slo_autoscaled, with_slo_options

from hyperpod_dpd import DpdSpec, SpecError
from hyperpod_dpd.charts import render_inference_endpoint_config
from hyperpod_dpd.charts.render import synth_documents
from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.observability.metrics import ALL_METRICS, derived_families, series_names
from hyperpod_dpd.scaling import (
    CompiledScaling,
    DecodeBound,
    RoleCapacity,
    Signal,
    compile_all,
    compile_role,
    startup,
)
from hyperpod_dpd.scaling.queries import number
from hyperpod_dpd.scaling.shape import pin_capacities
from hyperpod_dpd.spec import MetricType, SloScaling
from hyperpod_dpd.validation import check
from hyperpod_dpd.validation.autoscaling import prometheus_query_problem

Validate = Callable[[dict[str, Any]], list[str]]
PINNED = {"prefill": 19000.0, "decode": 2300.0}
# A series name before its label matchers: ``vllm:prompt_tokens_total{``.
SELECTED = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{")


@pytest.fixture(scope="module")
def pinned() -> DpdSpec:
    return pin_capacities(slo_autoscaled(decode_max=3), PINNED)


@pytest.fixture(scope="module")
def compiled(pinned: DpdSpec) -> dict[str, CompiledScaling]:
    return compile_all(pinned)


def _triggers(compiled: dict[str, CompiledScaling]) -> list[Any]:
    return [t for c in compiled.values() for t in c.triggers]


def test_every_role_compiles_a_demand_a_queue_and_an_slo_ratio_trigger(compiled: dict[str, CompiledScaling]) -> None:
    for role, scaling in compiled.items():
        assert [t.signal for t in scaling.triggers] == [Signal.DEMAND, Signal.QUEUE, Signal.SLO_RATIO]
        assert [t.metric_type for t in scaling.triggers] == [MetricType.AVERAGE, MetricType.AVERAGE, MetricType.VALUE]
        assert all(t.name.startswith(f"{role}-slo-") for t in scaling.triggers)


def test_every_compiled_query_passes_kedas_single_series_rule(compiled: dict[str, CompiledScaling]) -> None:
    for trigger in _triggers(compiled):
        assert prometheus_query_problem(trigger.query) is None, trigger.query


def test_the_single_series_rule_refuses_the_demand_query_grouped(compiled: dict[str, CompiledScaling]) -> None:
    query = compiled["decode"].triggers[0].query.replace("sum(rate(", "sum by (pod_name) (rate(", 1)
    assert prometheus_query_problem(query) is not None


def _contracted() -> set[str]:
    return {name for metric in ALL_METRICS for name in series_names(metric)}


def test_compiled_queries_read_only_contracted_series(compiled: dict[str, CompiledScaling]) -> None:
    derived = {series for family in derived_families().values() for series in family["series"]}
    read = {name for trigger in _triggers(compiled) for name in SELECTED.findall(trigger.query)}
    assert len(read) == 5 and read <= _contracted()  # computed prompts, generated, waiting, TTFT and ITL buckets
    # vLLM's series must be in the contract derived from vLLM's own source, not only named in the package.
    assert all(name in derived for name in read if name.startswith("vllm:"))


def test_the_contract_check_catches_a_series_without_its_exported_suffix() -> None:
    # prometheus_client exports a counter with _total: the bare family name selects nothing.
    read = set(SELECTED.findall('sum(rate(vllm:prompt_tokens{namespace="default"}[60s]))'))
    assert read == {"vllm:prompt_tokens"} and not read <= _contracted()


def test_every_query_ends_in_its_fallback(compiled: dict[str, CompiledScaling]) -> None:
    for trigger in _triggers(compiled):
        assert trigger.query.endswith(f" or vector({number(trigger.fallback)})"), trigger.query


def test_the_demand_fallback_asks_for_exactly_the_planned_replicas(pinned: DpdSpec,
                                                                   compiled: dict[str, CompiledScaling]) -> None:
    for role, scaling in compiled.items():
        demand = scaling.triggers[0]
        planned = min(scaling.max_replicas, max(scaling.min_replicas, dict(pinned.roles())[role].replicas))
        # The HPA's AverageValue law: ceil(total / target).
        assert math.ceil(demand.fallback / demand.target) == planned >= 1
        assert demand.target == float(int(demand.target))  # whole tokens/s, so the division is exact


def test_demand_targets_are_the_capacity_at_the_utilisation(compiled: dict[str, CompiledScaling]) -> None:
    for role, scaling in compiled.items():
        assert scaling.triggers[0].target == math.floor(PINNED[role] * SloScaling().utilisation)
        assert scaling.capacity.tokens_per_s == PINNED[role]


def test_prefill_demand_is_vllms_count_of_computed_prompt_tokens_on_prefill_pods(
        compiled: dict[str, CompiledScaling]) -> None:
    query = compiled["prefill"].triggers[0].query
    # vLLM 0.19.0's prompt_len - cached tokens (local and connector hits), counted once per prefill: no
    # subtraction of prefix_cache_hits, which count local hits only and again on every rescheduling.
    assert query.startswith('(sum(rate(vllm:prompt_tokens_by_source_total{resource_name="prefill-dpd-test", '
                            'namespace="default", source="local_compute"}[60s]))) or vector(')
    assert "prefix_cache_hits" not in query and "prompt_tokens_total" not in query
    assert "decode-dpd-test" not in query


def test_decode_is_capped_at_the_deployments_the_operator_runs(pinned: DpdSpec,
                                                               compiled: dict[str, CompiledScaling]) -> None:
    decode = compiled["decode"]
    assert decode.max_replicas == DECODE_DEPLOYMENTS < pinned.decode.autoscaling.max_replicas  # type: ignore[union-attr]
    note = next(n for n in decode.notes if "capped at 1" in n)
    assert "one decode deployment per endpoint" in note and "tensor_parallel_size" in note and "up to 3" in note
    codes = [w.code for w in check(pinned).warnings]
    assert "SloDecodeCapped" in codes and "SingleDecoder" not in codes


def _cap_note(pinned: DpdSpec, bound: DecodeBound | None) -> str:
    capacity = RoleCapacity(tokens_per_s=PINNED["decode"], source="test", bound=bound)
    return next(n for n in compile_role(pinned, "decode", capacity=capacity).notes if "capped at 1" in n)


def test_a_decoder_held_by_max_num_seqs_queues_rather_than_missing_tpot(pinned: DpdSpec) -> None:
    note = _cap_note(pinned, DecodeBound.MAX_NUM_SEQS)
    # The default layout's decoder: batch 32 of 32 at ~14 ms per step against TPOT 50 ms.
    assert "above 2,300 output tokens/s requests queue" in note  # the capacity, not 0.9 of it (2,070)
    assert "decode.max_num_seqs 32" in note and "TPOT holds and TTFT grows" in note
    assert "raise decode.max_num_seqs above 32" in note
    assert "misses its TPOT" not in note and "2,070 output tokens/s" not in note


def test_a_decoder_held_by_tpot_misses_it_past_its_capacity(pinned: DpdSpec) -> None:
    note = _cap_note(pinned, DecodeBound.TPOT)
    assert "above 2,300 output tokens/s the one decoder misses its TPOT target" in note
    assert "raise decode.max_num_seqs" not in note
    kv = _cap_note(pinned, DecodeBound.KV_ROOM)
    assert "KV cache holds no more sequences" in kv and "FP8 KV cache" in kv


def test_stabilisation_follows_the_start_up() -> None:
    assert startup.scale_down_stabilisation(0) == startup.MIN_SCALE_DOWN_S
    assert startup.scale_down_stabilisation(601) == 1260  # 2 x 601 s, rounded up to 21 minutes
    assert startup.scale_down_stabilisation(5000) == startup.MAX_STABILISATION_S
    assert startup.initial_cooldown(600.2) == 601


def test_the_estimated_start_up_is_stated_as_an_estimate_at_awss_slow_end(compiled: dict[str, CompiledScaling]
                                                                          ) -> None:
    prefill = compiled["prefill"]
    # Llama 3.3 70B BF16 (~141 GB) at 0.25 GB/s plus 60 s: AWS's slow end (10 minutes), up to 10% over it
    # because the rate is rounded down from the 0.26 GB/s that 600 s would give.
    assert 600 <= prefill.start_up_s <= 660
    note = next(n for n in prefill.notes if n.startswith("start-up"))
    assert "an estimate" in note and "5-10 minutes from a cold S3 fetch" in note and "start_up_seconds" in note
    assert prefill.scale_down_stabilisation_s == startup.scale_down_stabilisation(prefill.start_up_s)
    assert prefill.scale_up_stabilisation_s == 0


def test_a_given_start_up_replaces_the_estimate(pinned: DpdSpec) -> None:
    spec = with_slo_options(pinned, start_up_seconds=90)
    compiled = compile_role(spec, "prefill")
    assert (compiled.start_up_s, compiled.scale_down_stabilisation_s, compiled.initial_cooldown_s) == (90, 300, 90)


def test_a_node_budget_caps_max_replicas_and_the_instance_group(pinned: DpdSpec) -> None:
    spec = with_slo_options(pinned, max_nodes=2)
    compiled = compile_role(spec, "prefill")
    assert (compiled.max_replicas, pinned.prefill.autoscaling.max_replicas) == (2, 4)  # type: ignore[union-attr]
    assert any("capped at 2 by max_nodes 2" in note for note in compiled.notes)
    assert (spec.role_nodes(spec.prefill), pinned.role_nodes(pinned.prefill)) == (2, 4)


def test_a_dollar_budget_caps_max_replicas(pinned: DpdSpec) -> None:
    from hyperpod_dpd.contracts.prices import table_price

    price = table_price(pinned.instance_type.facts.name)
    assert price is not None
    spec = with_slo_options(pinned, max_usd_per_hour=price.usd_per_node_hour * 3 + 1)
    assert compile_role(spec, "prefill").max_replicas == 3
    assert "SloBudgetBelowMax" in [w.code for w in check(spec).warnings]


def test_an_unresolved_capacity_is_a_spec_error_naming_the_field(slo_spec: DpdSpec) -> None:
    with pytest.raises(SpecError) as caught:
        compile_role(slo_spec, "decode")
    assert [p.field for p in caught.value.problems] == ["decode.autoscaling.slo.capacity_tokens_per_s"]
    assert "Fix:" in str(caught.value)


def test_rendered_autoscaling_is_crd_valid_with_the_compiled_windows(pinned: DpdSpec, crd_errors: Validate,
                                                                     compiled: dict[str, CompiledScaling]) -> None:
    document = render_inference_endpoint_config(pinned, region="us-west-2")
    assert crd_errors(document) == []
    spec = document["spec"]["pdSpec"]["autoScalingSpec"]
    for key, role in (("prefillAutoScaling", "prefill"), ("decodingAutoScaling", "decode")):
        rendered, scaling = spec[key], compiled[role]
        assert (rendered["minReplicaCount"], rendered["maxReplicaCount"]) == (scaling.min_replicas,
                                                                              scaling.max_replicas)
        assert rendered["scaleDownStabilizationTime"] == scaling.scale_down_stabilisation_s
        assert rendered["scaleUpStabilizationTime"] == scaling.scale_up_stabilisation_s
        # KEDA reads initialCooldownPeriod only when scaling to zero, which min_replicas >= 1 rules out.
        assert "initialCooldownPeriod" not in rendered
        assert [t["query"] for t in rendered["prometheusTriggerList"]] == [t.query for t in scaling.triggers]
        assert {t["serverAddress"] for t in rendered["prometheusTriggerList"]} == {SLO_WORKSPACE}


def test_written_triggers_follow_the_compiled_ones(pinned: DpdSpec) -> None:
    from hyperpod_dpd.spec import PrometheusTrigger

    scaling = pinned.prefill.autoscaling
    assert scaling is not None
    extra = PrometheusTrigger(name="inflight", server_address=SLO_WORKSPACE, query="sum(vllm:num_requests_running)",
                              target_value=8)
    spec = dataclasses.replace(pinned, prefill=dataclasses.replace(
        pinned.prefill, autoscaling=dataclasses.replace(scaling, triggers=(extra,))))
    rendered = render_inference_endpoint_config(spec, region="us-west-2")["spec"]["pdSpec"]["autoScalingSpec"]
    assert [t["name"] for t in rendered["prefillAutoScaling"]["prometheusTriggerList"]] == [
        "prefill-slo-demand", "prefill-slo-queue", "prefill-slo-ratio", "inflight"]


def test_synth_of_a_pinned_spec_is_byte_identical_across_runs(pinned: DpdSpec) -> None:
    first, _ = synth_documents([pinned], region="us-west-2")
    second, _ = synth_documents([pinned], region="us-west-2")
    assert first == second
    assert "prefill-slo-demand" in next(iter(first.values()))



def test_the_queue_floor_is_sized_from_the_longest_prompt(compiled: dict[str, CompiledScaling]) -> None:
    """19,000 tokens/s for 2 s is two 16k-token prompts: more waiting per prefiller than that misses the 2 s TTFT
    when the prompts are long (from the shortest, 4k, it let nine wait, about 7 s of long-prompt work)."""
    queue = next(t for t in compiled["prefill"].triggers if t.signal is Signal.QUEUE)
    assert queue.target == math.floor(19000 * 2.0 / 16128) == 2
    assert any("queue floor: 2 waiting per replica, the 16,128-token prompts" in n for n in compiled["prefill"].notes)


def test_the_prefill_slo_ratio_reads_the_prefillers_share_of_the_ttft_target(compiled: dict[str, CompiledScaling]
                                                                            ) -> None:
    """The prefiller's histogram holds its queue and prefill only: its floor divides by the TTFT target less the
    KV transfer (the longest prompt at line rate) and one decode step at the TPOT target, not by the whole."""
    ratio = next(t for t in compiled["prefill"].triggers if t.signal is Signal.SLO_RATIO)
    assert "/ 1.937 > 0" in ratio.query  # 2 s - 13 ms - 50 ms
    decode = next(t for t in compiled["decode"].triggers if t.signal is Signal.SLO_RATIO)
    assert "/ 0.05 > 0" in decode.query  # the decoder controls its whole TPOT
