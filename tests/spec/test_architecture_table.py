"""The table of published architectures: each shape is what its recorded config.json gives, with its source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import default_mapping as _mapping
from support import load_module
from support import with_value as _set

from hyperpod_dpd import SpecError, check, parse_spec
from hyperpod_dpd.spec.architecture import PRESETS, architectures_data, preset_for_model_name

REPO = Path(__file__).resolve().parents[2]


def _script() -> Any:
    return load_module("architectures_script", REPO / "scripts" / "architectures.py")


def test_every_shipped_shape_is_what_the_script_derives_from_its_recorded_config() -> None:
    shipped = architectures_data()
    assert shipped["entries"], "the table is empty"
    assert _script().rederived(shipped) == shipped
    assert _script().main(["--check"]) == 0


def test_a_changed_number_is_caught() -> None:
    shipped = json.loads(json.dumps(architectures_data()))
    shipped["entries"][0]["shape"]["num_kv_heads"] += 1
    assert _script().rederived(shipped) != shipped


def test_every_entry_names_where_its_config_was_read() -> None:
    for item in architectures_data()["entries"]:
        source = item["source"]
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), item["name"]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", source["read"]), item["name"]
        assert source["repository"] and source["path"], item["name"]
        assert "maker_revision" in source, item["name"]  # None says the copy did not name one
        assert item["name"] in PRESETS


def test_the_script_builds_an_entry_from_a_config_file(tmp_path: Path) -> None:
    shipped = {e["name"]: e for e in architectures_data()["entries"]}["qwen3-30b-a3b"]
    (tmp_path / "config.json").write_text(json.dumps(shipped["config"]))
    (tmp_path / "sources.json").write_text(json.dumps([{"name": shipped["name"], "model": shipped["model"],
                                                        "config_file": "config.json", "source": shipped["source"]}]))
    out = tmp_path / "table.json"
    assert _script().main([str(tmp_path / "sources.json"), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["entries"] == [shipped]


def test_the_script_refuses_a_config_the_dense_formula_cannot_size(tmp_path: Path) -> None:
    mla = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
           "kv_lora_rank": 512}
    (tmp_path / "config.json").write_text(json.dumps(mla))
    source = {"repository": "r/r", "path": "config.json", "commit": "0" * 40, "read": "2026-12-02"}
    (tmp_path / "sources.json").write_text(json.dumps([{"name": "x", "model": "deepseek-ai/DeepSeek-V3",
                                                        "config_file": "config.json", "source": source}]))
    with pytest.raises(SystemExit, match="multi-head latent attention"):
        _script().main([str(tmp_path / "sources.json"), "--out", "-"])


def test_the_moe_entry_keeps_every_expert_in_memory_and_routes_through_eight() -> None:
    """Qwen3-30B-A3B: 128 experts of 768, 8 per token (its config.json); its attention is dense GQA, so the KV
    formula holds, and the weights the GPUs hold are all 128 experts (30.5B), the compute 3.35B."""
    arch = PRESETS["qwen3-30b-a3b"]
    assert (arch.num_experts, arch.num_experts_per_token, arch.intermediate_size, arch.num_kv_heads) == (128, 8, 768, 4)
    assert round(arch.num_parameters / 1e9, 1) == 30.5
    assert round(arch.active_parameters / 1e9, 2) == 3.35


@pytest.mark.parametrize(("model_name", "preset"), [
    ("Qwen/Qwen3-8B", "qwen3-8b"), ("Qwen3-32B", "qwen3-32b"), ("qwen3-30b-a3b", "qwen3-30b-a3b"),
    ("Qwen3-8B-Base", None),                 # another checkpoint: its config was not read
    ("Qwen3-30B-A3B-Instruct-2507", None),   # a later release with another context window
])
def test_table_entries_match_only_the_model_they_were_read_from(model_name: str, preset: str | None) -> None:
    found = preset_for_model_name(model_name)
    assert (found.name if found else None) == preset


def test_a_table_model_gets_the_shape_checks() -> None:
    data = _set(_set(_mapping(), "model.name", "Qwen/Qwen3-32B"), "model.architecture", None)
    data = _set(_set(data, "tensor_parallel_size", 3), "max_model_len", 8192)
    with pytest.raises(SpecError) as caught:
        check(parse_spec(data))
    assert any("does not divide the 64 attention heads of qwen3-32b" in p.render() for p in caught.value.problems)
    context = _set(_set(_set(_mapping(), "model.name", "Qwen/Qwen3-8B"), "model.architecture", None),
                   "max_model_len", 65536)
    with pytest.raises(SpecError) as caught:
        check(parse_spec(context))
    assert any("40960" in p.render() for p in caught.value.problems if p.field == "max_model_len")
