"""Per-step engine timings from AIConfigurator's kernel data, and the serving layouts built on them.

Only AIConfigurator's *static* estimates are used: the time of one prefill of ``n`` tokens (batch 1)
and of one decode step at batch ``b``, for the exact model, GPU, TP and quantization. Its scheduling
heuristics (the TTFT x1.8 queueing fudge, the x0.9/x0.92 rate-matching derates, the agg TTFT
dispatch term) are not used: queueing is :mod:`hyperpod_dpd.advisor.queueing`'s job, the same for
both layouts. A vLLM step that mixes a prefill chunk with ``d`` decodes is costed as the chunk's
prefill plus what ``d`` decodes add beyond one (the weights are read once per step either way).
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from hyperpod_dpd.advisor.engine import EngineSettings
from hyperpod_dpd.advisor.published import MODEL_E2E_ERROR, MODEL_TPOT_ERROR
from hyperpod_dpd.advisor.queueing import Stations
from hyperpod_dpd.advisor.systems import Target

# The batch sizes at which the decode step is measured; between two, the time is interpolated linearly.
_DECODE_GRID = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
# AIConfigurator's own per-phase latency corrections for its static estimates (aiconfigurator 0.12.0,
# ``aiconfigurator/cli/api.py``: DEFAULT_PREFILL_LATENCY_CORRECTION_SCALE = 1.1 and
# DEFAULT_DECODE_LATENCY_CORRECTION_SCALE = 1.08). They are the uncalibrated prefill and decode factors.
AIC_PREFILL_SCALE = 1.1
AIC_DECODE_SCALE = 1.08


@dataclass(frozen=True, kw_only=True)
class PhaseFactors:
    """Corrections to the kernel timings: prefill and decode-step multipliers, and seconds per request.

    :param prefill: multiplies every prefill time. :default: 1.1 (AIConfigurator's own correction)
    :param decode: multiplies every decode step. :default: 1.08 (AIConfigurator's own correction)
    :param overhead_s: added to every request outside the engines (router, HTTP). :default: 0
    :param source: where the factors come from, printed with every result.
    :param ttft_residual: the model's relative TTFT error, by which the TTFT range is widened on each side: a
        calibration's mean error after the fit, or uncalibrated the model's error against AWS's published
        points (:data:`hyperpod_dpd.advisor.published.MODEL_E2E_ERROR`). :default: 0.11
    :param tpot_residual: the same for TPOT (:data:`hyperpod_dpd.advisor.published.MODEL_TPOT_ERROR`). :default: 0.35
    :param aggregated: the aggregated baseline's own factors, when it was calibrated apart from DPD (what
        only DPD pays, the transfer and the router hop, must not slow the baseline). :default: None (the same)
    """

    prefill: float = AIC_PREFILL_SCALE
    decode: float = AIC_DECODE_SCALE
    overhead_s: float = 0.0
    source: str = "AIConfigurator's default latency corrections (prefill x1.1, decode step x1.08), uncalibrated"
    aggregated: PhaseFactors | None = None
    ttft_residual: float = MODEL_E2E_ERROR
    tpot_residual: float = MODEL_TPOT_ERROR

    def for_aggregated(self) -> PhaseFactors:
        """The factors the aggregated baseline runs with."""
        return self.aggregated or self

    def describe(self) -> str:
        own = (f"prefill x{self.prefill:.3g}, decode step x{self.decode:.3g}, +{self.overhead_s * 1000:.0f} ms per "
               f"request: {self.source}")
        if self.aggregated is None:
            return own
        return f"DPD {own}; aggregated {self.aggregated.describe()}"

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {"prefill": round(self.prefill, 4), "decode": round(self.decode, 4),
                                    "overhead_s": round(self.overhead_s, 4), "source": self.source}
        if self.aggregated is not None:
            found["aggregated"] = self.aggregated.to_json()
        return found


class StepTimes:
    """Kernel step times (seconds, uncorrected) of one model on one GPU at one TP and quantization."""

    def __init__(self, target: Target, *, tp: int, engine: EngineSettings, isl: int, osl: int,
                 run: functools.partial[object]) -> None:
        self.target = target
        self.tp = tp
        self.engine = engine
        self.isl = isl
        self.osl = osl
        self._run = run

    @functools.cache  # noqa: B019 - one StepTimes per layout, kept for the run
    def prefill_s(self, tokens: int) -> float:
        """One prefill of ``tokens`` tokens at batch 1."""
        return self._ms(mode="static_ctx", isl=tokens, osl=2, batch_size=1, key="context_latency") / 1000

    @functools.cache  # noqa: B019
    def _decode_at(self, batch: int) -> float:
        return self._ms(mode="static_gen", isl=self.isl, osl=self.osl, batch_size=batch, key="tpot") / 1000

    def decode_step_s(self, batch: int) -> float:
        """One decode step with ``batch`` sequences (their context growing from ``isl`` to ``isl + osl``)."""
        batch = max(1, batch)
        if batch >= _DECODE_GRID[-1]:
            return self._decode_at(_DECODE_GRID[-1]) * batch / _DECODE_GRID[-1]
        high = bisect.bisect_left(_DECODE_GRID, batch)
        if _DECODE_GRID[high] == batch:
            return self._decode_at(batch)
        low_b, high_b = _DECODE_GRID[high - 1], _DECODE_GRID[high]
        low_t, high_t = self._decode_at(low_b), self._decode_at(high_b)
        return low_t + (high_t - low_t) * (batch - low_b) / (high_b - low_b)

    def _ms(self, *, mode: str, isl: int, osl: int, batch_size: int, key: str) -> float:
        result = self._run(mode=mode, isl=isl, osl=osl, batch_size=batch_size, tp_size=self.tp,
                           gemm_quant_mode=self.engine.gemm_quant_mode,
                           kvcache_quant_mode=self.engine.kvcache_quant_mode)
        return float(result.raw[key])  # type: ignore[attr-defined]


def dpd_stations(steps: StepTimes, factors: PhaseFactors, *, prefill_replicas: int, decode_replicas: int,
                 decode_slots: int, transfer_s: float, isl: int) -> Stations:
    """Prefillers (one prompt at a time), then decoders.

    A prompt longer than the batched-token limit is prefilled in chunks; its attention still covers
    the whole prompt, so the chunks together take about the whole prompt's prefill time.
    """
    prefill = factors.prefill * steps.prefill_s(isl)
    return Stations(prefill_lanes=prefill_replicas, decoders=decode_replicas, slots=decode_slots,
                    prefill_s=lambda _load: prefill,
                    tpot_s=lambda batch: factors.decode * steps.decode_step_s(batch),
                    handoff_s=transfer_s, overhead_s=factors.overhead_s)


def aggregated_stations(steps: StepTimes, factors: PhaseFactors, *, replicas: int, slots: int, isl: int,
                        osl: int) -> Stations:
    """vLLM engines that prefill and decode: a prefill chunk joins the running decodes in one step.

    A request's prefill takes ``chunks`` mixed steps; while ``n`` requests decode on the engine, the
    share of its steps that carry a chunk is ``n x chunks / (osl + chunks - 1)`` (each request brings
    its chunks once per lifetime of ``osl + chunks - 1`` steps), and those steps last as long as the
    chunk's prefill plus the extra decodes. That share is what slows aggregated TPOT as load grows.
    """
    budget = steps.engine.max_num_batched_tokens
    chunks = max(1, math.ceil(isl / budget))
    chunk_tokens = math.ceil(isl / chunks)
    chunk_s = mean_chunk_s(steps, chunks=chunks, chunk_tokens=chunk_tokens)

    def mixed_s(decodes: int) -> float:
        extra = steps.decode_step_s(decodes) - steps.decode_step_s(1) if decodes > 0 else 0.0
        return factors.prefill * chunk_s + factors.decode * extra

    def prefill_s(load: int) -> float:
        return chunks * mixed_s(load)

    def tpot_s(batch: int) -> float:
        share = min(1.0, batch * chunks / (osl + chunks - 1))
        return share * mixed_s(batch - 1) + (1 - share) * factors.decode * steps.decode_step_s(batch)

    return Stations(prefill_lanes=replicas, decoders=replicas, slots=slots, prefill_s=prefill_s, tpot_s=tpot_s,
                    overhead_s=factors.overhead_s, colocated=True)


def mean_chunk_s(steps: StepTimes, *, chunks: int, chunk_tokens: int) -> float:
    """One chunk of a chunked prefill, on average: chunk ``k`` attends over the ``k x chunk_tokens`` before it.

    Chunk ``k`` costs at least a prefill of ``chunk_tokens`` alone (its GEMMs and the step's fixed cost)
    and at least what it adds to a whole prefill of ``k`` chunks, ``prefill(k c) - prefill((k - 1) c)``,
    which carries the attention over the earlier chunks. So a 32k prompt in 8k chunks costs more
    than four 8k prefills, as the whole prompt's attention grows with its square.
    """
    alone = steps.prefill_s(chunk_tokens)
    added = [steps.prefill_s(k * chunk_tokens) - steps.prefill_s((k - 1) * chunk_tokens) for k in range(2, chunks + 1)]
    return (alone + sum(max(alone, step) for step in added)) / chunks

