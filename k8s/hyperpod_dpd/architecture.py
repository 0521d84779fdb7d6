"""Model architectures: the few numbers from a Hugging Face ``config.json`` that sizing needs.

Presets are taken from the models' public ``config.json`` files. Architectures whose KV cache is not
``2 x layers x kv_heads x head_dim`` per token (multi-head latent attention, sliding-window or
hybrid state-space layers) are refused as unsizable rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "float8_e4m3fn": 1}


class UnsizableArchitecture(ValueError):
    """The architecture exists but its KV cache cannot be sized with the dense-attention formula."""


@dataclass(frozen=True, kw_only=True)
class ModelArchitecture:
    """The shape of a decoder-only transformer with (grouped-query) multi-head attention."""

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    num_parameters: int
    dtype: str = "bfloat16"
    vocab_size: int = 0
    intermediate_size: int = 0
    num_experts: int = 1

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1


def _preset(**kwargs: Any) -> ModelArchitecture:
    return ModelArchitecture(**kwargs)


# Numbers from each model's public config.json; parameter counts from the model cards / safetensors index.
PRESETS: dict[str, ModelArchitecture] = {
    arch.name: arch
    for arch in (
        _preset(name="llama-3.1-8b", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                head_dim=128, num_parameters=8_030_261_248, vocab_size=128_256, intermediate_size=14_336),
        _preset(name="llama-3.1-70b", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                head_dim=128, num_parameters=70_553_706_496, vocab_size=128_256, intermediate_size=28_672),
        _preset(name="llama-3.3-70b", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                head_dim=128, num_parameters=70_553_706_496, vocab_size=128_256, intermediate_size=28_672),
        _preset(name="llama-3.1-405b", num_layers=126, hidden_size=16_384, num_attention_heads=128,
                num_kv_heads=8, head_dim=128, num_parameters=405_853_388_800, vocab_size=128_256,
                intermediate_size=53_248),
        _preset(name="qwen2.5-32b", num_layers=64, hidden_size=5120, num_attention_heads=40, num_kv_heads=8,
                head_dim=128, num_parameters=32_763_876_352, vocab_size=152_064, intermediate_size=27_648),
        _preset(name="qwen2.5-72b", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                head_dim=128, num_parameters=72_706_203_648, vocab_size=152_064, intermediate_size=29_568),
        _preset(name="mistral-large-2407", num_layers=88, hidden_size=12_288, num_attention_heads=96,
                num_kv_heads=8, head_dim=128, num_parameters=122_610_069_504, vocab_size=32_768,
                intermediate_size=28_672),
        _preset(name="mixtral-8x7b", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                head_dim=128, num_parameters=46_702_792_704, vocab_size=32_000, intermediate_size=14_336,
                num_experts=8),
    )
}

# Model families whose attention the dense formula does not describe.
_UNSIZABLE_MODEL_TYPES = {
    "deepseek_v2": "multi-head latent attention (MLA) compresses the KV cache",
    "deepseek_v3": "multi-head latent attention (MLA) compresses the KV cache",
    "kimi_k2": "multi-head latent attention (MLA) compresses the KV cache",
    "jamba": "hybrid Mamba layers keep a state, not a per-token KV cache",
    "falcon_h1": "hybrid Mamba layers keep a state, not a per-token KV cache",
}


def _normalise(name: str) -> str:
    text = name.lower().replace("meta-", "").replace("_", "-")
    text = re.sub(r"-(instruct|chat|hf|it)(-[0-9]+)?$", "", text)
    return text.removeprefix("meta-llama/").split("/")[-1]


def preset_for_model_name(model_name: str) -> ModelArchitecture | None:
    """The preset a model name refers to (``Llama-3.3-70B-Instruct`` -> ``llama-3.3-70b``), if any."""
    key = _normalise(model_name)
    for name, arch in PRESETS.items():
        if key == name or key == name.replace("-", "") or key.replace("-instruct", "") == name:
            return arch
    return None


def architecture_from_config(config: Mapping[str, Any], *, name: str = "config.json") -> ModelArchitecture:
    """Read a Hugging Face ``config.json`` mapping; refuse what the dense formula cannot size."""
    model_type = str(config.get("model_type", ""))
    if model_type in _UNSIZABLE_MODEL_TYPES or "kv_lora_rank" in config:
        reason = _UNSIZABLE_MODEL_TYPES.get(model_type, "multi-head latent attention (MLA) compresses the KV cache")
        raise UnsizableArchitecture(f"{name}: model_type {model_type!r} cannot be sized: {reason}")
    if config.get("sliding_window") and config.get("use_sliding_window", True) and model_type in {"mistral"}:
        raise UnsizableArchitecture(f"{name}: sliding-window attention bounds the KV cache per layer")
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in config:
        return architecture_from_config({**text, "torch_dtype": config.get("torch_dtype")}, name=name)
    try:
        layers = int(config["num_hidden_layers"])
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
    except (KeyError, TypeError, ValueError) as err:
        raise UnsizableArchitecture(f"{name}: missing or malformed {err} for a transformer config") from err
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    if dtype not in DTYPE_BYTES:
        raise UnsizableArchitecture(f"{name}: dtype {dtype!r} is not one of {sorted(DTYPE_BYTES)}")
    vocab = int(config.get("vocab_size") or 0)
    inter = int(config.get("intermediate_size") or 4 * hidden)
    experts = int(config.get("num_local_experts") or config.get("num_experts") or 1)
    params = estimate_parameters(
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
        intermediate=inter, experts=experts, tied=bool(config.get("tie_word_embeddings", False)))
    return ModelArchitecture(
        name=str(config.get("_name_or_path") or name), num_layers=layers, hidden_size=hidden,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, num_parameters=params,
        dtype=dtype, vocab_size=vocab, intermediate_size=inter, num_experts=experts)


def estimate_parameters(*, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, vocab: int,
                        intermediate: int, experts: int = 1, tied: bool = False) -> int:
    """Parameters of a Llama-style decoder: embeddings, attention, gated MLP (per expert) and norms."""
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * intermediate * experts + (hidden * experts if experts > 1 else 0)
    per_layer = attention + mlp + 2 * hidden
    embeddings = vocab * hidden * (1 if tied else 2)
    return layers * per_layer + embeddings + hidden
