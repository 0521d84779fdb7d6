"""aiperf's result files (one load level each), read into the :class:`LevelResult` genai-bench's give.

The benchmark pod runs ``aiperf profile`` once per level and keeps two of its artifacts under names
that carry the level: the summary ``profile_export_aiperf.json`` as ``aiperf_rate_<R>.json`` (an
open-loop rate) or ``aiperf_concurrency_<N>.json`` (a closed-loop level), and the per-request
records ``profile_export.jsonl`` beside it as ``.jsonl``. In aiperf 0.13 the
summary's metrics are top-level objects with a ``unit`` (``ms``, ``sec``) and ``avg``/``p50``/
``p90``/``p99``; ``request_count`` counts the answered requests and ``error_request_count`` the
failed ones; ``error_summary`` lists each distinct error with its HTTP code and count. Each record
line has ``metadata.benchmark_phase`` (``warmup`` or ``profiling``), ``metrics`` with
``time_to_first_token`` and ``inter_token_latency`` values, and an ``error`` object when it failed.
When every request fails, aiperf exits 1 and writes no summary; the records alone then give the
level, with its failures counted by HTTP code (:func:`parse_failed_records`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles, ResultsError
from hyperpod_dpd.load_point import Load

FILE_PREFIX = "aiperf_rate_"  # an open-loop level's files: aiperf_rate_<R>.json(l)
CONCURRENCY_PREFIX = "aiperf_concurrency_"  # a closed-loop level's: aiperf_concurrency_<N>.json(l)
AIPERF_FILE = re.compile(r"^aiperf_(?P<kind>rate|concurrency)_(?P<rate>\d+(?:\.\d+)?)\.json$")
RECORDS_FILE = re.compile(r"^aiperf_(?P<kind>rate|concurrency)_(?P<rate>\d+(?:\.\d+)?)\.jsonl$")


def file_prefix(closed_loop: bool) -> str:
    """The stem before the level in an aiperf level's file names."""
    return CONCURRENCY_PREFIX if closed_loop else FILE_PREFIX


def file_load(match: re.Match[str]) -> Load:
    """The level an :data:`AIPERF_FILE` or :data:`RECORDS_FILE` name carries."""
    if match["kind"] == "concurrency":
        return Load(concurrency=int(float(match["rate"])))
    return Load(rate=float(match["rate"]))
MEASURED_PHASE = "profiling"
UNIT_SCALE = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "ns": 1e-9, "us": 1e-6}


def _scale(metric: Mapping[str, Any], name: str, where: str) -> float:
    unit = str(metric.get("unit", "ms"))
    if unit not in UNIT_SCALE:
        raise ResultsError(f"{where}: {name} has unknown unit {unit!r}")
    return UNIT_SCALE[unit]


def _percentiles(data: Mapping[str, Any], name: str, where: str) -> Percentiles:
    metric = data.get(name)
    if not isinstance(metric, Mapping):
        return Percentiles(None, None, None)  # no request produced it (every one failed)
    scale = _scale(metric, name, where)
    return Percentiles(*(None if metric.get(p) is None else float(metric[p]) * scale for p in ("p50", "p90", "p99")))


def _avg(data: Mapping[str, Any], name: str) -> float | None:
    metric = data.get(name)
    value = metric.get("avg") if isinstance(metric, Mapping) else None
    return None if value is None else float(value)


