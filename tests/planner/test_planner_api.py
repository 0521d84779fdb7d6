"""The API other code relies on: plan(), Plan.to_json(), render_table(plan), and its errors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hyperpod_dpd import SpecError
from hyperpod_dpd.planner import Plan, load_architecture, plan, render_table
from hyperpod_dpd.spec.architecture import PRESETS
from hyperpod_dpd.spec.defaults import default_spec

REQUIRED_INTS = ("kv_bytes_per_token", "kv_bytes_per_token_per_rank", "kv_bytes_per_request_per_rank",
                 "pd_buffer_transfers", "weights_bytes_per_gpu")


def test_to_json_keys_and_types() -> None:
    data = plan(default_spec()).to_json()
    for key in REQUIRED_INTS:
        assert type(data[key]) is int, key
    assert type(data["transfer_seconds_at_line_rate"]) is float
    assert data["warnings"] == []
    assert data["errors"] == []
    assert data["at_max_model_len"]["pd_buffer_transfers"] == 12
    assert data["roles"]["decode"]["max_length_sequences"] == 63
    assert type(data["prefill_compute_seconds"]) is float
    # 3.36 ms transfer / 189.6 ms prefill
    assert data["at_threshold"]["transfer_to_prefill_ratio"] == pytest.approx(0.0177, abs=1e-3)


def test_prompt_tokens_drive_the_headline_figures() -> None:
    data = plan(default_spec(), prompt_tokens=16_384).to_json()
    assert data["prompt_tokens"] == 16_384
    assert data["kv_bytes_per_request_per_rank"] == 16_384 * 40_960
    assert data["pd_buffer_transfers"] == 12


def test_prompt_tokens_beyond_max_model_len_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        plan(default_spec(), prompt_tokens=20_000)
    assert err.value.problems[0].field == "prompt_tokens"


def test_unknown_model_raises_with_a_fix() -> None:
    base = default_spec()
    spec = replace(base, model=replace(base.model, name="my-private-model"))
    with pytest.raises(SpecError) as err:
        plan(spec)
    (problem,) = err.value.problems
    assert problem.field == "model.architecture"
    assert "--model-config" in problem.fix
    assert "s3://dpd-models-example/Llama-3.3-70B-Instruct" in problem.fix  # the spec's own weights


def test_unknown_preset_name_raises() -> None:
    base = default_spec()
    spec = replace(base, model=replace(base.model, architecture="llama-9"))
    with pytest.raises(SpecError) as err:
        plan(spec)
    assert err.value.problems[0].value == "llama-9"


def test_architecture_argument_overrides_the_spec() -> None:
    p = plan(default_spec(), architecture=load_architecture("llama-3.1-8b"))
    assert isinstance(p, Plan)
    assert p.architecture is PRESETS["llama-3.1-8b"]
    assert p.kv_bytes_per_token == 131_072


def test_sizing_problems_are_returned_not_raised() -> None:
    p = plan(replace(default_spec(), tensor_parallel_size=1))
    assert not p.ok
    assert p.to_json()["errors"][0].startswith("tensor_parallel_size:")
    assert "Errors (1):" in render_table(p)


def test_the_header_names_fp8_weights_apart_from_the_kv_dtype() -> None:
    fp8 = replace(PRESETS["llama-3.3-70b"], weight_bytes_per_parameter=1.0)
    assert "(llama-3.3-70b, 70.6B params, weights fp8, KV bfloat16)" in render_table(
        plan(default_spec(), architecture=fp8))
    assert "B params, bfloat16)" in render_table(plan(default_spec()))


def test_render_table_shows_the_figures() -> None:
    table = render_table(plan(default_spec(), prompt_tokens=8000))
    for text in ("327,680 B", "40,960 B", "819 chunks", "prompt 8000", "threshold 4096", "max len 16384",
                 "6.6 ms", "63 / 32", "No sizing problems found.", "MFU 0.4", "1.8%"):
        assert text in table, text


def test_unsizable_model_name_is_reported_not_guessed() -> None:
    base = default_spec()
    spec = replace(base, model=replace(base.model, name="DeepSeek-V3"))
    with pytest.raises(SpecError) as err:
        plan(spec)
    (problem,) = err.value.problems
    assert problem.field == "model.architecture"
    assert "cannot be sized" in problem.message
    assert "multi-head latent attention" in problem.message
