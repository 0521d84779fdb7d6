"""One figure per level from every repeat (``--repeat N``, or ``--results-dir`` given N times): the median over runs.

Capacity at the SLO, the TTFT decomposition and the report's figures read each level as the **median over
its repeats** of that level's own figure (its p50, p90 and p99, its throughput, each stage's mean), never
the first repeat alone; the figures draw the **range** of the repeats (lowest to highest) around it. With N
runs of a continuous figure, that range holds the figure's true median with probability 1 - 2^(1-N) (50% for
two runs, 75% for three, 94% for five): a spread, not a 95% interval (the A/B's Welch interval, :mod:`stats`,
is the one for claims). A median of medians is used rather than a percentile of the pooled requests because
genai-bench's files give a level's percentiles, not every request's E2E, and a run that went wrong moves a
median over runs less than it moves a pool. A level missing from some repeats is the median of those it is in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from statistics import median

from hyperpod_dpd.benchmark.proof.decomposition import Decomposition
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.load_point import Load


def middle(values: Sequence[float | None]) -> float | None:
    """The median of the values that were measured; None when none was."""
    known = [value for value in values if value is not None]
    return median(known) if known else None


def spread(values: Sequence[float | None]) -> tuple[float, float] | None:
    """The lowest and highest measured value; None when none was."""
    known = [value for value in values if value is not None]
    return (min(known), max(known)) if known else None


def _percentiles(levels: Sequence[LevelResult], pick: Callable[[LevelResult], Percentiles]) -> Percentiles:
    return Percentiles(*(middle([getattr(pick(level), q) for level in levels]) for q in ("p50", "p90", "p99")))


def level_repeats(runs: Sequence[BenchmarkResults], load: Load) -> list[LevelResult]:
    """The level ``load`` of every run that has it, in run order."""
    return [level for run in runs if (level := run.level(load)) is not None]


def median_level(levels: Sequence[LevelResult]) -> LevelResult:
    """One level's repeats as one: each percentile and the throughput the median over the repeats, the counts and
    the time summed (so a level answered in any repeat has answers), the requests of every repeat kept."""
    first = levels[0]
    if len(levels) == 1:
        return first
    return replace(
        first, ttft=_percentiles(levels, lambda lv: lv.ttft), tpot=_percentiles(levels, lambda lv: lv.tpot),
        e2e=_percentiles(levels, lambda lv: lv.e2e),
        output_tokens_per_s=median(level.output_tokens_per_s for level in levels),
        completed=sum(level.completed for level in levels), failed=sum(level.failed for level in levels),
        duration_s=sum(level.duration_s for level in levels),
        mean_input_tokens=middle([level.mean_input_tokens for level in levels]),
        mean_output_tokens=middle([level.mean_output_tokens for level in levels]),
        answered=tuple(answer for level in levels for answer in level.measured_answered), warmup_answered=0,
        sent=None if any(level.sent is None for level in levels) else sum(level.sent or 0 for level in levels))


def median_results(runs: Sequence[BenchmarkResults]) -> BenchmarkResults:
    """Every level of ``runs`` as :func:`median_level` of its repeats; the first run's alone when it is the only one."""
    if len(runs) == 1:
        return runs[0]
    loads = sorted({level.load for run in runs for level in run.levels}, key=Load.sort_key)
    missing = tuple(load for load in runs[0].missing if load not in loads)
    return BenchmarkResults(levels=tuple(median_level(level_repeats(runs, load)) for load in loads), missing=missing,
                            unreadable=tuple(why for run in runs for why in run.unreadable))


def median_decomposition(rows: Sequence[Decomposition]) -> Decomposition:
    """One level's TTFT by stage over its repeats: each stage, and each whole TTFT, the median of the repeats that
    measured it (unmeasured in all: None); the notes of every repeat."""
    first = rows[0]
    if len(rows) == 1:
        return first
    names = [name for name, _ in first.stages]
    return Decomposition(
        load=first.load, stages=tuple((name, middle([row.stage(name) for row in rows])) for name in names),
        router_ttft_s=middle([row.router_ttft_s for row in rows]),
        decoder_ttft_s=middle([row.decoder_ttft_s for row in rows]),
        client_ttft_s=middle([row.client_ttft_s for row in rows]),
        notes=tuple(dict.fromkeys(note for row in rows for note in row.notes)), runs=len(rows))
