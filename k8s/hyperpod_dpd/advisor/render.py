"""Plain-text tables for an :class:`Advice` and a :class:`SearchResult`; JSON comes from their ``to_json``."""

from __future__ import annotations

import math
from collections.abc import Mapping

from hyperpod_dpd.advisor.comparison import ESTIMATE_NOTE, Advice
from hyperpod_dpd.advisor.estimates import Estimate
from hyperpod_dpd.advisor.search import SearchResult
from hyperpod_dpd.advisor.traffic import Sla
from hyperpod_dpd.columns import ms, render_columns

_HEADERS = ("layout", "nodes", "TTFT ms", "p90 ms", "queue ms", "TPOT ms", "E2E s", "out tok/s", "per GPU",
            "$/hour", "$/M tok")
SATURATED = "saturated"


def _ms(value: float, digits: int = 0) -> str:
    return SATURATED if math.isnan(value) else ms(value, digits=digits)  # NaN: the layout cannot sustain the load


def _usd(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


NO_TPOT = "n/a"


def _cells(label: str, e: Estimate) -> list[str]:
    tpot = NO_TPOT if e.sustains_load and math.isnan(e.tpot_s) else _ms(e.tpot_s, 1)
    return [label, str(e.nodes), _ms(e.ttft_s), _ms(e.ttft_p90_s), _ms(e.queue_s), tpot,
            SATURATED if math.isnan(e.e2e_s) else f"{e.e2e_s:.2f}", f"{e.output_tokens_per_s:,.0f}",
            f"{e.output_tokens_per_s_per_gpu:.1f}", _usd(e.usd_per_hour, 2), _usd(e.usd_per_million_output_tokens, 2)]


def _range(band: tuple[float, float] | None, digits: int) -> str:
    return "-" if band is None else f"{ms(band[0], digits=digits)}-{ms(band[1], digits=digits)}"


def _ranges(aggregated: Estimate, disaggregated: Estimate) -> list[str]:
    """TTFT and TPOT from the least to the most variable service times (and an analogy's error)."""
    if aggregated.ttft_band_s is None and disaggregated.ttft_band_s is None:
        return []
    return [f"  range (ms): TTFT aggregated {_range(aggregated.ttft_band_s, 0)}, DPD "
            f"{_range(disaggregated.ttft_band_s, 0)}; TPOT aggregated {_range(aggregated.tpot_band_s, 1)}, DPD "
            f"{_range(disaggregated.tpot_band_s, 1)}"]


def sla_text(sla: Sla) -> str:
    parts = [f"TTFT <= {sla.ttft_s * 1000:g} ms" if sla.ttft_s is not None else "",
             f"TPOT <= {sla.tpot_s * 1000:g} ms" if sla.tpot_s is not None else ""]
    return " and ".join(part for part in parts if part)


def _assumptions(assumptions: Mapping[str, str]) -> list[str]:
    """The assumptions but ``estimate``: the closing sentence says it once (the JSON keeps it as a key)."""
    return ["", "Estimated with:", *(f"  {key}: {value}" for key, value in assumptions.items()
                                     if value != ESTIMATE_NOTE)]


def render_advice(advice: Advice) -> str:
    """One block per load point: both layouts side by side, then the verdict."""
    first = advice.points[0]
    lines = [f"DPD against aggregated vLLM: {advice.model} on {advice.instance_type}, "
             f"{advice.isl} input / {advice.osl} output tokens per request",
             f"DPD: {first.disaggregated.description} on {first.disaggregated.nodes} node(s); baseline: "
             f"{first.aggregated.description} on {advice.baseline_nodes} node(s)"]
    if advice.by_analogy_to:
        lines.append(f"Estimated by analogy to {advice.by_analogy_to}: {advice.model} is not in AIConfigurator's "
                     "data (see model_data below); the ranges are wider for it")
    if advice.sla.any:
        lines.append(f"SLA: {sla_text(advice.sla)}")
    for point in advice.points:
        load = (f"{point.request_rate:g} requests/s (Poisson arrivals; capacity: aggregated "
                f"{point.aggregated.capacity_per_s:.2f}, DPD {point.disaggregated.capacity_per_s:.2f}"
                " requests/s)" if point.request_rate is not None else f"concurrency {point.concurrency}")
        lines += ["", load]
        lines += render_columns(_HEADERS, [_cells("aggregated", point.aggregated), _cells("DPD", point.disaggregated)],
                                indent="  ", rule=True)
        lines += _ranges(point.aggregated, point.disaggregated)
        lines.append(f"  -> {point.verdict}")
        for layout, missed in point.misses.items():
            lines.append(f"  !! {layout} misses the {' and '.join(m.upper() for m in missed)} target")
    lines += [f"warning: {text}" for text in advice.warnings]
    lines += _assumptions(advice.assumptions)
    lines += ["", f"This is {ESTIMATE_NOTE}."]
    return "\n".join(lines) + "\n"


def render_search(result: SearchResult, *, isl: int, osl: int, sla: Sla) -> str:
    """The best layouts, fewest nodes first, with their check() warnings and why others were refused."""
    headers = ("#", "nodes", "prefill", "decode", "max_num_seqs P/D", "PD buffer", "TTFT ms", "p90 ms", "TPOT ms",
               "out tok/s", "$/hour", "$/M tok")
    rows = []
    for rank, c in enumerate(result.best, start=1):
        spec, e = c.spec, c.estimate
        tp = spec.tensor_parallel_size
        rows.append([str(rank), str(c.nodes), f"{spec.prefill.replicas} x TP{tp}", f"{spec.decode.replicas} x TP{tp}",
                     f"{spec.prefill.max_num_seqs}/{spec.decode.max_num_seqs}", str(spec.kv_cache.pd_buffer_size),
                     _ms(e.ttft_s), _ms(e.ttft_p90_s), _ms(e.tpot_s, 1), f"{e.output_tokens_per_s:,.0f}",
                     _usd(e.usd_per_hour, 2), _usd(e.usd_per_million_output_tokens, 2)])
    lines = [f"DPD layouts meeting {sla_text(sla)} at {result.load}, {isl} input / {osl} output tokens "
             f"(fewest nodes first; {result.evaluated} layouts estimated)",
             *render_columns(headers, rows, indent="  ", rule=True)]
    for rank, c in enumerate(result.best, start=1):
        lines += [f"  #{rank} warning: {text}" for text in c.warnings]
    if result.rejected:
        lines += ["", "Refused by check():"]
        lines += [f"  {count} x {reason}" for reason, count in result.rejected.items()]
    lines += _assumptions(result.assumptions)
    lines += ["", f"This is {ESTIMATE_NOTE}."]
    return "\n".join(lines) + "\n"