def _records(text: str, where: str) -> list[Mapping[str, Any]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            raise ResultsError(f"{where} line {number}: not JSON ({err})") from None
        if isinstance(record, Mapping):
            found.append(record)
    return found


def _measured(record: Mapping[str, Any]) -> bool:
    """Whether a record is of the measured phase (not the warm-up)."""
    return str((record.get("metadata") or {}).get("benchmark_phase", MEASURED_PHASE)) == MEASURED_PHASE


def _answered(records: str, where: str) -> tuple[tuple[tuple[float, float | None], ...], int]:
    """(TTFT, TPOT) in seconds of every answered request in the records, warm-up first (the router counted
    those too), and how many were warm-up."""
    answered: list[tuple[float, float | None]] = []
    warmup: list[tuple[float, float | None]] = []
    for record in _records(records, f"{where}l"):
        metrics = record.get("metrics") or {}
        ttft = metrics.get("time_to_first_token")
        if record.get("error") or not isinstance(ttft, Mapping) or ttft.get("value") is None:
            continue
        itl = metrics.get("inter_token_latency")
        tpot = None
        if isinstance(itl, Mapping) and itl.get("value") is not None:
            tpot = float(itl["value"]) * _scale(itl, "inter_token_latency", where)
        (answered if _measured(record) else warmup).append(
            (float(ttft["value"]) * _scale(ttft, "time_to_first_token", where), tpot))
    return (*warmup, *answered), len(warmup)


# A record's output tokens, in order of preference: the server's own usage count, then aiperf's tokenization of the
# text it received (aiperf/metrics/types: usage_completion_tokens, output_sequence_length, output_token_count)
OUTPUT_TOKEN_METRICS = ("usage_completion_tokens", "output_sequence_length", "output_token_count")


def warmup_output_tokens(records: str | None, where: str) -> int | None:
    """The output tokens of the warm-up phase's records; None without records.

    aiperf 0.13's ``benchmark_duration`` is its measured phase's: ``BenchmarkDurationMetric`` (aiperf/metrics/types/
    benchmark_duration_metric.py) is the last response's timestamp less the first request's, over the records of
    the phase being summarised (``RecordsManager`` summarises per ``CreditPhase``, aiperf/records/records_manager.py),
    and the warm-up phase runs first and ends before the profiling phase starts (``PhaseOrchestrator._execute_phases``,
    aiperf/timing/phase_orchestrator.py, unless a phase is ``seamless``, which bench never sets). The server's
    counters span both phases, so these tokens are what lies outside the duration. A warm-up request that failed
    mid-stream reports no count: it adds what it streamed to the server's side alone (none do on a healthy run)."""
    if records is None:
        return None
    total = 0.0
    for record in _records(records, f"{where}l"):
        if _measured(record):
            continue
        metrics = record.get("metrics") or {}
        for name in OUTPUT_TOKEN_METRICS:
            metric = metrics.get(name)
            if isinstance(metric, Mapping) and isinstance(metric.get("value"), int | float):
                total += float(metric["value"])
                break
    return round(total)


def parse_aiperf(summary: Mapping[str, Any], records: str | None, *, rate: float | None = None,
                 load: Load | None = None, where: str = "result") -> LevelResult:
    """One level's summary (``load``, or the open-loop ``rate``) and its records (for goodput and the client's mean
    TTFT) as a :class:`LevelResult`."""
    if "aiperf_version" not in summary:
        raise ResultsError(f"{where}: no 'aiperf_version' (not an aiperf profile_export_aiperf.json?)")
    errors = [e for e in summary.get("error_summary") or [] if isinstance(e, Mapping)]
    codes: Counter[str] = Counter()
    for error in errors:
        codes[str((error.get("error_details") or {}).get("code"))] += int(error.get("count") or 0)
    failed = max(int(_avg(summary, "error_request_count") or 0), sum(codes.values()))
    first = str((errors[0].get("error_details") or {}).get("message"))[:300] if errors else None
    output = _avg(summary, "usage_completion_tokens")
    answered, warmup = _answered(records or "", where)
    sent = None if records is None else len(_records(records, f"{where}l"))
    return LevelResult(
        load=_load(load, rate), scenario=_scenario(summary),
        ttft=_percentiles(summary, "time_to_first_token", where), tpot=_percentiles(summary, "inter_token_latency",
                                                                                     where),
        e2e=_percentiles(summary, "request_latency", where),
        output_tokens_per_s=_avg(summary, "output_token_throughput") or 0.0,
        completed=int(_avg(summary, "request_count") or 0), failed=failed,
        duration_s=_avg(summary, "benchmark_duration") or 0.0,
        mean_input_tokens=_avg(summary, "usage_prompt_tokens") or _avg(summary, "input_sequence_length"),
        mean_output_tokens=output if output is not None else _avg(summary, "output_sequence_length"),
        error_codes=codes, first_error=first, answered=answered, warmup_answered=warmup, sent=sent,
        client=Client.AIPERF.value, warmup_output_tokens=warmup_output_tokens(records, where))


def _load(load: Load | None, rate: float | None) -> Load:
    if load is not None:
        return load
    if rate is None:
        raise ValueError("give the level's load or rate")
    return Load(rate=rate)


def parse_failed_records(records: str, *, rate: float | None = None, load: Load | None = None, isl: int, osl: int,
                         where: str = "records") -> LevelResult:
    """A level with records but no summary: aiperf writes none when every request failed, so the measured records'
    failures by HTTP code. When some of them were answered, the summary was written and lost on the way (the log
    rotated past it): the level is ``summary_lost``, its figures unknown, never 0 tok/s."""
    every = _records(records, where)
    measured = [r for r in every if _measured(r)]
    errors = [r["error"] for r in measured if isinstance(r.get("error"), Mapping)]
    codes = Counter(str(error.get("code")) for error in errors)
    none = Percentiles(None, None, None)
    answered, warmup = _answered(records, where.removesuffix("l"))
    return LevelResult(load=_load(load, rate), scenario=f"D({isl},{osl})", ttft=none, tpot=none, e2e=none,
                       output_tokens_per_s=0.0, completed=len(measured) - len(errors), failed=len(errors),
                       duration_s=0.0, mean_input_tokens=None, mean_output_tokens=None, error_codes=codes,
                       first_error=str(errors[0].get("message"))[:300] if errors else None, sent=len(every),
                       client=Client.AIPERF.value, summary_lost=len(measured) > len(errors),
                       answered=answered, warmup_answered=warmup)


def _scenario(summary: Mapping[str, Any]) -> str:
    """``D(isl,osl)`` from the run's own configuration, the form genai-bench names its scenario."""
    datasets = ((summary.get("input_config") or {}).get("datasets") or [{}])
    prompts = (datasets[0] or {}).get("prompts") or {}
    isl, osl = (prompts.get("isl") or {}).get("mean"), (prompts.get("osl") or {}).get("mean")
    return f"D({int(isl)},{int(osl)})" if isl is not None and osl is not None else "unknown"
