"""Intervals for a difference between two endpoints, so an A/B never calls noise a gain.

Two methods, each named in every interval it makes:

- ``welch-t``: with two or more repeats of a level on each side, the 95% Welch t-interval of the
  difference of the repeats' means (each repeat gives one value per metric). This is the one the
  A/B (:mod:`~hyperpod_dpd.benchmark.report.ab`) makes its verdicts from: it holds the shift from one run
  of an endpoint to the next.
- ``bootstrap``: the 95% percentile bootstrap of the difference of two samples' medians (2,000
  resamples from a fixed seed, so the same input gives the same interval). Over one run's requests
  it measures how those requests scatter, not how a second run lands (two runs of one stub differed
  by 7 ms at a TTFT p50 of 509 ms, outside such an interval), so the A/B makes no verdict from it.

An interval that holds zero is "no difference": the data cannot tell the two endpoints apart.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean, median, variance

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0
WELCH = "welch-t"
BOOTSTRAP = "bootstrap"


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A ``confidence`` interval of ``a - b`` and the method that made it."""

    low: float
    high: float
    method: str
    confidence: float = CONFIDENCE

    @property
    def spans_zero(self) -> bool:
        return self.low <= 0.0 <= self.high

    def as_dict(self) -> dict[str, float | str]:
        return {"low": self.low, "high": self.high, "method": self.method, "confidence": self.confidence}


def _t_pdf(x: float, df: float) -> float:
    log = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log - (df + 1) / 2 * math.log1p(x * x / df))


def _t_cdf_above_zero(x: float, df: float, steps: int = 400) -> float:
    """P(0 <= T <= x) by Simpson's rule (x >= 0)."""
    h = x / steps
    total = _t_pdf(0.0, df) + _t_pdf(x, df)
    total += sum((4 if i % 2 else 2) * _t_pdf(i * h, df) for i in range(1, steps))
    return total * h / 3


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile for ``p`` in (0.5, 1) and ``df`` > 0 degrees of freedom (bisection on the CDF)."""
    if not 0.5 < p < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < p < 1 and df > 0, not p={p}, df={df}")
    target, low, high = p - 0.5, 0.0, 1.0
    while _t_cdf_above_zero(high, df) < target:
        high *= 2
    for _ in range(45):  # the bracket halves each time: 2**-45 of it
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf_above_zero(middle, df) < target else (low, middle)
    return (low + high) / 2


def welch_interval(a: Sequence[float], b: Sequence[float], *, confidence: float = CONFIDENCE) -> Interval | None:
    """The Welch t-interval of ``mean(a) - mean(b)``; None with fewer than two values on either side."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = variance(a) / len(a), variance(b) / len(b)
    difference = mean(a) - mean(b)
    if va + vb == 0:
        return Interval(low=difference, high=difference, method=WELCH, confidence=confidence)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(0.5 + confidence / 2, df) * math.sqrt(va + vb)
    return Interval(low=difference - half, high=difference + half, method=WELCH, confidence=confidence)


def bootstrap_median_interval(a: Sequence[float], b: Sequence[float], *, confidence: float = CONFIDENCE,
                              resamples: int = RESAMPLES, seed: int = SEED) -> Interval | None:
    """The percentile bootstrap interval of ``median(a) - median(b)``; None when either side is empty."""
    if not a or not b:
        return None
    rng = random.Random(seed)
    differences = sorted(median(rng.choices(a, k=len(a))) - median(rng.choices(b, k=len(b)))
                         for _ in range(resamples))
    tail = (1 - confidence) / 2
    low = differences[math.floor(tail * (resamples - 1))]
    high = differences[math.ceil((1 - tail) * (resamples - 1))]
    return Interval(low=low, high=high, method=BOOTSTRAP, confidence=confidence)
