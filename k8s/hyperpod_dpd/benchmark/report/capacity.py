"""Capacity at the spec's SLO: the highest measured load whose p90 TTFT and p90 TPOT meet the ``slo:`` targets.

The p90s are the client's, per level (its requests, warm-up left out where the client marks it). A
target the spec leaves unset always holds; a level with no answered request never meets one. The
levels are the ones measured, so the capacity is a lower bound on the load the endpoint carries
within the SLO: the next level up missed it, or was not run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.load_point import Load

Slo = tuple[float | None, float | None]  # TTFT and TPOT targets in seconds, from the spec's slo

# What the report says in place of the capacity when the spec sets no target (the default spec sets none).
NO_SLO = ("capacity at the spec's SLO: not measured, the spec sets no slo; set slo.ttft_ms and/or slo.tpot_ms in "
          "the spec (for example slo: {ttft_ms: 2000, tpot_ms: 50}) and the report names, per layout, the highest "
          "level whose client p90 TTFT and p90 TPOT meet them")


def meets(level: LevelResult, slo: Slo) -> bool:
    ttft, tpot = slo
    if not level.completed:
        return False
    return ((ttft is None or (level.ttft.p90 is not None and level.ttft.p90 <= ttft))
            and (tpot is None or (level.tpot.p90 is not None and level.tpot.p90 <= tpot)))


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """One layout's capacity: the highest level that met the SLO (None when none did), and every level's answer."""

    label: str
    slo: Slo
    load: Load | None
    met: tuple[tuple[Load, bool], ...]
    untrusted: frozenset[Load] = frozenset()  # levels with a trust warning: their figures are not the endpoint's

    @property
    def trusted(self) -> bool:
        return self.load is not None and self.load not in self.untrusted

    def render(self) -> str:
        ttft, tpot = self.slo
        targets = " and ".join(part for part in (
            None if ttft is None else f"TTFT p90 <= {ttft * 1e3:,.0f} ms",
            None if tpot is None else f"TPOT p90 <= {tpot * 1e3:,.1f} ms") if part)
        if self.load is None:
            return f"{self.label}: no measured level meets {targets}"
        above = [load for load, ok in self.met if Load.sort_key(load) > Load.sort_key(self.load)]
        beyond = f" (the next level, {above[0].describe()}, misses it)" if above else " (the highest level measured)"
        doubt = "; but that level cannot be trusted as measured (see its warnings)" if not self.trusted else ""
        return f"{self.label}: {self.load.describe()} meets {targets}{beyond}{doubt}"

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "slo": {"ttft_p90_s": self.slo[0], "tpot_p90_s": self.slo[1]},
                "capacity": None if self.load is None else self.load.as_dict(), "trusted": self.trusted,
                "levels": [{**load.as_dict(), "meets_slo": ok} for load, ok in self.met]}


def capacity_at_slo(label: str, results: BenchmarkResults, slo: Slo, *,
                    untrusted: frozenset[Load] = frozenset()) -> Capacity:
    """:param untrusted: levels a trust warning names, said beside the capacity. :default: - none"""
    met = tuple((level.load, meets(level, slo)) for level in results.levels)
    passing = [load for load, ok in met if ok]
    return Capacity(label=label, slo=slo, load=max(passing, key=Load.sort_key) if passing else None, met=met,
                    untrusted=untrusted)


def render_capacities(capacities: list[Capacity]) -> str:
    """The capacity of each layout, or :data:`NO_SLO` when there is none to find (the spec sets no target)."""
    if not capacities:
        return NO_SLO
    return "\n".join(["capacity at the spec's SLO (the client's p90 per level):",
                      *(f"  {capacity.render()}" for capacity in capacities)])
