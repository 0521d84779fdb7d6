"""Models without a preset are not silently unchecked; shapes from config.json; the context window with rope
scaling given through ``--hf-overrides``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import default_mapping as _mapping
from support import with_value as _set

from hyperpod_dpd import SpecError, check, parse_spec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.validation import load_checked_spec


def _mistral_tp3() -> dict[str, Any]:
    data = _set(_mapping(), "model.name", "Mistral-7B-Instruct-v0.3-finetune")
    data.get("model", {}).pop("architecture", None)
    return _set(data, "tensor_parallel_size", 3)


def test_an_unknown_architecture_warns_which_checks_were_skipped() -> None:
    checked = check(parse_spec(_mistral_tp3()))
    assert checked.architecture is None
    unknown = [w for w in checked.warnings if w.code == "ArchitectureUnknown"]
    assert len(unknown) == 1
    text = unknown[0].render()
    assert text.startswith("[ArchitectureUnknown] model.architecture: no preset matches model name "
                           "'Mistral-7B-Instruct-v0.3-finetune' and model.architecture is not set, so these "
                           "checks were skipped: tensor_parallel_size divides the attention and KV heads")
    for fragment in ("KV cache fit the GPUs", "context window", "to a preset (llama-3.1-8b", "{config_json: PATH}"):
        assert fragment in text


@pytest.mark.parametrize("name", ["gpt-oss-120b", "DeepSeek-V3", "gemma-3-27b-it"])
def test_a_model_refused_by_name_warns_that_the_checks_cannot_run_and_offers_no_fix(name: str) -> None:
    data = _set(_mapping(), "model.name", name)
    data.get("model", {}).pop("architecture", None)
    checked = check(parse_spec(data))
    (unknown,) = [w for w in checked.warnings if w.code == "ArchitectureUnknown"]
    assert unknown.message.startswith(f"model {name!r} cannot be sized with the dense-attention formula (")
    assert "these checks cannot run for this architecture: tensor_parallel_size divides" in unknown.message
    # Following either old fix made the spec invalid (config.json refused) or sized it with the wrong formula.
    for misleading in ("config_json", "Fix:", "num_layers, hidden_size"):
        assert misleading not in unknown.message


@pytest.mark.parametrize(("name", "preset"), [("DeepSeek-R1-Distill-Llama-70B", "llama-3.3-70b"),
                                              ("DeepSeek-R1-Distill-Llama-8B", "llama-3.1-8b")])
def test_a_deepseek_r1_distill_llama_has_its_students_dense_shape(name: str, preset: str) -> None:
    """The distilled models are dense Llama models (model_type llama), not MLA: sized as their base model."""
    from hyperpod_dpd.spec.architecture import PRESETS

    data = _set(_mapping(), "model.name", name)
    data.get("model", {}).pop("architecture", None)
    checked = check(parse_spec(data))
    assert checked.architecture == PRESETS[preset]
    assert not [w for w in checked.warnings if w.code == "ArchitectureUnknown"]


def test_a_deepseek_r1_distill_qwen_is_not_called_mla() -> None:
    """A Qwen distill extends Qwen2.5's context, so no preset fits: unknown (config.json is the fix), not MLA."""
    data = _set(_mapping(), "model.name", "DeepSeek-R1-Distill-Qwen-32B")
    data.get("model", {}).pop("architecture", None)
    (unknown,) = [w for w in check(parse_spec(data)).warnings if w.code == "ArchitectureUnknown"]
    assert "MLA" not in unknown.message and "latent" not in unknown.message
    assert "{config_json: PATH}" in unknown.message


def test_a_known_architecture_does_not_warn() -> None:
    assert not [w for w in check(default_spec()).warnings if w.code == "ArchitectureUnknown"]


YARN_4X = '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}'


def _context_problems(data: dict[str, Any]) -> list[str]:
    try:
        check(parse_spec(data))
    except SpecError as err:
        return [p.render() for p in err.problems if "context window" in p.render()]
    return []


