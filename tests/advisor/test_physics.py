"""The physical floors calibration bounds its factors by, worked by hand for Llama 3.3 70B at TP 8.

The audit's own arithmetic (5.6 / 6.0 / 6.8 ms decode on H100, 73.6 ms prefill) is within 3 % of these:
it counts a 4,096-token context at batch 32.
"""

from __future__ import annotations

import pytest

from hyperpod_dpd.advisor.physics import decode_floor_s, prefill_floor_s
from hyperpod_dpd.spec.architecture import PRESETS

LLAMA_70B = PRESETS["llama-3.3-70b"]
CONTEXT = 4096 + 128  # the middle of a 4,096 / 256 request's decode


PARAMETERS = 70_553_706_496  # the preset's, from the model's safetensors index
KV_BYTES_PER_TOKEN_PER_GPU = 2 * 80 * 1 * 128 * 2  # K and V, 80 layers, 8 KV heads over 8 GPUs, head 128, BF16
HBM = {"H100": 3.35e12, "H200": 4.8e12}


@pytest.mark.parametrize(("gpu", "batch", "audit_ms"), [
    ("H100", 8, 5.6), ("H100", 16, 6.0), ("H100", 32, 6.8),
    ("H200", 8, 3.9), ("H200", 16, 4.2), ("H200", 32, 4.8),
])
def test_the_decode_floor_is_the_weights_and_kv_over_hbm(gpu: str, batch: int, audit_ms: float) -> None:
    by_hand = (PARAMETERS * 2 / 8 + batch * CONTEXT * KV_BYTES_PER_TOKEN_PER_GPU) / HBM[gpu]
    floor = decode_floor_s(LLAMA_70B, gpu=gpu, tp=8, batch=batch, context_tokens=CONTEXT)
    assert floor == pytest.approx(by_hand, rel=1e-9)
    assert floor * 1000 == pytest.approx(audit_ms, rel=0.03)


def test_the_prefill_floor_is_the_flops_over_peak_on_either_hopper() -> None:
    tokens = 4096
    # GEMMs of every weight but the embedding and the LM head (logits for the last token only), causal attention
    flops = 2 * (PARAMETERS - 2 * 128_256 * 8192) * tokens + 2 * 80 * tokens**2 * 64 * 128
    for gpu in ("H100", "H200"):
        floor = prefill_floor_s(LLAMA_70B, gpu=gpu, tp=8, tokens=tokens)
        assert floor == pytest.approx(flops / (8 * 989e12), rel=1e-9)
        assert floor * 1000 == pytest.approx(73.6, rel=0.03)


def test_fp8_halves_what_a_step_must_move_and_compute() -> None:
    bf16 = decode_floor_s(LLAMA_70B, gpu="H100", tp=8, batch=8, context_tokens=CONTEXT)
    fp8 = decode_floor_s(LLAMA_70B, gpu="H100", tp=8, batch=8, context_tokens=CONTEXT, fp8_weights=True,
                         fp8_kv=True)
    assert fp8 == pytest.approx(bf16 / 2, rel=0.01)
    assert prefill_floor_s(LLAMA_70B, gpu="H100", tp=8, tokens=4096, fp8_weights=True) == pytest.approx(
        prefill_floor_s(LLAMA_70B, gpu="H100", tp=8, tokens=4096) / 2)
