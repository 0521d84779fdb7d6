"""Model architectures: the few numbers from a Hugging Face ``config.json`` that sizing needs.

Presets are taken from the models' public ``config.json`` files (layers, heads, KV heads, head
dimension, vocabulary, MLP width); their parameter counts are those of the released safetensors and
agree with :func:`estimate_parameters` to within 0.1 %. Architectures whose KV cache is not
``2 x layers x kv_heads x head_dim`` per token (multi-head latent attention, sliding-window,
chunked-local or hybrid state-space layers) are refused as unsizable rather than guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from hyperpod_dpd.errors import DpdError

# The key of ``model.architecture: {config_json: PATH}``, the file form that reads a local config.json.
CONFIG_JSON = "config_json"

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "float8_e4m3fn": 1}

# vLLM's ``--dtype auto`` serves float32 checkpoints in 16 bits, so their KV cache is 2 bytes per value.
_SERVED_DTYPE = {"float32": "bfloat16", "float": "bfloat16", "half": "float16", "bf16": "bfloat16",
                 "fp16": "float16"}


class UnsizableArchitecture(DpdError, ValueError):
    """The architecture exists but its KV cache cannot be sized with the dense-attention formula."""


@dataclass(frozen=True, kw_only=True)
class ModelArchitecture:
    """The shape of a decoder-only transformer with (grouped-query) multi-head attention.

    :param dtype: the dtype of the KV cache and, unless ``weight_bytes_per_parameter`` says otherwise,
        of the weights. :default: "bfloat16"
    :param num_experts: routed experts per MoE layer; 1 for a dense model. :default: 1
    :param num_experts_per_token: experts each token is routed to (compute scales with these, memory
        with all experts). :default: 1
    :param weight_bytes_per_parameter: for quantised checkpoints (1 for FP8, 0.5 for 4-bit).
        :default: - the bytes of ``dtype``
    :param max_context_length: the longest sequence vLLM accepts for this model (its config.json's
        ``max_position_embeddings`` with rope scaling applied, as vLLM derives it);
        vLLM refuses to start with a longer ``--max-model-len``. :default: - unknown, nothing is refused
    :param context_source: where ``max_context_length`` comes from. :default: ""
    """

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
    num_experts_per_token: int = 1
    weight_bytes_per_parameter: float | None = None
    max_context_length: int | None = None
    context_source: str = ""

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def weight_bytes(self) -> int:
        """Bytes of all weights as loaded on the GPUs (every expert, embeddings and LM head)."""
        per_parameter = self.weight_bytes_per_parameter or self.dtype_bytes
        return int(self.num_parameters * per_parameter)

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through: all of them for a dense model, the routed experts for MoE."""
        if not self.is_moe or self.intermediate_size <= 0:
            return self.num_parameters
        idle_experts = self.num_experts - max(1, min(self.num_experts_per_token, self.num_experts))
        idle = self.num_layers * idle_experts * 3 * self.hidden_size * self.intermediate_size
        return max(1, self.num_parameters - idle)

    def problems(self) -> list[str]:
        """What makes these numbers unusable for sizing (empty when they are usable)."""
        found = [f"{name} must be a positive integer, got {value!r}"
                 for name, value in (("num_layers", self.num_layers), ("hidden_size", self.hidden_size),
                                     ("num_attention_heads", self.num_attention_heads),
                                     ("num_kv_heads", self.num_kv_heads), ("head_dim", self.head_dim),
                                     ("num_parameters", self.num_parameters), ("num_experts", self.num_experts))
                 if not isinstance(value, int) or isinstance(value, bool) or value < 1]
        if self.dtype not in DTYPE_BYTES:
            found.append(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {self.dtype!r}")
        if not found and self.num_attention_heads % self.num_kv_heads:
            found.append(f"num_attention_heads {self.num_attention_heads} is not a multiple of num_kv_heads "
                         f"{self.num_kv_heads}")
        if self.max_context_length is not None and (isinstance(self.max_context_length, bool)
                                                    or not isinstance(self.max_context_length, int)
                                                    or self.max_context_length < 1):
            found.append(f"max_context_length must be a positive integer, got {self.max_context_length!r}")
        if self.weight_bytes_per_parameter is not None and not 0 < self.weight_bytes_per_parameter <= 4:
            found.append(f"weight_bytes_per_parameter must be in (0, 4], got {self.weight_bytes_per_parameter!r}")
        return found


def _preset(**kwargs: Any) -> ModelArchitecture:
    return ModelArchitecture(**kwargs)


# The context windows below are each model's config.json ``max_position_embeddings`` on Hugging Face
# (the Instruct checkpoint where base and Instruct differ); Llama 3.1/3.3 reach 131,072 with their
# ``llama3`` rope scaling already counted in that number.
_LLAMA_31_CONTEXT = ("max_position_embeddings 131072 in meta-llama/Llama-3.1-*-Instruct config.json "
                     "(rope_scaling llama3, factor 8 over 8192)")
_QWEN_25_CONTEXT = ("max_position_embeddings 32768 in Qwen/Qwen2.5-*-Instruct config.json; 131072 needs YaRN "
                    "rope scaling added to the config (the model card's note)")

# Numbers from each model's public config.json; parameter counts from the released safetensors.
PRESETS: dict[str, ModelArchitecture] = {
    arch.name: arch
    for arch in (
        _preset(name="llama-3.1-8b", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                head_dim=128, num_parameters=8_030_261_248, vocab_size=128_256, intermediate_size=14_336,
                max_context_length=131_072, context_source=_LLAMA_31_CONTEXT),
        _preset(name="llama-3.1-70b", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                head_dim=128, num_parameters=70_553_706_496, vocab_size=128_256, intermediate_size=28_672,
                max_context_length=131_072, context_source=_LLAMA_31_CONTEXT),
        _preset(name="llama-3.3-70b", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                head_dim=128, num_parameters=70_553_706_496, vocab_size=128_256, intermediate_size=28_672,
                max_context_length=131_072,
                context_source="max_position_embeddings 131072 in meta-llama/Llama-3.3-70B-Instruct config.json "
                               "(rope_scaling llama3, factor 8 over 8192)"),
        _preset(name="llama-3.1-405b", num_layers=126, hidden_size=16_384, num_attention_heads=128,
                num_kv_heads=8, head_dim=128, num_parameters=405_853_388_800, vocab_size=128_256,
                intermediate_size=53_248, max_context_length=131_072, context_source=_LLAMA_31_CONTEXT),
        _preset(name="qwen2.5-32b", num_layers=64, hidden_size=5120, num_attention_heads=40, num_kv_heads=8,
                head_dim=128, num_parameters=32_763_876_352, vocab_size=152_064, intermediate_size=27_648,
                max_context_length=32_768, context_source=_QWEN_25_CONTEXT),
        _preset(name="qwen2.5-72b", num_layers=80, hidden_size=8192, num_attention_heads=64, num_kv_heads=8,
                head_dim=128, num_parameters=72_706_203_648, vocab_size=152_064, intermediate_size=29_568,
                max_context_length=32_768, context_source=_QWEN_25_CONTEXT),
        _preset(name="mistral-large-2407", num_layers=88, hidden_size=12_288, num_attention_heads=96,
                num_kv_heads=8, head_dim=128, num_parameters=122_610_069_504, vocab_size=32_768,
                intermediate_size=28_672, max_context_length=131_072,
                context_source="max_position_embeddings 131072 in mistralai/Mistral-Large-Instruct-2407 "
                               "config.json"),
        _preset(name="mixtral-8x7b", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                head_dim=128, num_parameters=46_702_792_704, vocab_size=32_000, intermediate_size=14_336,
                num_experts=8, num_experts_per_token=2, max_context_length=32_768,
                context_source="max_position_embeddings 32768 in mistralai/Mixtral-8x7B-Instruct-v0.1 "
                               "config.json (revision eba92302a2861cdc0098cc54bc9f17cb2c47eb61)"),
        # mistralai/Mistral-7B-Instruct-v0.3 config.json at revision c170c708c41dac9275d15a8fff4eca08d52bab71
        # (read 2026-12-01): MistralForCausalLM, 32 layers, hidden 4096, 32 heads, 8 KV heads, head_dim
        # 4096 / 32, intermediate 14336, vocab 32768, sliding_window null, untied embeddings, bfloat16.
        # The parameter count is estimate_parameters() of those numbers. Only v0.3 matches: v0.1 has a
        # 4096-token sliding window and a 32000-token vocabulary.
        _preset(name="mistral-7b-v0.3", num_layers=32, hidden_size=4096, num_attention_heads=32, num_kv_heads=8,
                head_dim=128, num_parameters=7_248_023_552, vocab_size=32_768, intermediate_size=14_336,
                max_context_length=32_768,
                context_source="max_position_embeddings 32768 in mistralai/Mistral-7B-Instruct-v0.3 config.json "
                               "(revision c170c708c41dac9275d15a8fff4eca08d52bab71)"),
    )
}

# The table of published architectures: each entry the shape architecture_from_config() reads from one
# config.json, with that config and where it was read (scripts/architectures.py derives it; a test re-derives it).
ARCHITECTURES_FILE = "architectures.json"


@cache
def architectures_data() -> dict[str, Any]:
    text = resources.files("hyperpod_dpd.data").joinpath(ARCHITECTURES_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _published() -> dict[str, ModelArchitecture]:
    found: dict[str, ModelArchitecture] = {}
    for item in architectures_data()["entries"]:
        arch = ModelArchitecture(**item["shape"])
        if arch.name in PRESETS or arch.name in found:
            raise RuntimeError(f"{ARCHITECTURES_FILE}: {arch.name!r} is listed twice")  # pragma: no cover - a test
        found[arch.name] = arch
    return found


PRESETS.update(_published())

_MLA = "multi-head latent attention (MLA) stores a compressed latent per token, not per-head keys and values"
_HYBRID = "hybrid state-space or linear-attention layers keep a fixed state, not a per-token KV cache"
_LOCAL = "it interleaves sliding-window (local) and global attention layers, so the KV cache per layer differs"
# Model families whose attention the dense formula does not describe.
_UNSIZABLE_MODEL_TYPES = {
    "deepseek_v2": _MLA,
    "deepseek_v3": _MLA,
    "deepseek_v32": _MLA,
    "kimi_k2": _MLA,
    "minicpm3": _MLA,
    "jamba": _HYBRID,
    "falcon_h1": _HYBRID,
    "nemotron_h": _HYBRID,
    "bamba": _HYBRID,
    "granitemoehybrid": _HYBRID,
    "qwen3_next": _HYBRID,
    "mamba": _HYBRID,
    "mamba2": _HYBRID,
    "gemma2": _LOCAL,
    "gemma3": _LOCAL,
    "gemma3_text": _LOCAL,
    "cohere2": _LOCAL,
    "gpt_oss": _LOCAL,
    "llama4": "it uses chunked local attention on three of every four layers",
    "llama4_text": "it uses chunked local attention on three of every four layers",
}


def _normalise(name: str) -> str:
    """``meta-llama/Llama-3.3-70B-Instruct`` -> ``llama-3.3-70b``; ``Mixtral-8x7B-Instruct-v0.1`` -> ``mixtral-8x7b``.

    The last path part, lower-cased, without ``meta-``, a ``-v0.1`` version or ``-Instruct``/``-chat``/``-hf``.
    """
    text = name.lower().replace("_", "-").split("/")[-1]
    text = text.removeprefix("meta-")
    text = re.sub(r"-v[0-9]+(\.[0-9]+)*$", "", text)          # -v0.1
    text = re.sub(r"-(instruct|chat|hf|it|base)\b", "", text)  # -Instruct, -Instruct-2407 keeps -2407
    return text


# Model names of well-known families that the dense formula cannot size, with the reason.
_UNSIZABLE_NAME_PREFIXES = {
    "deepseek-v2": _MLA, "deepseek-v3": _MLA, "deepseek-r1": _MLA, "kimi-k2": _MLA,
    "gemma-2": _LOCAL, "gemma-3": _LOCAL, "gpt-oss": _LOCAL, "jamba": _HYBRID, "qwen3-next": _HYBRID,
    "llama-4": "it uses chunked local attention on three of every four layers",
}


# DeepSeek-R1's distilled models are dense models of other families (their config.json says model_type llama or
# qwen2, with grouped-query attention), so "deepseek-r1" alone says nothing about them. The Llama ones keep their
# base model's shape and context window (DeepSeek-R1-Distill-Llama-70B is Llama 3.3 70B Instruct's, -8B is
# Llama 3.1 8B's); the Qwen ones extend Qwen2.5's context, so their config.json is the source.
_DISTILLED_PRESETS = {"deepseek-r1-distill-llama-70b": "llama-3.3-70b", "deepseek-r1-distill-llama-8b": "llama-3.1-8b"}
_DISTILLED = "-distill-"


def unsizable_reason_for_model_name(model_name: str) -> str | None:
    """Why a model of this name cannot be sized (``DeepSeek-V3`` -> MLA), or None if the name says nothing."""
    key = model_name.lower().replace("_", "-").split("/")[-1]  # not _normalise: "-V3" is no version suffix here
    if _DISTILLED in key:
        return None  # a distilled model has its student's architecture, not its teacher's
    for prefix, reason in _UNSIZABLE_NAME_PREFIXES.items():
        if key.startswith(prefix):
            return reason
    return None


def preset_for_model_name(model_name: str) -> ModelArchitecture | None:
    """The preset a model name refers to (``Llama-3.3-70B-Instruct`` -> ``llama-3.3-70b``), if any."""
    # The published table's entries match only the model they were read from (``Qwen/Qwen3-8B`` or ``Qwen3-8B``):
    # a -Base or -Instruct-2507 sibling can have another context window.
    written = model_name.strip().lower()
    distilled = _DISTILLED_PRESETS.get(written.replace("_", "-").split("/")[-1])
    if distilled is not None:
        return PRESETS[distilled]
    for item in architectures_data()["entries"]:
        model = str(item["model"]).lower()
        if written in (model, model.split("/")[-1], item["name"]):
            return PRESETS[item["name"]]
    published = {str(item["name"]) for item in architectures_data()["entries"]}
    key = _normalise(model_name)
    # Presets whose name carries a version (mistral-7b-v0.3) match only that version.
    versioned = re.sub(r"-(instruct|chat|hf|it|base)\b", "",
                       model_name.lower().replace("_", "-").split("/")[-1].removeprefix("meta-"))
    for name, arch in PRESETS.items():
        if name in published:
            continue
        if key in (name, name.replace("-", "")) or versioned == name:
            return arch
    return None


def _weight_bytes_per_parameter(config: Mapping[str, Any]) -> float | None:
    """Bytes per weight of a quantised checkpoint (``quantization_config``), or None for plain weights."""
    quant = config.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits") or quant.get("w_bit") or quant.get("weight_bits")
    if method in {"fp8", "fbgemm_fp8"}:
        return 1.0
    if isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 16:
        return bits / 8
    if method == "compressed-tensors":
        groups = quant.get("config_groups")
        if isinstance(groups, Mapping):
            for group in groups.values():
                weights = group.get("weights") if isinstance(group, Mapping) else None
                if isinstance(weights, Mapping) and isinstance(weights.get("num_bits"), int):
                    return int(weights["num_bits"]) / 8
    raise UnsizableArchitecture(f"quantization_config with quant_method {method!r} does not say its weight bits")


def _check_attention(config: Mapping[str, Any], name: str) -> None:
    model_type = str(config.get("model_type", ""))
    if model_type in _UNSIZABLE_MODEL_TYPES or "kv_lora_rank" in config:
        reason = _UNSIZABLE_MODEL_TYPES.get(model_type, _MLA)
        raise UnsizableArchitecture(f"{name}: model_type {model_type!r} cannot be sized: {reason}")
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list | tuple):
        other = sorted({str(t) for t in layer_types} - {"full_attention", "attention"})
        if other:
            raise UnsizableArchitecture(f"{name}: model_type {model_type!r} cannot be sized: layer types "
                                        f"{', '.join(other)} besides full attention keep a different KV cache")
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True):
        raise UnsizableArchitecture(f"{name}: model_type {model_type!r} cannot be sized: sliding-window attention "
                                    f"({window} tokens) bounds the KV cache per layer")


