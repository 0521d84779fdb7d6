"""DPD against its aggregated twin, per load level, reported the way the AWS blog reports DPD's gain.

Changes are ``(dpd - aggregated) / aggregated``: negative TPOT, TTFT and end-to-end changes and a
positive throughput change favour DPD. The blog (Llama 3.3 70B, 4,096/256, concurrency 8-32)
measured TPOT 22-66% lower, output throughput up to 35-64% higher and TTFT slightly higher (the KV
transfer) with one prefill and one decode node against one aggregated node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.benchmark.results import BenchmarkResults
from hyperpod_dpd.columns import milliseconds, percent, render_columns
from hyperpod_dpd.load_point import Load, column_header


def change(new: float | None, old: float | None) -> float | None:
    """Percent change from ``old`` to ``new``; None when either is missing or ``old`` is 0."""
    if new is None or old is None or old == 0:
        return None
    return (new - old) / old * 100


@dataclass(frozen=True, kw_only=True)
class AbRow:
    load: Load
    tpot_p50: tuple[float | None, float | None]
    ttft_p50: tuple[float | None, float | None]
    e2e_p50: tuple[float | None, float | None]
    output_tokens_per_s: tuple[float, float]

    def changes(self) -> dict[str, float | None]:
        return {"tpot_p50": change(*self.tpot_p50), "ttft_p50": change(*self.ttft_p50),
                "e2e_p50": change(*self.e2e_p50), "output_tokens_per_s": change(*self.output_tokens_per_s)}

    def as_dict(self) -> dict[str, Any]:
        pairs = {"tpot_p50_s": self.tpot_p50, "ttft_p50_s": self.ttft_p50, "e2e_p50_s": self.e2e_p50,
                 "output_tokens_per_s": self.output_tokens_per_s}
        return {**self.load.as_dict(),
                **{key: {"dpd": dpd, "aggregated": agg} for key, (dpd, agg) in pairs.items()},
                "change_percent": self.changes()}


def compare_ab(dpd: BenchmarkResults, aggregated: BenchmarkResults) -> list[AbRow]:
    """One row per load level both runs measured (with at least one completed request each)."""
    rows = []
    for level in dpd.levels:
        base = aggregated.level(level.load)
        if base is None or not level.completed or not base.completed:
            continue
        rows.append(AbRow(load=level.load, tpot_p50=(level.tpot.p50, base.tpot.p50),
                          ttft_p50=(level.ttft.p50, base.ttft.p50), e2e_p50=(level.e2e.p50, base.e2e.p50),
                          output_tokens_per_s=(level.output_tokens_per_s, base.output_tokens_per_s)))
    return rows


def render_ab(rows: Sequence[AbRow]) -> str:
    headers = (column_header([row.load for row in rows]), "TPOT p50 ms DPD/AGG", "TPOT", "OUT tok/s DPD/AGG",
               "OUT tok/s", "TTFT p50 ms DPD/AGG",
               "TTFT", "E2E p50")
    table = []
    for row in rows:
        changes = row.changes()
        table.append([
            row.load.cell(), "/".join(milliseconds(v) for v in row.tpot_p50), percent(changes["tpot_p50"]),
            "/".join(f"{v:,.0f}" for v in row.output_tokens_per_s), percent(changes["output_tokens_per_s"]),
            "/".join(milliseconds(v) for v in row.ttft_p50), percent(changes["ttft_p50"]),
            percent(changes["e2e_p50"])])
    if not table:
        return "DPD against aggregated: no load level completed on both endpoints"
    title = ("DPD against the aggregated twin (change = (DPD - aggregated) / aggregated; lower TPOT, TTFT and E2E "
             "and higher throughput favour DPD)")
    return "\n".join([title, *render_columns(headers, table)])
