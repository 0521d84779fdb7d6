"""One run's results as the table ``bench`` prints, and as one JSON object."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.proof.overhead import client_overhead, quantiles_dict, render_resolution_notes
from hyperpod_dpd.benchmark.proof.trust import TrustWarning
from hyperpod_dpd.benchmark.report.capacity import Slo
from hyperpod_dpd.benchmark.report.repeats import level_repeats, median_level
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.columns import milliseconds, render_columns
from hyperpod_dpd.load_point import Load, column_header

HEADERS = ("TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "E2E p50/p90/p99 s", "OUT tok/s", "DONE",
           "FAILED", "ERR")
# from the router's and the vLLM pods' counters
ROUTING_HEADERS = ("PREFIX HIT dec/pre", "DISAGG", "KV IN tok", "SRV tok/s", "CLIENT +ms")
CACHE_ROLES = ("decoder", "prefill")  # the roles of the PREFIX HIT column, in its order
GOODPUT_HEADER = "GOOD req/s"


def _three(p: Percentiles, *, seconds: bool = False) -> str:
    if seconds:
        return "/".join("-" if v is None else f"{v:.2f}" for v in (p.p50, p.p90, p.p99))
    return "/".join(milliseconds(v) for v in (p.p50, p.p90, p.p99))


def level_row(level: LevelResult) -> list[str]:
    return [level.load.cell(), _three(level.ttft), _three(level.tpot), _three(level.e2e, seconds=True),
            f"{level.output_tokens_per_s:,.1f}", str(level.completed), str(level.failed), f"{level.error_rate:.1%}"]


def routing_cells(level: LevelResult, seen: LevelDisaggregation | None) -> list[str]:
    """``PREFIX HIT`` the decoders' and prefillers' prefix-cache hit rates (``-`` for a role that exports none),
    ``DISAGG`` as disaggregated/routed and percent, ``KV IN tok`` the decoder's external prompt tokens,
    ``SRV tok/s`` the decoders' own output tokens per second, ``CLIENT +ms`` the client's mean TTFT above the
    router's."""
    if seen is None or seen.fraction is None:
        return ["?"] * len(ROUTING_HEADERS)
    overhead = client_overhead(level, seen)
    served = server_output_tokens_per_s(level, seen)
    rates = [seen.prefix_cache_hit_rate(role) for role in CACHE_ROLES]
    return ["/".join("-" if rate is None else f"{rate:.0%}" for rate in rates),
            f"{seen.disaggregated}/{seen.routed} {seen.fraction:.0%}", f"{seen.external_kv_tokens:,}",
            "-" if served is None else f"{served:,.1f}", "-" if overhead is None else f"{overhead * 1e3:+.0f}"]


def server_output_tokens_per_s(level: LevelResult, seen: LevelDisaggregation | None) -> float | None:
    """The decoders' ``vllm:generation_tokens_total`` increase over the level, per second of the client's timed
    window, both over the same requests: the counters span the whole level (their snapshots are taken in the quiet
    pauses around it), so the tokens of a warm-up the client's duration leaves out (aiperf's, whose
    ``benchmark_duration`` is its measured phase's: :func:`~hyperpod_dpd.benchmark.run.aiperf_results.
    warmup_output_tokens`) are taken off first; genai-bench's duration covers its warm-up. Requests cut at the
    bound count what they streamed. None when not exported, or when the warm-up's tokens are unknown (aiperf's
    per-request records missing)."""
    if seen is None or seen.generation_tokens is None or not level.duration_s or level.warmup_output_tokens is None:
        return None
    return max(seen.generation_tokens - level.warmup_output_tokens, 0) / level.duration_s


def goodput_cell(level: LevelResult, slo: Slo) -> str:
    good, rate = level.goodput(ttft_s=slo[0], tpot_s=slo[1])
    return f"{rate:.2f} ({good}/{len(level.measured_answered)})"


