"""Models without a preset are not silently unchecked; shapes from config.json; the context window with rope
scaling given through ``--hf-overrides``."""

from __future__ import annotations

import copy
from typing import Any

from hyperpod_dpd import SpecError, check, spec_from_mapping, spec_to_mapping
from hyperpod_dpd.spec.defaults import default_spec


def _mapping() -> dict[str, Any]:
    return spec_to_mapping(default_spec())


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = changed
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return changed


def _mistral_tp3() -> dict[str, Any]:
    data = _set(_mapping(), "model.name", "Mistral-7B-Instruct-v0.3-finetune")
    data.get("model", {}).pop("architecture", None)
    return _set(data, "tensor_parallel_size", 3)


def test_an_unknown_architecture_warns_which_checks_were_skipped() -> None:
    checked = check(spec_from_mapping(_mistral_tp3()))
    assert checked.architecture is None
    unknown = [w for w in checked.warnings if w.code == "ArchitectureUnknown"]
    assert len(unknown) == 1
    text = unknown[0].render()
    assert text.startswith("[ArchitectureUnknown] model.architecture: no preset matches model name "
                           "'Mistral-7B-Instruct-v0.3-finetune' and model.architecture is not set, so these "
                           "checks were skipped: tensor_parallel_size divides the attention and KV heads")
    for fragment in ("KV cache fit the GPUs", "context window", "to a preset (llama-3.1-8b", "{config_json: PATH}"):
        assert fragment in text


def test_a_known_architecture_does_not_warn() -> None:
    assert not [w for w in check(default_spec()).warnings if w.code == "ArchitectureUnknown"]


YARN_4X = '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}'


def _context_problems(data: dict[str, Any]) -> list[str]:
    try:
        check(spec_from_mapping(data))
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
