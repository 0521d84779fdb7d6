"""The fastest a step can physically be: bytes over HBM bandwidth, FLOPs over the tensor cores' peak.

A decode step reads every weight of its GPU's shard and the KV cache of every sequence in the batch
at least once; a prefill does at least ``2 x parameters x tokens`` plus causal attention in FLOPs.
Calibration refuses a factor that would make a step faster than this: such a benchmark measured
something other than this model on this hardware. The floors are deliberately generous (no
activation traffic, no kernel launch, no communication), so a real engine is always above them.
"""

from __future__ import annotations

from hyperpod_dpd.planner.assumptions import PEAK_DENSE_BF16_TFLOPS
from hyperpod_dpd.planner.sizing import kv_bytes_per_token_per_rank, prefill_flops
from hyperpod_dpd.spec.architecture import ModelArchitecture

# HBM bandwidth per GPU, bytes per second, from NVIDIA's datasheets: H100 SXM 3.35 TB/s (HBM3, H100
# Tensor Core GPU datasheet); H200 SXM 4.8 TB/s (HBM3e, H200 datasheet); HGX B200 8 TB/s and HGX B300
# 8 TB/s per GPU (HGX platform page: 64 TB/s per 8 GPUs).
HBM_BYTES_PER_S: dict[str, float] = {"H100": 3.35e12, "H200": 4.8e12, "B200": 8.0e12, "B300": 8.0e12}
# FP8 tensor cores run twice the dense BF16 rate on Hopper and Blackwell (the same datasheets).
FP8_PEAK_RATIO = 2.0
_FP8_BYTES = 1


def _peak_flops(gpu: str, *, fp8: bool) -> float:
    return PEAK_DENSE_BF16_TFLOPS[gpu] * 1e12 * (FP8_PEAK_RATIO if fp8 else 1.0)


def decode_floor_s(arch: ModelArchitecture, *, gpu: str, tp: int, batch: int, context_tokens: int,
                   fp8_weights: bool = False, fp8_kv: bool = False) -> float:
    """One decode step: the GPU's weight shard plus ``batch`` sequences' KV of ``context_tokens``, over HBM."""
    weights = arch.num_parameters * _FP8_BYTES if fp8_weights else arch.weight_bytes
    kv_per_token = kv_bytes_per_token_per_rank(arch, tp) * (_FP8_BYTES / arch.dtype_bytes if fp8_kv else 1)
    return (weights / tp + max(1, batch) * context_tokens * kv_per_token) / HBM_BYTES_PER_S[gpu]


def prefill_floor_s(arch: ModelArchitecture, *, gpu: str, tp: int, tokens: int, fp8_weights: bool = False) -> float:
    """One prefill of ``tokens``: its FLOPs over ``tp`` GPUs at dense peak.

    The planner's count less the embedding and the LM head (``vocab x hidden`` each): the first is a lookup,
    and vLLM computes logits for the last token only, so neither multiplies by ``tokens``.
    """
    embeddings = 2 * 2.0 * arch.vocab_size * arch.hidden_size * tokens
    return max(0.0, prefill_flops(arch, tokens) - embeddings) / (tp * _peak_flops(gpu, fp8=fp8_weights))
