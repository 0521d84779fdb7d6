"""Step times of a model outside AIConfigurator's data, by analogy to the nearest model it measured.

A step of the reference model takes AIConfigurator's measured time; the same step of the spec's model
takes that time scaled by the ratio of the two models' rooflines on the same GPUs, TP and precision:

* prefill of ``n`` tokens: the larger of its FLOPs (:func:`~hyperpod_dpd.planner.sizing.prefill_flops`)
  over the GPUs' dense peak and its weights over HBM bandwidth;
* decode step at batch ``b``: the larger of the weights plus ``b`` contexts of KV cache (mid-request,
  ``isl + osl / 2`` tokens) over HBM bandwidth and its FLOPs over the peak.

So the reference's measured efficiency (its time over its roofline) is carried over to the spec's
model. The peaks and bandwidths are NVIDIA's datasheet figures (``planner.assumptions``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from hyperpod_dpd.advisor.steps import StepTimes
from hyperpod_dpd.advisor.systems import analogy_distance
from hyperpod_dpd.planner.assumptions import HBM_TBPS, PEAK_DENSE_BF16_TFLOPS
from hyperpod_dpd.planner.sizing import kv_bytes_per_token_per_rank, prefill_flops
from hyperpod_dpd.spec.architecture import ModelArchitecture

# How much wider an estimate by analogy is, as a natural log of the ratio each side per unit of
# :func:`~hyperpod_dpd.advisor.systems.analogy_distance` (both terms added), plus a floor. Measured
# (tests/advisor/test_analogy.py enforces it): Llama 3.1 70B from Llama 3.1 8B's data and the other way
# round, TP 8, 4,096- and 8,192-token prefills and decode at batch 8-32, miss AIConfigurator's own
# timings by at most |ln| 0.64 (H200 decode at batch 8, +90 %; H100 at most +64 %) at distance 2.87
# (|ln 70.6/8.0| 2.17 + |ln 8/4| 0.69): 0.224 per unit, rounded up. The floor is a judgment, not a
# measurement: two models of equal size still differ in vocabulary and MLP width, which the distance
# does not see.
ANALOGY_SPREAD_PER_DISTANCE = 0.23
ANALOGY_SPREAD_FLOOR = 0.10


def analogy_spread(model: ModelArchitecture, reference: ModelArchitecture) -> float:
    """The band's extra width each side, as ``ln(high / point)``, for ``model`` estimated from ``reference``."""
    return ANALOGY_SPREAD_PER_DISTANCE * sum(analogy_distance(model, reference)) + ANALOGY_SPREAD_FLOOR


@dataclass(frozen=True, kw_only=True)
class Roofline:
    """The fastest one GPU group of ``tp`` GPUs can run a step: bytes over HBM, FLOPs over the peak."""

    tp: int
    peak_flops: float
    hbm_bytes_per_s: float
    weight_bytes_per_parameter: float | None = None
    kv_dtype: str | None = None

    @classmethod
    def of(cls, gpu_model: str, *, tp: int, fp8_weights: bool, fp8_kv: bool) -> Roofline:
        """The roofline of ``tp`` GPUs of ``gpu_model``; FP8 GEMMs run at twice the BF16 peak (NVIDIA's datasheets)."""
        peak = PEAK_DENSE_BF16_TFLOPS[gpu_model] * 1e12 * (2 if fp8_weights else 1)
        return cls(tp=tp, peak_flops=peak, hbm_bytes_per_s=HBM_TBPS[gpu_model] * 1e12,
                   weight_bytes_per_parameter=1.0 if fp8_weights else None, kv_dtype="fp8" if fp8_kv else None)

    def _weights(self, arch: ModelArchitecture) -> float:
        per_parameter = self.weight_bytes_per_parameter or arch.weight_bytes_per_parameter or arch.dtype_bytes
        return arch.num_parameters * per_parameter / self.tp

    def prefill_s(self, arch: ModelArchitecture, tokens: int) -> float:
        compute = prefill_flops(arch, tokens) / (self.tp * self.peak_flops)
        return max(compute, self._weights(arch) / self.hbm_bytes_per_s)

    def decode_step_s(self, arch: ModelArchitecture, *, batch: int, context: int) -> float:
        kv_arch = replace(arch, dtype=self.kv_dtype) if self.kv_dtype else arch
        read = self._weights(arch) + batch * context * kv_bytes_per_token_per_rank(kv_arch, self.tp)
        attention = 4.0 * arch.num_layers * context * arch.num_attention_heads * arch.head_dim
        flops = batch * (2.0 * arch.active_parameters + attention) / self.tp
        return max(read / self.hbm_bytes_per_s, flops / self.peak_flops)


class AnalogySteps(StepTimes):
    """``reference``'s measured step times scaled to ``model`` by the ratio of their rooflines."""

    def __init__(self, reference: StepTimes, *, model: ModelArchitecture, reference_model: ModelArchitecture,
                 gpu_model: str) -> None:
        super().__init__(reference.target, tp=reference.tp, engine=reference.engine, isl=reference.isl,
                         osl=reference.osl, run=reference._run)
        self.reference = reference
        self.model = model
        self.reference_model = reference_model
        engine = reference.engine
        self.roofline = Roofline.of(gpu_model, tp=reference.tp, fp8_weights=engine.gemm_quant_mode is not None,
                                    fp8_kv=engine.kvcache_quant_mode is not None)

    @functools.cache  # noqa: B019 - one AnalogySteps per layout, kept for the run
    def prefill_s(self, tokens: int) -> float:
        ratio = self.roofline.prefill_s(self.model, tokens) / self.roofline.prefill_s(self.reference_model, tokens)
        return self.reference.prefill_s(tokens) * ratio

    def decode_step_s(self, batch: int) -> float:
        batch = max(1, batch)
        context = self.isl + self.osl // 2
        ratio = (self.roofline.decode_step_s(self.model, batch=batch, context=context)
                 / self.roofline.decode_step_s(self.reference_model, batch=batch, context=context))
        return self.reference.decode_step_s(batch) * ratio