def _qwen(max_model_len: int, *args: str) -> dict[str, Any]:
    data = _set(_mapping(), "model.name", "Qwen2.5-72B-Instruct")
    data = _set(_set(data, "model.architecture", "qwen2.5-72b"), "max_model_len", max_model_len)
    return _set(_set(data, "args", list(args)), "decode.max_num_seqs", 1)


def test_yarn_rope_scaling_in_hf_overrides_extends_the_context_window() -> None:
    # Qwen2.5's model card: 131,072 tokens with YaRN factor 4 over 32,768 (vLLM multiplies the factor in).
    assert _context_problems(_qwen(131_072, "--hf-overrides", YARN_4X)) == []
    assert _context_problems(_qwen(131_072, f"--hf-overrides={YARN_4X}")) == []


def test_the_scaled_window_is_still_a_limit() -> None:
    problems = _context_problems(_qwen(131_073, "--hf-overrides", YARN_4X))
    assert len(problems) == 1
    assert problems[0].startswith("max_model_len: is above qwen2.5-72b's context window of 131072 tokens")
    assert "with --hf-overrides rope_scaling applied as vLLM does" in problems[0]
    assert problems[0].endswith("Fix: set max_model_len to 131072 or less")
    halved = YARN_4X.replace("4.0", "2.0")
    assert [p.split(". Fix: ")[1] for p in _context_problems(_qwen(131_072, "--hf-overrides", halved))] == [
        "set max_model_len to 65536 or less"]


def test_without_overrides_qwen_keeps_its_32k_window() -> None:
    problems = _context_problems(_qwen(131_072))
    assert len(problems) == 1 and "context window of 32768 tokens" in problems[0]
    # An override that says nothing about rope or length leaves the window alone.
    assert len(_context_problems(_qwen(131_072, "--hf-overrides", '{"foo": 1}'))) == 1


# A Mistral-7B-shaped config.json (32 heads, 8 KV heads); the numbers only need to be a sizable config.
ACME_CONFIG = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
               "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
               "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 32768, "max_position_embeddings": 32768,
               "rope_theta": 1000000.0, "sliding_window": None, "torch_dtype": "bfloat16",
               "tie_word_embeddings": False, "_name_or_path": "acme/Acme-7B"}


def _spec_file(folder: Path, architecture: Any, *, tp: int = 4) -> Path:
    data = _set(_set(_mapping(), "model.name", "Acme-7B"), "model.architecture", architecture)
    data = _set(_set(data, "tensor_parallel_size", tp), "max_model_len", 8192)
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _problems_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_checked_spec(path)
    return [p.render() for p in caught.value.problems]


def test_config_json_relative_to_the_spec_file_gives_the_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text(json.dumps(ACME_CONFIG), encoding="utf-8")
    monkeypatch.chdir("/")
    spec_path = _spec_file(tmp_path, {"config_json": "models/config.json"}, tp=3)
    problems = _problems_of(spec_path)
    assert "tensor_parallel_size: does not divide the 32 attention heads of acme/Acme-7B (got 3). Fix: use a " \
           "divisor of 32, such as 8" in problems
    checked = load_checked_spec(_spec_file(tmp_path, {"config_json": "models/config.json"}, tp=4))
    assert checked.architecture is not None
    assert (checked.architecture.num_attention_heads, checked.architecture.max_context_length) == (32, 32768)
    assert not [w for w in checked.warnings if w.code == "ArchitectureUnknown"]


