"""How far DPD-only corrections fitted on one GPU's published points carry to the other GPU's.

The model's DPD-only costs that have a source (the KV transfer at the node's EFA line rate, the decoder's
batch while requests wait, the prefiller's queue) do not reach the published figures (docs/advise.md,
"Checked against the published measurements"). The rest is fitted here, honestly: three DPD-only
corrections, each a cost DPD pays and the aggregated baseline does not,

- ``prefill``: the prefiller's step beyond the kernels' (the blog ran it with ``--enforce-eager``, and
  LMCache's layer-wise put runs beside every layer);
- ``decode``: the decoder's step beyond the kernels' (LMCache copying arriving KV into the running batch);
- ``overhead_s``: seconds per request outside the engines (the router's second hop, LMCache's put/get
  hand-shake),

fitted on the 8 points of one GPU by a coordinate search over :data:`GRID`, then used to predict the
other GPU's 8 points. A correction that is a real cost of DPD carries from H100 to H200 (the same
software on a GPU with the same tensor cores and more HBM); one that only absorbs one run's noise does
not. :data:`TARGET_MEAN` and :data:`TARGET_MAX` are the targets the held-out figures are read against.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from hyperpod_dpd.advisor.comparison import Advice, advise
from hyperpod_dpd.advisor.published import (
    CONCURRENCY,
    E2E,
    GPUS,
    ISL,
    OSL,
    POINTS,
    TARGET_MAX,
    TARGET_MEAN,
    THROUGHPUT,
    TPOT,
    Published,
)
from hyperpod_dpd.advisor.steps import AIC_DECODE_SCALE, AIC_PREFILL_SCALE, PhaseFactors
from hyperpod_dpd.advisor.traffic import Traffic
from hyperpod_dpd.spec.defaults import default_spec

# The corrections tried, each a multiplier of the AIConfigurator-corrected kernels (1 = no DPD-only cost)
# or seconds per request. The ranges stop where the correction would no longer be a plausible software
# cost: a prefill 80 % slower than its kernels, a decode step 50 % slower, half a second per request.
GRID: Mapping[str, tuple[float, ...]] = {
    "prefill": tuple(round(1.0 + 0.05 * i, 2) for i in range(17)),
    "decode": tuple(round(1.0 + 0.05 * i, 2) for i in range(11)),
    "overhead_s": (0.0, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5),
}
ROUNDS = 2
Key = tuple[str, str, int]


@dataclass(frozen=True, kw_only=True)
class Corrections:
    """DPD-only corrections: prefill and decode-step multipliers and seconds per request."""

    prefill: float = 1.0
    decode: float = 1.0
    overhead_s: float = 0.0

    def factors(self) -> PhaseFactors:
        """The advisor's factors with these corrections on DPD only (the baseline keeps the defaults)."""
        return PhaseFactors(prefill=AIC_PREFILL_SCALE * self.prefill, decode=AIC_DECODE_SCALE * self.decode,
                            overhead_s=self.overhead_s, aggregated=PhaseFactors(),
                            source=f"fitted to AWS's published points: {self.describe()}")

    def describe(self) -> str:
        return (f"DPD prefill x{self.prefill:.2f}, decode step x{self.decode:.2f}, "
                f"+{self.overhead_s * 1000:.0f} ms per request")


@dataclass(frozen=True, kw_only=True)
class Score:
    """The misses (points, 0 inside the figure) of one GPU's published points."""

    misses: Mapping[Key, float]

    @property
    def mean(self) -> float:
        return sum(self.misses.values()) / len(self.misses)

    @property
    def worst(self) -> float:
        return max(self.misses.values())

    @property
    def meets_target(self) -> bool:
        return self.mean <= TARGET_MEAN and self.worst <= TARGET_MAX


@dataclass(frozen=True, kw_only=True)
class HeldOut:
    """Corrections fitted on ``fitted_on`` and their score there and on ``predicted``."""

    fitted_on: str
    predicted: str
    corrections: Corrections
    in_sample: Score
    held_out: Score


def blog_advice(gpu: str, factors: PhaseFactors | None = None) -> Advice:
    """The blog's set-up on ``gpu``: the default spec against one aggregated node at 8, 16 and 32 clients."""
    spec = replace(default_spec(), instance_type=GPUS[gpu])
    return advise(spec, Traffic(isl=ISL, osl=OSL, concurrency=CONCURRENCY), baseline_nodes=1, factors=factors,
                  thorough=False)


def changes(advice: Advice) -> dict[tuple[str, int], float]:
    """DPD's predicted change of every metric at every concurrency (mean E2E: the blog's is the median)."""
    found: dict[tuple[str, int], float] = {}
    for point in advice.points:
        dpd, agg = point.disaggregated, point.aggregated
        found[(TPOT, point.concurrency)] = dpd.tpot_s / agg.tpot_s - 1
        found[(THROUGHPUT, point.concurrency)] = dpd.output_tokens_per_s / agg.output_tokens_per_s - 1
        found[(E2E, point.concurrency)] = dpd.e2e_s / agg.e2e_s - 1
    return found


def points_of(gpu: str) -> tuple[Published, ...]:
    return tuple(point for point in POINTS if point.gpu == gpu)


@functools.cache
def score(gpu: str, corrections: Corrections) -> Score:
    """``gpu``'s published points against the blog's set-up with ``corrections`` (cached: a fit revisits them)."""
    predicted = changes(blog_advice(gpu, corrections.factors()))
    return Score(misses={(p.gpu, p.metric, p.concurrency): max(0.0, p.miss(predicted[(p.metric, p.concurrency)]))
                         for p in points_of(gpu)})


def fit(gpu: str, *, evaluate: Callable[[str, Corrections], Score] = score) -> tuple[Corrections, Score]:
    """The corrections with the least mean miss on ``gpu``'s points (the worst miss breaks ties).

    A coordinate search: each correction in turn over its grid, the others held, :data:`ROUNDS` times.
    """
    best = Corrections()
    best_score = evaluate(gpu, best)
    for _ in range(ROUNDS):
        for name, values in GRID.items():
            for value in values:
                trial = replace(best, **{name: value})
                trial_score = evaluate(gpu, trial)
                if (trial_score.mean, trial_score.worst) < (best_score.mean - 1e-9, best_score.worst):
                    best, best_score = trial, trial_score
    return best, best_score


def held_out(fitted_on: str, *, evaluate: Callable[[str, Corrections], Score] = score) -> HeldOut:
    """Fit on ``fitted_on``'s points; predict the other GPU's."""
    (other,) = (gpu for gpu in GPUS if gpu != fitted_on)
    corrections, in_sample = fit(fitted_on, evaluate=evaluate)
    return HeldOut(fitted_on=fitted_on, predicted=other, corrections=corrections, in_sample=in_sample,
                   held_out=evaluate(other, corrections))
