"""Sizing at synth time: hyperpod_dpd.check() runs the planner's findings when the architecture is known."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hyperpod_dpd import ByteSize, InstanceType, RoleSpec, RoutingSpec, SpecError, check
from hyperpod_dpd.planner import plan
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import ModelArchitecture
from hyperpod_dpd.spec.defaults import default_spec


def with_buffer(spec: DpdSpec, size: str) -> DpdSpec:
    return replace(spec, kv_cache=replace(spec.kv_cache, pd_buffer_size=ByteSize.parse(size)))


def problems_of(spec: DpdSpec, **kwargs: object) -> dict[str, str]:
    with pytest.raises(SpecError) as err:
        check(spec, **kwargs)  # type: ignore[arg-type]
    return {p.field: f"{p.message} Fix: {p.fix}" for p in err.value.problems}


def test_default_spec_passes_without_warnings() -> None:
    checked = check(default_spec())
    assert checked.warnings == ()
    assert checked.architecture is not None and checked.architecture.name == "llama-3.3-70b"


def test_70b_on_one_h100_is_rejected_at_synth_time() -> None:
    # 141.1 GB of weights on one 80 GiB GPU (60 GiB at utilization 0.75)
    found = problems_of(replace(default_spec(), tensor_parallel_size=1))
    assert "runs out of memory loading the model" in found["tensor_parallel_size"]
    assert "use tensor_parallel_size 4" in found["tensor_parallel_size"]


def test_buffer_smaller_than_one_max_length_request_is_rejected() -> None:
    # 131,072 tokens x 40,960 B = 5 GiB per rank; 1 GiB holds 102 chunks of 10 MiB, 512 are needed
    spec = with_buffer(replace(default_spec(), max_model_len=131_072), "1Gi")
    found = problems_of(spec)
    message = found["kv_cache.pd_buffer_size"]
    assert "needs 512 chunks" in message
    assert "Failed to allocate memory object" in message
    assert "raise kv_cache.pd_buffer_size to 8Gi" in message


def test_share_plus_buffer_beyond_gpu_memory_is_rejected() -> None:
    # 0.95 x 80 GiB = 76 GiB + 8 GiB buffer > 80 GiB
    found = problems_of(replace(default_spec(), gpu_memory_utilization=0.95))
    assert "does not fit beside it" in found["gpu_memory_utilization"]
    assert "at most 0.88" in found["gpu_memory_utilization"]  # (80 - 8 - 1) / 80 = 0.8875


def test_decoder_only_utilization_names_the_decoder_field() -> None:
    found = problems_of(replace(default_spec(), decode=RoleSpec(gpu_memory_utilization=0.95)))
    assert set(found) == {"decode.gpu_memory_utilization"}


def test_no_room_for_one_sequence_is_rejected() -> None:
    # TP 4: 35.3 GB weights per GPU in a 0.5 x 80 GiB = 40 GiB share leaves 7.1 GB; one 131,072-token
    # sequence needs 131,072 x 81,920 B = 10 GiB
    spec = with_buffer(replace(default_spec(), tensor_parallel_size=4, max_model_len=131_072,
                               gpu_memory_utilization=0.5), "32Gi")
    found = problems_of(spec)
    assert "vLLM refuses to start" in found["max_model_len"]


def test_warnings_for_a_small_model_and_short_threshold() -> None:
    base = default_spec()
    spec = replace(base, model=replace(base.model, name="Llama-3.1-8B-Instruct"), routing=RoutingSpec(threshold=512))
    codes = {w.code for w in check(spec).warnings}
    assert {"SmallModel", "ShortRoutingThreshold"} <= codes


def test_buffer_below_decoder_max_num_seqs_is_a_warning() -> None:
    # 4 GiB holds 409 chunks; 16 per threshold-length request -> 25 transfers < 32
    spec = with_buffer(default_spec(), "4Gi")
    warnings = {w.code: w.message for w in check(spec).warnings}
    assert "25 transfers of 4096 tokens" in warnings["PdBufferBelowMaxNumSeqs"]
    assert "raise kv_cache.pd_buffer_size to 8Gi" in warnings["PdBufferBelowMaxNumSeqs"]


def test_kv_cache_below_max_num_seqs_is_a_warning() -> None:
    spec = replace(default_spec(), decode=RoleSpec(max_num_seqs=128))
    warnings = {w.code: w for w in check(spec).warnings}
    assert warnings["KvCacheBelowMaxNumSeqs"].field == "decode.max_num_seqs"


def test_unknown_architecture_skips_sizing() -> None:
    base = default_spec()
    spec = replace(base, model=replace(base.model, name="my-private-model"), tensor_parallel_size=1)
    assert check(spec).architecture is None  # no sizing problem although nothing is known to fit


def test_explicit_architecture_is_sized() -> None:
    base = default_spec()
    huge = ModelArchitecture(name="huge", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                             head_dim=128, num_parameters=1_500_000_000_000)
    spec = replace(base, model=replace(base.model, name="my-private-model", architecture=huge))
    found = problems_of(spec)
    assert "no DPD instance type holds these weights" in found["tensor_parallel_size"]


def test_check_architecture_argument_is_used() -> None:
    bad = ModelArchitecture(name="broken", num_layers=0, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                            head_dim=128, num_parameters=1)
    found = problems_of(default_spec(), architecture=bad)
    assert "num_layers must be a positive integer" in found["model.architecture"]


def test_405b_suggests_a_bigger_instance() -> None:
    base = default_spec()
    spec = replace(base, model=replace(base.model, name="Llama-3.1-405B-Instruct"))
    found = problems_of(spec)
    assert "ml.p5e.48xlarge" in found["tensor_parallel_size"]
    assert check(replace(spec, instance_type=InstanceType.P5E_48XLARGE)).architecture is not None


def test_plan_and_check_agree() -> None:
    spec = with_buffer(default_spec(), "4Gi")
    assert [w.render() for w in check(spec).warnings] == plan(spec).to_json()["warnings"]


def test_architecture_with_quantised_weights_round_trips_through_check() -> None:
    base = default_spec()
    fp8 = replace(load_preset("llama-3.1-405b"), name="llama-405b-fp8", weight_bytes_per_parameter=1.0)
    spec = replace(base, model=replace(base.model, name="Llama-405B-FP8", architecture=fp8),
                   instance_type=InstanceType.P5E_48XLARGE)
    checked = check(spec)
    assert checked.architecture is not None
    assert checked.architecture.weight_bytes == 405_853_388_800
    # 405.9 GB / 8 = 50.7 GB per GPU fits the 0.75 x 141 GiB share
    assert plan(checked.spec, architecture=checked.architecture).ok


def load_preset(name: str) -> ModelArchitecture:
    from hyperpod_dpd.spec.architecture import PRESETS

    return PRESETS[name]


@pytest.mark.parametrize("changes", [{"tensor_parallel_size": 16}, {"tensor_parallel_size": 0},
                                     {"max_model_len": 0}, {"gpu_memory_utilization": 1.5}])
def test_out_of_range_values_leave_sizing_to_the_other_rules(changes: dict[str, object]) -> None:
    found = problems_of(replace(default_spec(), **changes))  # type: ignore[arg-type]
    # the spec rules report the value (max_model_len 0 also puts the threshold out of range); sizing adds nothing
    assert set(changes) <= set(found) <= {*changes, "routing.threshold"}


def test_zero_chunk_tokens_does_not_crash_sizing() -> None:
    base = default_spec()
    found = problems_of(replace(base, kv_cache=replace(base.kv_cache, chunk_tokens=0)))
    assert set(found) == {"kv_cache.chunk_tokens"}


def test_buffer_advice_makes_room_for_the_bigger_buffer() -> None:
    # TP 2: 163,840 B per token per rank, 40 MiB chunks; 8 GiB holds 204 -> 12 threshold-length transfers < 32.
    # 32 transfers need 32 x 16 x 40 MiB = 20 GiB -> 32Gi, which beside a 60 GiB share exceeds 80 GiB
    spec = replace(default_spec(), tensor_parallel_size=2)
    p = plan(spec)
    (warning,) = [w for w in p.warnings if w.code == "PdBufferBelowMaxNumSeqs"]
    assert "raise kv_cache.pd_buffer_size to 32Gi and lower gpu_memory_utilization to at most 0.58" in warning.message


def test_threshold_above_max_model_len_is_sized_at_the_longest_prompt() -> None:
    # No prompt reaches the prefiller: the buffer is not judged by 99,999-token transfers that cannot happen.
    spec = replace(default_spec(), routing=RoutingSpec(threshold=99_999))
    sized = plan(spec)
    assert sized.at_threshold.tokens == spec.max_model_len == sized.request.tokens
    assert "PdBufferBelowMaxNumSeqs" not in {w.code for w in sized.warnings}
    assert {w.field for w in check(spec).warnings} >= {"routing.threshold"}