def test_the_public_load_spec_reads_config_json_as_the_cli_does(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """hyperpod_dpd.load_spec takes the documented {config_json: PATH} form (it used to call it an unknown key)."""
    import hyperpod_dpd

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text(json.dumps(ACME_CONFIG), encoding="utf-8")
    monkeypatch.chdir("/")
    spec = hyperpod_dpd.load_spec(_spec_file(tmp_path, {"config_json": "models/config.json"}, tp=4))
    architecture = spec.model.architecture
    assert not isinstance(architecture, str) and architecture is not None
    assert architecture.num_attention_heads == 32
    with pytest.raises(SpecError, match=r"model\.architecture\.config_json: does not exist"):
        hyperpod_dpd.load_spec(_spec_file(tmp_path, {"config_json": "missing/config.json"}, tp=4))


@pytest.mark.parametrize(("content", "fragment"), [
    (None, "does not exist ("),
    ("{not json", "is not valid JSON"),
    (json.dumps({"model_type": "mistral", "hidden_size": 4096}), "num_hidden_layers is missing"),
    (json.dumps({**ACME_CONFIG, "model_type": "deepseek_v3", "kv_lora_rank": 512}), "multi-head latent attention"),
])
def test_a_bad_config_json_is_a_problem_with_field_value_and_fix(tmp_path: Path, content: str | None,
                                                                 fragment: str) -> None:
    if content is not None:
        (tmp_path / "config.json").write_text(content, encoding="utf-8")
    problems = [p for p in _problems_of(_spec_file(tmp_path, {"config_json": "config.json"}))
                if p.startswith("model.architecture")]
    assert len(problems) == 1, problems
    assert problems[0].startswith("model.architecture.config_json: ")
    assert fragment in problems[0] and "(got 'config.json'). Fix: " in problems[0]


def test_config_json_beside_explicit_fields_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(ACME_CONFIG), encoding="utf-8")
    problems = _problems_of(_spec_file(tmp_path, {"config_json": "config.json", "num_layers": 3}))
    assert "model.architecture: mixes config_json with explicit fields (num_layers) (got ['num_layers']). Fix: " \
           "give either {config_json: PATH} or the explicit fields, not both" in problems


def _mismatches(data: dict[str, Any]) -> list[str]:
    return [w.render() for w in check(parse_spec(data)).warnings if w.code == "ArchitectureMismatch"]


def test_an_architecture_that_contradicts_the_model_name_warns() -> None:
    data = _set(_mapping(), "model.name", "Llama-3.3-70B-Instruct")
    data = _set(_set(data, "model.architecture", "llama-3.1-8b"), "max_model_len", 8192)
    found = _mismatches(data)
    assert len(found) == 1
    assert found[0].startswith("[ArchitectureMismatch] model.architecture: llama-3.1-8b (num_layers 32, "
                               "hidden_size 4096, num_attention_heads 32, num_kv_heads 8, head_dim 128, num_experts 1) "
                               "is not the shape model name 'Llama-3.3-70B-Instruct' is published with "
                               "(llama-3.3-70b: num_layers 80, hidden_size 8192, num_attention_heads 64")
    assert found[0].endswith("Fix: remove model.architecture to use llama-3.3-70b, or correct model.name if the "
                             "weights are another model's")


def test_a_matching_or_same_shaped_architecture_does_not_warn() -> None:
    data = _set(_mapping(), "model.name", "Llama-3.3-70B-Instruct")
    assert _mismatches(_set(data, "model.architecture", "llama-3.3-70b")) == []
    assert _mismatches(_set(data, "model.architecture", "llama-3.1-70b")) == []  # the same shape
    assert _mismatches(_set(data, "model.architecture", None)) == []


@pytest.mark.parametrize(("model_name", "preset"), [
    ("Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3"),
    ("mistralai/Mistral-7B-v0.3", "mistral-7b-v0.3"),
    ("Mistral-7B-Instruct-v0.1", None),  # a sliding window and another vocabulary: not v0.3's shape
    ("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
])
def test_versioned_presets_match_only_their_version(model_name: str, preset: str | None) -> None:
    from hyperpod_dpd.spec.architecture import preset_for_model_name

    found = preset_for_model_name(model_name)
    assert (found.name if found else None) == preset


def test_the_audits_mistral_tp3_spec_is_now_refused() -> None:
    data = _set(_set(_mapping(), "model.name", "Mistral-7B-Instruct-v0.3"), "tensor_parallel_size", 3)
    data = _set(_set(data, "model.architecture", None), "max_model_len", 8192)
    problems = [p.render() for p in _problems_or_raise(data) if p.field == "tensor_parallel_size"]
    assert any("does not divide the 32 attention heads of mistral-7b-v0.3" in p for p in problems), problems


def _problems_or_raise(data: dict[str, Any]) -> list[Any]:
    with pytest.raises(SpecError) as caught:
        check(parse_spec(data))
    return list(caught.value.problems)
