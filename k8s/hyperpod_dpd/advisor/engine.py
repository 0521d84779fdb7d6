"""The spec's vLLM engine settings, as AIConfigurator inputs, or refused when it cannot model them.

FP8 weights (``--quantization fp8``) and FP8 KV cache (``--kv-cache-dtype fp8``) select AIConfigurator's
``fp8`` GEMM and KV-cache quantization modes; ``--max-num-batched-tokens`` is the token budget of one
engine step, which decides how many steps a prompt's prefill takes and how much of it rides with
the decodes of an aggregated engine. Flags that change the kernels or the schedule in ways the data
cannot show (speculative decoding, pipeline or data parallelism, other quantizations) are refused
with the flag named, never silently ignored. Flags that only place, expose or log the engine are
irrelevant to its speed and pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_dpd.contracts.vllm import canonical_args, flag_values
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec import DpdSpec

# vLLM 0.19.0's default step budget for the OpenAI server on GPUs with 70 GiB or more (H100, H200,
# B200, B300): ``EngineArgs.get_batch_defaults`` in ``vllm/engine/arg_utils.py`` (8,192 tokens).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
_FP8 = "fp8"
_QUANTIZATION = {"fp8": _FP8}
_KV_CACHE_DTYPE = {"auto": None, "bfloat16": None, "fp8": _FP8, "fp8_e4m3": _FP8}
_DTYPE = {"auto", "bfloat16", "bf16"}
# Flags whose effect on speed AIConfigurator's kernel data cannot show, with the value that is harmless.
_REFUSED: Mapping[str, str | None] = {
    "--speculative-config": None, "--pipeline-parallel-size": "1", "--data-parallel-size": "1",
    "--enable-expert-parallel": None, "--cpu-offload-gb": "0", "--decode-context-parallel-size": "1",
}


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """What the estimate takes from the engine flags. ``None`` quantization means the model's BF16."""

    gemm_quant_mode: str | None = None
    kvcache_quant_mode: str | None = None
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS

    def describe(self) -> str:
        return (f"weights {self.gemm_quant_mode or 'bf16'}, KV cache {self.kvcache_quant_mode or 'bf16'}, "
                f"max_num_batched_tokens {self.max_num_batched_tokens:,}")


def engine_settings(spec: DpdSpec) -> EngineSettings:
    """The settings both roles run with; refuses flags it cannot model and roles that differ."""
    found: dict[str, EngineSettings] = {}
    problems: list[Problem] = []
    for name, role in spec.roles():
        values = flag_values([*canonical_args(spec.args), *canonical_args(role.args)])
        field = f"{name}.args" if any(a for a in role.args) else "args"
        settings, wrong = _read(values, field=field)
        found[name] = settings
        problems += [p for p in wrong if p not in problems]
    if not problems and found["prefill"] != found["decode"]:
        problems.append(Problem(field="decode.args", value=found["decode"].describe(),
                                message=f"differ from the prefill role's ({found['prefill'].describe()}); the "
                                        "advisor models one engine configuration for both roles",
                                fix="give both roles the same quantization and batched-token limit"))
    if problems:
        raise SpecError(problems)
    return found["prefill"]


def _read(values: Mapping[str, str | None], *, field: str) -> tuple[EngineSettings, list[Problem]]:
    problems = []
    for flag, harmless in _REFUSED.items():
        if flag in values and (harmless is None or values[flag] != harmless):
            problems.append(Problem(field=field, value=f"{flag} {values[flag] or ''}".strip(),
                                    message="changes engine speed in a way AIConfigurator's kernel data cannot show",
                                    fix=f"estimate without {flag}, then measure it with hyperpod-dpd bench"))
    quantization = values.get("--quantization")
    if quantization is not None and quantization not in _QUANTIZATION:
        problems.append(Problem(field=field, value=f"--quantization {quantization}", message="is not a "
                                "quantization the advisor maps to AIConfigurator's data",
                                fix="use --quantization fp8 or none (BF16)"))
    kv_dtype = values.get("--kv-cache-dtype")
    if kv_dtype is not None and kv_dtype not in _KV_CACHE_DTYPE:
        problems.append(Problem(field=field, value=f"--kv-cache-dtype {kv_dtype}", message="is not a KV-cache "
                                "type the advisor maps to AIConfigurator's data", fix="use fp8 or auto"))
    dtype = values.get("--dtype")
    if dtype is not None and dtype not in _DTYPE:
        problems.append(Problem(field=field, value=f"--dtype {dtype}", message="is not BF16, the precision "
                                "AIConfigurator measured", fix="drop --dtype or use bfloat16"))
    budget = DEFAULT_MAX_NUM_BATCHED_TOKENS
    written = values.get("--max-num-batched-tokens")
    if written is not None:
        try:
            budget = int(written)
        except ValueError:
            budget = 0
        if budget < 1:
            problems.append(Problem(field=field, value=f"--max-num-batched-tokens {written}",
                                    message="is not a positive whole number of tokens", fix="give e.g. 8192"))
            budget = DEFAULT_MAX_NUM_BATCHED_TOKENS
    return EngineSettings(gemm_quant_mode=_QUANTIZATION.get(quantization or ""),
                          kvcache_quant_mode=_KV_CACHE_DTYPE.get(kv_dtype or "auto"),
                          max_num_batched_tokens=budget), problems
