"""What AWS published for DPD on HyperPod, point by point, and how far a prediction is from each point.

The AWS blog on DPD for HyperPod inference (Llama 3.3 70B Instruct, TP 8, one prefill and one decode
node against one aggregated node, genai-bench 4,096 input / 256 output tokens, concurrency 8, 16 and
32; ml.p5.48xlarge for H100 and ml.p5en.48xlarge for H200) publishes relative changes only:

- TPOT 22 % lower at concurrency 8 to 66 % lower at 32 on H100, 28 % to 48 % on H200 (16 not given);
- output throughput "up to" 35 % higher on H100 and 64 % on H200, read as a bound at every point;
- median end-to-end latency 14-32 % lower on H100 and 29-41 % on H200, read as a range at every point.

:func:`miss` is the distance of a predicted change from its published figure, bound or range, in
points (0 or less: inside). The anchor test holds every point to a tolerance and pins the misses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_dpd.spec.instances import InstanceType

GPUS: dict[str, InstanceType] = {"H100": InstanceType.P5_48XLARGE, "H200": InstanceType.P5EN_48XLARGE}
CONCURRENCY = (8, 16, 32)
ISL, OSL = 4096, 256
TPOT, THROUGHPUT, E2E = "TPOT", "throughput", "E2E"
# The limits every comparison with these points is held to, in points of the published change. No point
# beyond 10: the anchor test's tolerance, and the size of the smallest published gain (TPOT -22 %) read at
# half. A mean of 5: each figure is one genai-bench run with no error bars, and 5 points is about what two
# runs of one closed-loop level differ by on a shared cluster, so a model within it is as close as the
# data can tell.
TARGET_MAX = 0.10
TARGET_MEAN = 0.05


@dataclass(frozen=True, kw_only=True)
class Published:
    """One published figure: a change (``exact``), an upper bound (``at_most``) or a range (``low``-``high``)."""

    gpu: str
    metric: str
    concurrency: int
    exact: float | None = None
    at_most: float | None = None
    low: float | None = None
    high: float | None = None

    def describe(self) -> str:
        if self.exact is not None:
            return f"{self.exact * 100:+.0f} %"
        if self.at_most is not None:
            return f"at most {self.at_most * 100:+.0f} %"
        assert self.low is not None and self.high is not None
        return f"{self.low * 100:+.0f} % to {self.high * 100:+.0f} %"

    def ratio_error(self, predicted: float) -> float:
        """How far the predicted ratio (DPD over baseline) is from the nearest published one, relative (0 inside)."""
        if self.miss(predicted) <= 0:
            return 0.0
        nearest = self.exact if self.exact is not None else self.at_most
        if nearest is None:
            assert self.low is not None and self.high is not None
            nearest = self.low if predicted < self.low else self.high
        return abs((1 + nearest) / (1 + predicted) - 1)

    def miss(self, predicted: float) -> float:
        """Points outside the figure (a change of -0.32 against -0.22 misses by 0.10)."""
        if self.exact is not None:
            return abs(predicted - self.exact)
        if self.at_most is not None:
            return predicted - self.at_most
        assert self.low is not None and self.high is not None
        return max(self.low - predicted, predicted - self.high)


_TPOT = {"H100": {8: -0.22, 32: -0.66}, "H200": {8: -0.28, 32: -0.48}}
_THROUGHPUT_MAX = {"H100": 0.35, "H200": 0.64}
_E2E = {"H100": (-0.32, -0.14), "H200": (-0.41, -0.29)}

POINTS: tuple[Published, ...] = tuple(
    point for gpu in GPUS for c in CONCURRENCY for point in (
        *([Published(gpu=gpu, metric=TPOT, concurrency=c, exact=_TPOT[gpu][c])] if c in _TPOT[gpu] else []),
        Published(gpu=gpu, metric=THROUGHPUT, concurrency=c, at_most=_THROUGHPUT_MAX[gpu]),
        Published(gpu=gpu, metric=E2E, concurrency=c, low=_E2E[gpu][0], high=_E2E[gpu][1]),
    ))


def model_errors(predicted: Mapping[tuple[str, str, int], float]) -> tuple[float, float]:
    """The model's root-mean-square ratio error over the published points: (TPOT, end to end).

    ``predicted`` maps (GPU, metric, concurrency) to the predicted change. The TPOT figure reads the TPOT
    points; the end-to-end one reads the throughput and E2E points, which carry TTFT and the queue. A point
    inside its published figure counts as 0. These are what the uncalibrated ranges are widened by
    (:data:`MODEL_TPOT_ERROR`, :data:`MODEL_E2E_ERROR`, pinned by the anchor test).
    """
    def rms(metrics: tuple[str, ...]) -> float:
        errors = [p.ratio_error(predicted[(p.gpu, p.metric, p.concurrency)]) for p in POINTS if p.metric in metrics]
        return math.sqrt(sum(e * e for e in errors) / len(errors))

    return rms((TPOT,)), rms((THROUGHPUT, E2E))


# What the uncalibrated model misses against the published points (:func:`model_errors` of the anchor
# table): a published ratio cannot say whether DPD or the baseline is off, so both layouts' ranges are
# widened by it. The largest single TPOT error is H200's at concurrency 32 (0.52 published over 0.31
# predicted, +67 %), the largest end-to-end one H100's throughput at 16 (-24 %).
MODEL_TPOT_ERROR = 0.35
MODEL_E2E_ERROR = 0.11


# The blog's layout: Llama 3.3 70B's shape at TP 8, one prefiller and one decoder against one aggregated node.
BLOG_ARCHITECTURE = "llama-3.3-70b"
BLOG_TP = 8
# How far a set-up may be from the blog's and still be read against it: prompts and outputs within a factor
# of 2 of 4,096 / 256, concurrency within a factor of 2 of the published 8-32. Beyond that the published
# changes say nothing about the prediction.
NEAR_FACTOR = 2.0


def nearest(gpu: str, metric: str, concurrency: int) -> Published | None:
    """The published ``metric`` on ``gpu`` at the published concurrency nearest ``concurrency`` (by ratio),
    or ``None`` when that concurrency is out of reach or has no such figure (TPOT at 16)."""
    if not CONCURRENCY[0] / NEAR_FACTOR <= concurrency <= CONCURRENCY[-1] * NEAR_FACTOR:
        return None
    closest = min(CONCURRENCY, key=lambda c: (abs(math.log(concurrency / c)), c))
    found = [p for p in POINTS if (p.gpu, p.metric, p.concurrency) == (gpu, metric, closest)]
    return found[0] if found else None


def near_the_blog(*, isl: int, osl: int) -> bool:
    """Whether a request shape is close enough to the blog's 4,096 / 256 for its figures to say something."""
    return all(1 / NEAR_FACTOR <= ours / theirs <= NEAR_FACTOR for ours, theirs in ((isl, ISL), (osl, OSL)))
