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