def render_results(title: str, results: BenchmarkResults, warnings: Sequence[TrustWarning],
                   routing: Mapping[Load, LevelDisaggregation] | None = None, slo: Slo | None = None) -> str:
    """The per-level table (with the router's and decoder's counts when ``routing`` is given, goodput
    under the spec's SLO when ``slo`` is), the levels that never ran, then every trust warning."""
    headers = ((column_header([*results.loads, *results.missing]),) + HEADERS
               + (ROUTING_HEADERS if routing is not None else ()) + ((GOODPUT_HEADER,) if slo else ()))
    rows = [level_row(level) + (routing_cells(level, routing.get(level.load)) if routing is not None else [])
            + ([goodput_cell(level, slo)] if slo else []) for level in results.levels]
    rows += [[level.cell(), *(["not run"] + ["-"] * (len(headers) - 2))] for level in results.missing]
    lines = [title, *render_columns(headers, rows)]
    coarse = render_resolution_notes(results.levels, routing, whose="the server") if routing is not None else []
    if coarse:
        lines += ["", *coarse]
    if warnings:
        lines += ["", "cannot be trusted as measured:", *(f"  - {w.render()}" for w in warnings)]
    return "\n".join(lines)


REPEAT_HEADERS = ("RUN", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "OUT tok/s", "DONE", "FAILED", "DISAGG")


def render_repeats(label: str, runs: Sequence[BenchmarkResults],
                   routings: Sequence[Mapping[Load, LevelDisaggregation] | None]) -> str:
    """Every repeat of every level beside the others, and their median (what capacity, the stages and the figures
    read, :mod:`repeats`): the main table is the first run's alone, which would hide how far the repeats spread."""
    loads = sorted({level.load for run in runs for level in run.levels}, key=Load.sort_key)
    rows = []
    for load in loads:
        for index, run in enumerate(runs, start=1):
            level = run.level(load)
            if level is None:
                rows.append([load.cell(), str(index), "not run", *["-"] * (len(REPEAT_HEADERS) - 2)])
                continue
            routing = routings[index - 1] if index - 1 < len(routings) else None
            seen = None if routing is None else routing.get(load)
            share = "?" if seen is None or seen.fraction is None else f"{seen.fraction:.0%}"
            rows.append([load.cell(), str(index), _three(level.ttft), _three(level.tpot),
                         f"{level.output_tokens_per_s:,.1f}", str(level.completed), str(level.failed), share])
        present = level_repeats(runs, load)
        if len(present) > 1:
            middle = median_level(present)
            rows.append([load.cell(), "median", _three(middle.ttft), _three(middle.tpot),
                         f"{middle.output_tokens_per_s:,.1f}", "-", "-", "-"])
    return "\n".join([f"{label}: each of the {len(runs)} runs per level and their median (capacity, the TTFT stages "
                      "and the figures read the median)", *render_columns((column_header(loads), *REPEAT_HEADERS),
                                                                         rows)])


def results_object(*, endpoint: str, scenario: Scenario, results: BenchmarkResults,
                   warnings: Sequence[TrustWarning], job: str | None = None,
                   routing: Mapping[Load, LevelDisaggregation] | None = None,
                   slo: Slo | None = None, identity: Mapping[str, str | None] | None = None,
                   layout: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One run of ``bench --json``. ``identity`` (``model``, ``architecture``, ``instance_type``) and ``layout``
    (TP, replicas, engine flags) name what was measured, so that ``advise --calibrate`` can refuse a run of
    another model, instance type or layout."""
    document = {"endpoint": endpoint, "job": job, **(identity or {}), **({"layout": layout} if layout else {}),
                "scenario": {"isl": scenario.isl, "osl": scenario.osl, **scenario.levels_dict(),
                             "requests_per_level": scenario.requests_per_level, "max_seconds": scenario.max_seconds},
                **results.as_dict(), "trusted": not warnings, "warnings": [w.as_dict() for w in warnings]}
    if routing is not None:
        document["routing"] = [{**(routing[lv.load].as_dict() if lv.load in routing else lv.load.as_dict()),
                                "client_overhead_s": client_overhead(lv, routing.get(lv.load)),
                                "client_overhead_quantiles": quantiles_dict(lv, routing.get(lv.load)),
                                "server_output_tokens_per_s": server_output_tokens_per_s(lv, routing.get(lv.load))}
            for lv in results.levels]
    if slo:
        document["goodput"] = {"slo": {"ttft_s": slo[0], "tpot_s": slo[1]}, "levels": [
            {**lv.load.as_dict(), "good": lv.goodput(ttft_s=slo[0], tpot_s=slo[1])[0],
             "answered": len(lv.measured_answered), "per_s": lv.goodput(ttft_s=slo[0], tpot_s=slo[1])[1]}
            for lv in results.levels]}
    return document


def to_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False)
