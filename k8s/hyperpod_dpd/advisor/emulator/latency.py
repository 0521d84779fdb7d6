"""Latency per layout and arrival rate, precomputed from the advisor's queueing model and interpolated.

An event simulation per emulated step would take minutes for a day; instead, for each prefill x decode
replica count the emulator meets, :class:`QueueingLatency` runs the same open-loop simulation ``advise
--request-rate`` runs (:func:`hyperpod_dpd.advisor.queueing.open_loop` on
:func:`~hyperpod_dpd.advisor.steps.dpd_stations`) at :data:`LOAD_GRID` shares of that layout's capacity
once, and reads any rate between two grid points by linear interpolation. Above the last grid point
the emulator does not read the curve: it carries the excess as a backlog (``emulator``).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from hyperpod_dpd.advisor import queueing
from hyperpod_dpd.advisor.queueing import QUANTILES, Stations

# Shares of capacity the curve is simulated at; 0.9 is advise's own near-capacity limit
# (comparison.NEAR_CAPACITY), above which a 4,000-request open loop has not settled.
LOAD_GRID = (0.05, 0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9)
MAX_LOAD = LOAD_GRID[-1]


@dataclass(frozen=True, kw_only=True)
class LatencyPoint:
    """What requests see at one rate on one layout (seconds).

    :param ttft_quantiles: TTFT at :data:`~hyperpod_dpd.advisor.queueing.QUANTILES`. :default: - none: the
        distribution is read as exponential through ``ttft_p90_s`` (an M/M/1 sojourn), for analytic stand-ins
    :param tpot_quantiles: the requests' TPOT likewise. :default: - none: exponential through ``tpot_p90_s``
    """

    ttft_p90_s: float
    tpot_s: float
    tpot_p90_s: float
    queue_s: float
    ttft_quantiles: tuple[float, ...] = ()
    tpot_quantiles: tuple[float, ...] = ()

    def ttft_share_within(self, target_s: float) -> float:
        """The share of requests whose TTFT is at most ``target_s``."""
        return share_within(self.ttft_quantiles, p90=self.ttft_p90_s, target=target_s)

    def tpot_share_within(self, target_s: float) -> float:
        """The share of requests whose TPOT is at most ``target_s``."""
        return share_within(self.tpot_quantiles, p90=self.tpot_p90_s, target=target_s)


def share_within(quantiles: tuple[float, ...], *, p90: float, target: float) -> float:
    """The distribution's CDF at ``target``: linear between the stored quantiles, else exponential through ``p90``."""
    if not quantiles:
        if not math.isfinite(p90) or target <= 0:
            return 0.0
        return 1.0 - 0.1 ** (target / p90) if p90 > 0 else 1.0
    if target < quantiles[0]:
        return 0.0
    if target >= quantiles[-1]:
        return 1.0
    high = bisect.bisect_right(quantiles, target)
    low = high - 1
    span = quantiles[high] - quantiles[low]
    weight = (target - quantiles[low]) / span if span > 0 else 1.0
    return QUANTILES[low] + weight * (QUANTILES[high] - QUANTILES[low])


class LatencyModel(Protocol):
    """Latency of ``prefill`` x ``decode`` replicas: their capacity, and the figures below :data:`MAX_LOAD`
    of it."""

    def capacity(self, prefill: int, decode: int) -> float:
        """Requests per second the layout completes when saturated."""
        ...

    def at(self, prefill: int, decode: int, rate: float) -> LatencyPoint:
        """The figures at ``rate`` requests per second (at most ``MAX_LOAD x capacity``)."""
        ...


@dataclass
class QueueingLatency:
    """:class:`LatencyModel` on the advisor's queueing model, one curve per layout, built when first read.

    :param stations: the DPD stations of ``prefill`` x ``decode`` replicas.
    :param osl: output tokens per request.
    :param requests: arrivals per simulated grid point. :default: ``queueing.OPEN_LOOP_REQUESTS``, as advise
    """

    stations: Callable[[int, int], Stations]
    osl: int
    requests: int = queueing.OPEN_LOOP_REQUESTS
    _curves: dict[tuple[int, int], tuple[float, tuple[LatencyPoint, ...]]] = field(default_factory=dict, repr=False)

    def _curve(self, prefill: int, decode: int) -> tuple[float, tuple[LatencyPoint, ...]]:
        key = (prefill, decode)
        if key not in self._curves:
            stations = self.stations(prefill, decode)
            limit = queueing.capacity(stations, osl=self.osl)
            points = []
            for share in LOAD_GRID:
                found = queueing.open_loop(stations, osl=self.osl, rate=share * limit, capacity_per_s=limit,
                                           requests=self.requests)
                points.append(LatencyPoint(ttft_p90_s=found.ttft_p90_s, tpot_s=found.tpot_s,
                                           tpot_p90_s=found.tpot_p90_s, queue_s=found.queue_s,
                                           ttft_quantiles=found.ttft_quantiles, tpot_quantiles=found.tpot_quantiles))
            self._curves[key] = (limit, tuple(points))
        return self._curves[key]

    def capacity(self, prefill: int, decode: int) -> float:
        return self._curve(prefill, decode)[0]

    def at(self, prefill: int, decode: int, rate: float) -> LatencyPoint:
        limit, points = self._curve(prefill, decode)
        return interpolate(LOAD_GRID, points, rate / limit if limit > 0 else math.inf)

    @property
    def layouts(self) -> tuple[tuple[int, int], ...]:
        """The layouts simulated so far."""
        return tuple(sorted(self._curves))


def interpolate(grid: tuple[float, ...], points: tuple[LatencyPoint, ...], share: float) -> LatencyPoint:
    """The point at ``share`` of capacity: flat below the grid's first share, linear between two, the last above."""
    if share <= grid[0]:
        return points[0]
    if share >= grid[-1]:
        return points[-1]
    high = bisect.bisect_left(grid, share)
    low = high - 1
    weight = (share - grid[low]) / (grid[high] - grid[low])
    a, b = points[low], points[high]

    def mix(name: str) -> float:
        return float(getattr(a, name)) * (1 - weight) + float(getattr(b, name)) * weight

    def mixed(first: tuple[float, ...], second: tuple[float, ...]) -> tuple[float, ...]:
        # quantile by quantile (the distributions' mixture in the quantile domain); empty unless both have them
        if len(first) != len(second):
            return ()
        return tuple(x * (1 - weight) + y * weight for x, y in zip(first, second, strict=True))

    return LatencyPoint(ttft_p90_s=mix("ttft_p90_s"), tpot_s=mix("tpot_s"), tpot_p90_s=mix("tpot_p90_s"),
                        queue_s=mix("queue_s"), ttft_quantiles=mixed(a.ttft_quantiles, b.ttft_quantiles),
                        tpot_quantiles=mixed(a.tpot_quantiles, b.tpot_quantiles))
