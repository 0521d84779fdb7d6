"""The result files of a run, read into one value per load level; genai-bench 0.0.5's are read here.

genai-bench writes one ``<scenario>_<task>_num_concurrency_<N>_time_<S>s.json`` per level (``S`` is
the measured run time, so names are matched, never built) and, when every request of a level fails,
``debug_for_run_<scenario>_<N>.json`` instead, after which it stops. Its ``error_rate`` is always 0
(computed before the request count), and a debug file counts failures only in
``error_codes_frequency``, so the counts here are rebuilt from what is reliable. Latencies are
normalised to seconds whatever ``_time_unit`` says. aiperf's files (open-loop request rates) are
read by :mod:`hyperpod_dpd.benchmark.run.aiperf_results` into the same :class:`LevelResult`.

One folder holds one run: two files for the same level (an earlier run's beside this one's) are
refused by name (:class:`DuplicateLevel`), never one of them taken in silence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hyperpod_dpd.benchmark.run.aiperf_results import (
    AIPERF_FILE,
    RECORDS_FILE,
    file_load,
    parse_aiperf,
    parse_failed_records,
)
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles, ResultsError
from hyperpod_dpd.load_point import Load

RUN_FILE = re.compile(r"^(?P<stem>.+)_(?P<task>[a-z-]+-to-[a-z-]+)_num_concurrency_(?P<level>\d+)_time_\d+s\.json$")
DEBUG_FILE = re.compile(r"^debug_for_run_(?P<stem>.+)_(?P<level>\d+)\.json$")
LATENCIES = ("ttft", "tpot", "e2e_latency")
UNIT_SCALE = {"s": 1.0, "ms": 1e-3}


def _get(data: Mapping[str, Any], path: str, where: str) -> Any:
    value: Any = data
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            raise ResultsError(f"{where}: no '{path}' (not a genai-bench 0.0.x result file?)")
        value = value[key]
    return value


def _number(value: Any, scale: float = 1.0) -> float | None:
    return None if value is None else float(value) * scale


def _warmup(requests: list[Mapping[str, Any]], stats: Mapping[str, Any]) -> int:
    """How many of a level's requests, from its first, genai-bench left out of its statistics as warm-up.

    genai-bench 0.0.5 records no phase per request: ``AggregatedMetricsCollector.aggregate_metrics_data``
    (genai_bench/metrics/aggregated_metrics_collector.py) leaves out the first ``int(N * warmup_ratio)`` of the
    ``N`` requests it collected (errors included, in the order ``individual_request_metrics`` keeps them) and
    aggregates the rest, and the ratio is not in the run file. So the warm-up is found from the file itself: the
    count of leading requests whose removal makes the answered requests' TTFT sum equal ``stats.ttft.sum``, the
    sum genai-bench computed over its measured requests only (both in the file's ``_time_unit``). bench passes no
    ``--cooldown-ratio``; a file whose sum matches no such count (a cool-down, or a file edited since) is taken
    as having no warm-up. The level's time (``run_duration``) still covers the warm-up, as genai-bench records no
    time per request: GOOD req/s is the measured requests that met the SLO over the whole level's time.
    """
    total = (stats.get("ttft") or {}).get("sum") if isinstance(stats.get("ttft"), Mapping) else None
    if not isinstance(total, int | float) or not requests:
        return 0
    ttfts = [float(r["ttft"]) if r.get("error_code") is None and isinstance(r.get("ttft"), int | float) else 0.0
             for r in requests]
    remaining = sum(ttfts)
    # A float sum in another order differs in its last bits: a millionth of the total is far below one request.
    tolerance = 1e-6 * max(abs(float(total)), 1e-9)
    for skipped, ttft in enumerate([*ttfts, 0.0]):
        if abs(remaining - float(total)) <= tolerance:
            return skipped
        remaining -= ttft
    return 0


def parse_run(data: Mapping[str, Any], *, where: str = "result") -> LevelResult:
    """One run (or debug) file's JSON as a :class:`LevelResult`."""
    unit = data.get("_time_unit", "s")
    if unit not in UNIT_SCALE:
        raise ResultsError(f"{where}: unknown _time_unit {unit!r} (expected 's' or 'ms')")
    scale = UNIT_SCALE[unit]
    metrics = _get(data, "aggregated_metrics", where)
    stats = _get(metrics, "stats", where)
    latencies = {name: Percentiles(*(_number(_get(stats, f"{name}.{p}", where), scale) for p in ("p50", "p90", "p99")))
                 for name in LATENCIES}
    codes = {str(code): int(count) for code, count in (metrics.get("error_codes_frequency") or {}).items()}
    completed = int(_get(metrics, "num_completed_requests", where))
    failed = max(int(metrics.get("num_error_requests") or 0), sum(codes.values()))
    requests = [r for r in data.get("individual_request_metrics") or [] if isinstance(r, Mapping)]
    errors = [r.get("error_message") for r in requests if r.get("error_code") is not None]
    warmup = _warmup(requests, stats)

    def answers(chosen: list[Mapping[str, Any]]) -> tuple[tuple[float, float | None], ...]:
        return tuple((float(r["ttft"]) * scale, _number(r.get("tpot"), scale)) for r in chosen
                     if r.get("error_code") is None and r.get("ttft") is not None)

    warmed, answered = answers(requests[:warmup]), answers(requests[warmup:])
    duration = float(metrics.get("run_duration") or 0.0)
    throughput = float(_get(metrics, "mean_output_throughput_tokens_per_s", where) or 0.0)
    streamed = [r.get("num_output_tokens") for r in requests if r.get("error_code") is None]
    if streamed and duration and all(isinstance(tokens, int | float) for tokens in streamed):
        # genai-bench divides the measured requests' tokens (its warm-up left out) by the whole level's time
        # (warm-up included): the tokens of every answered request over that same time instead.
        throughput = sum(float(tokens) for tokens in streamed if tokens is not None) / duration
    return LevelResult(
        load=Load(concurrency=int(_get(metrics, "num_concurrency", where))),
        scenario=str(_get(metrics, "scenario", where)),
        ttft=latencies["ttft"], tpot=latencies["tpot"], e2e=latencies["e2e_latency"],
        output_tokens_per_s=throughput, completed=completed, failed=failed, duration_s=duration,
        mean_input_tokens=_number(_get(stats, "num_input_tokens.mean", where)),
        mean_output_tokens=_number(_get(stats, "num_output_tokens.mean", where)),
        error_codes=codes, first_error=str(errors[0])[:300] if errors else None, answered=warmed + answered,
        warmup_answered=len(warmed), sent=len(warmed) + len(answered) + failed, client=Client.GENAI_BENCH.value)


@dataclass(frozen=True)
class BenchmarkResults:
    """Every level of one benchmark run, in load order; ``missing`` are levels that never ran."""

    levels: tuple[LevelResult, ...]
    missing: tuple[Load, ...] = ()
    unreadable: tuple[str, ...] = ()  # result files that could not be read, each with why

    def level(self, load: Load) -> LevelResult | None:
        return next((level for level in self.levels if level.load == load), None)

    @property
    def loads(self) -> tuple[Load, ...]:
        return tuple(level.load for level in self.levels)

    def as_dict(self) -> dict[str, Any]:
        return {"levels": [level.as_dict() for level in self.levels], "not_run": [load.value for load in self.missing],
                "unreadable": list(self.unreadable)}


METADATA_FILE = "experiment_metadata.json"
PLAN_FILE = "hyperpod-dpd-levels.json"  # the benchmark pod's plan: one client run per level


def plan_document(loads: Iterable[Load]) -> dict[str, list[float]]:
    """The plan file's content: ``{"num_concurrency": [...]}`` (genai-bench's metadata key) or
    ``{"request_rate": [...]}``."""
    plan: dict[str, list[float]] = {}
    for load in loads:
        key = "num_concurrency" if load.closed_loop else "request_rate"
        plan.setdefault(key, []).append(load.concurrency if load.concurrency is not None else load.value)
    return plan


def _planned_levels(files: Mapping[str, str]) -> list[Load]:
    """The levels asked for: the pod's plan, else genai-bench's metadata file (which names only its own run)."""
    for name in (PLAN_FILE, METADATA_FILE):
        try:
            plan = json.loads(files.get(name) or "{}")
            planned = [Load(concurrency=int(level)) for level in plan.get("num_concurrency") or []]
            planned += [Load(rate=float(level)) for level in plan.get("request_rate") or []]
        except (ValueError, TypeError, AttributeError):
            continue
        if planned:
            return planned
    return []


def _json_object(name: str, text: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ResultsError(f"{name}: not JSON ({err})") from None
    if not isinstance(data, Mapping):
        raise ResultsError(f"{name}: not a JSON object")
    return data


class DuplicateLevel(ResultsError):
    """Two result files of one folder hold the same level: which is the run's own cannot be told from the files."""


def file_level(name: str) -> Load | None:
    """The level a result file's name carries (genai-bench's names carry the concurrency, aiperf's the level),
    or None for a name that is no level's."""
    if (match := RUN_FILE.match(name) or DEBUG_FILE.match(name)) is not None:
        return Load(concurrency=int(match["level"]))
    if (match := AIPERF_FILE.match(name) or RECORDS_FILE.match(name)) is not None:
        return file_load(match)
    return None


def collect(files: Mapping[str, str], *, expected: Iterable[Load] = (), isl: int = 0,
            osl: int = 0, tolerant: bool = False) -> BenchmarkResults:
    """Result files by name (their text) as results, genai-bench's and aiperf's; other names are ignored.

    ``expected`` are the levels that should be there. :default: - those the run's plan lists
    ``isl`` and ``osl`` name the scenario of an aiperf level whose every request failed (it writes no
    summary). :default: - another level's
    ``tolerant`` reads on past a file that is not its client's (a copy cut mid-JSON), listing it in
    ``unreadable`` and its level (by its name) among the missing, instead of raising :class:`ResultsError`.
    Two files of the same level raise :class:`DuplicateLevel` naming both, tolerant or not: taking either would
    report a number the run may not have measured.
    """
    found: dict[Load, LevelResult] = {}
    sources: dict[Load, str] = {}
    unreadable: list[str] = []
    cut: set[Load] = set()
    for name in sorted(files):
        try:
            _collect_one(name, files, found, sources, isl=isl, osl=osl)
        except DuplicateLevel:
            raise
        except ResultsError as err:
            if not tolerant:
                raise
            unreadable.append(str(err))
            if (load := file_level(name)) is not None:
                cut.add(load)
    known = next((level.scenario for level in found.values() if level.completed), None)
    if not isl and known is not None:  # a level that wrote only failed records runs the same scenario
        found = {key: replace(level, scenario=known) if not level.completed else level for key, level in found.items()}
    wanted = sorted((set(expected) or set(_planned_levels(files))) | cut, key=Load.sort_key)
    missing = tuple(level for level in wanted if level not in found)
    return BenchmarkResults(levels=tuple(found[key] for key in sorted(found, key=Load.sort_key)), missing=missing,
                            unreadable=tuple(unreadable))


def _keep(name: str, level: LevelResult, found: dict[Load, LevelResult], sources: dict[Load, str], *,
          over: bool = False) -> None:
    """``level`` (read from ``name``) as its load's result; a load another file already gave is a
    :class:`DuplicateLevel`, unless ``over``: genai-bench's run file over its debug file of the same level."""
    earlier = sources.get(level.load)
    if earlier is not None and not (over and DEBUG_FILE.match(earlier)):
        raise DuplicateLevel(
            f"two result files for {level.load.describe()}: {earlier} and {name}; one folder holds one run, and "
            "either may be an earlier run's (the same --run-id, or files copied together). Fix: move the file "
            "that is not this run's out of the folder, or keep the run's hyperpod-dpd-upload.txt (uploaded with "
            "its files) in the folder so that only the files it names are read")
    found[level.load] = level
    sources[level.load] = name


def _collect_one(name: str, files: Mapping[str, str], found: dict[Load, LevelResult], sources: dict[Load, str], *,
                 isl: int, osl: int) -> None:
    if RUN_FILE.match(name) or DEBUG_FILE.match(name):
        level = parse_run(_json_object(name, files[name]), where=name)
        if level.load in sources and DEBUG_FILE.match(name) and RUN_FILE.match(sources[level.load]):
            return  # the level's run file is read: its debug file adds nothing
        _keep(name, level, found, sources, over=RUN_FILE.match(name) is not None)
    elif (match := AIPERF_FILE.match(name)) is not None:
        records = files.get(name.removesuffix(".json") + ".jsonl")
        _keep(name, parse_aiperf(_json_object(name, files[name]), records, load=file_load(match), where=name),
              found, sources)
    elif (match := RECORDS_FILE.match(name)) is not None and name.removesuffix("l") not in files:
        level = parse_failed_records(files[name], load=file_load(match), isl=isl, osl=osl, where=name)
        _keep(name, level, found, sources)


def read_files(folder: Path, *, also: Iterable[str] = ()) -> dict[str, str]:
    """The result files a run wrote into ``folder`` (genai-bench's ``<base>/<experiment folder>``, or the
    benchmark pod's results folder), by name, and the files named ``also`` (such as the upload manifest)."""
    extra = set(also)
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.iterdir())
            if path.is_file() and (path.suffix in (".json", ".jsonl") or path.name in extra)}


def read_directory(folder: Path, *, expected: Iterable[Load] = ()) -> BenchmarkResults:
    """:func:`collect` of :func:`read_files`."""
    return collect(read_files(folder), expected=expected)