def architecture_from_config(config: Mapping[str, Any], *, name: str = "config.json") -> ModelArchitecture:
    """Read a Hugging Face ``config.json`` mapping; refuse what the dense formula cannot size.

    Raises :class:`UnsizableArchitecture` with the reason for MLA, hybrid, sliding-window and local
    attention models, and for configs missing the numbers sizing needs.
    """
    text = config.get("text_config")
    if isinstance(text, Mapping) and "num_hidden_layers" not in config:
        dtype = config.get("torch_dtype") or config.get("dtype")
        inner = {**text, "torch_dtype": text.get("torch_dtype") or text.get("dtype") or dtype}
        if "quantization_config" in config and "quantization_config" not in text:
            inner["quantization_config"] = config["quantization_config"]
        if "model_type" in config and "model_type" not in text:
            inner["model_type"] = config["model_type"]
        _check_attention(config, name)
        return architecture_from_config(inner, name=name)
    _check_attention(config, name)
    try:
        layers = _positive(config, "num_hidden_layers")
        hidden = _positive(config, "hidden_size")
        heads = _positive(config, "num_attention_heads")
        kv_heads = _positive(config, "num_key_value_heads", default=heads)
        head_dim = _positive(config, "head_dim", default=hidden // heads)
        vocab = _positive(config, "vocab_size", default=0, allow_zero=True)
        experts = _positive(config, "num_local_experts", default=0, allow_zero=True) or _positive(
            config, "num_experts", default=1)
        moe_inter = _positive(config, "moe_intermediate_size", default=0, allow_zero=True)
        inter = moe_inter if experts > 1 and moe_inter else _positive(config, "intermediate_size", default=4 * hidden)
        per_token = _positive(config, "num_experts_per_tok", default=1) if experts > 1 else 1
    except (TypeError, ValueError) as err:
        raise UnsizableArchitecture(f"{name}: {err}") from err
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    dtype = _SERVED_DTYPE.get(dtype, dtype)
    if dtype not in DTYPE_BYTES:
        raise UnsizableArchitecture(f"{name}: dtype {dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
    if heads % kv_heads:
        raise UnsizableArchitecture(f"{name}: num_attention_heads {heads} is not a multiple of "
                                    f"num_key_value_heads {kv_heads}")
    params = estimate_parameters(
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
        intermediate=inter, experts=experts, tied=bool(config.get("tie_word_embeddings", False)),
        attention_bias=bool(config.get("attention_bias", False)) or config.get("model_type") == "qwen2")
    return ModelArchitecture(
        name=str(config.get("_name_or_path") or name), num_layers=layers, hidden_size=hidden,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, num_parameters=params,
        dtype=dtype, vocab_size=vocab, intermediate_size=inter, num_experts=experts,
        num_experts_per_token=per_token, weight_bytes_per_parameter=_weight_bytes_per_parameter(config),
        max_context_length=context_length_from_config(config),
        context_source=f"{name}: max_position_embeddings with rope scaling, as vLLM derives it")


# The config.json keys vLLM 0.19.0 reads for a model's length (vllm/config/model.py,
# _get_and_verify_max_len); the smallest one present wins.
_LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_sequence_length", "max_seq_length", "seq_len")
# Rope types whose max_position_embeddings already includes the scaling (vLLM does not multiply them).
_PRESCALED_ROPE = {"su", "longrope", "llama3"}


def context_length_from_config(config: Mapping[str, Any]) -> int | None:
    """The longest ``--max-model-len`` vLLM accepts for this config.json, or None when it says nothing.

    vLLM takes the smallest length key present, then multiplies by the rope scaling ``factor``
    (YaRN from ``original_max_position_embeddings``), except for rope types already counted.
    """
    lengths = [value for key in _LENGTH_KEYS
               if isinstance(value := config.get(key), int) and not isinstance(value, bool) and value > 0]
    if not lengths:
        return None
    length: float = min(lengths)
    rope = config.get("rope_scaling") or config.get("rope_parameters")
    if isinstance(rope, Mapping):
        rope_type = str(rope.get("rope_type") or rope.get("type") or "")
        factor = rope.get("factor")
        if rope_type not in _PRESCALED_ROPE and isinstance(factor, int | float) and not isinstance(factor, bool):
            original = rope.get("original_max_position_embeddings")
            if rope_type == "yarn" and isinstance(original, int) and original > 0:
                length = original
            length *= factor
    return int(length)


def _positive(config: Mapping[str, Any], key: str, *, default: int | None = None, allow_zero: bool = False) -> int:
    value = config.get(key)
    if value is None:
        if default is None:
            raise ValueError(f"{key} is missing; a decoder-only transformer config has it")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    return value


def estimate_parameters(*, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, vocab: int,
                        intermediate: int, experts: int = 1, tied: bool = False,
                        attention_bias: bool = False) -> int:
    """Parameters of a Llama-style decoder: embeddings, attention, gated MLP (per expert) and norms.

    Per layer: Q and O projections ``2 x hidden x heads x head_dim``, K and V ``2 x hidden x kv_heads x
    head_dim`` (plus Q/K/V biases when ``attention_bias``), three MLP matrices ``hidden x intermediate``
    per expert, a router ``hidden x experts`` for MoE, and two RMSNorm weights; then the embeddings
    (and an untied LM head) and the final norm.
    """
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    if attention_bias:
        attention += (heads + 2 * kv_heads) * head_dim
    mlp = 3 * hidden * intermediate * experts + (hidden * experts if experts > 1 else 0)
    per_layer = attention + mlp + 2 * hidden
    embeddings = vocab * hidden * (1 if tied else 2)
    return layers * per_layer + embeddings + hidden
