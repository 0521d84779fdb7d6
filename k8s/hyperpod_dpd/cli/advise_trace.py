"""``hyperpod-dpd advise [SPEC] --trace FILE [--autoscale] [--report-dir DIR]``: a day of traffic, before purchase.

Prints the trace's summary, the replicas each role needs over it at the spec's SLO, what that costs per day,
and the SLO attainment of the layout the user wrote (emulated); ``--autoscale`` adds the spec's compiled SLO
autoscaling played through KEDA and the HPA, ``--report-dir`` a page and PNGs of the emulated day. Exit
status: 0; 1 when the emulated layout (the autoscaled one with ``--autoscale``) meets the SLO for fewer
requests than ``slo.objective``; 2 for bad input or a missing extra.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hyperpod_dpd.cli._argtypes import path, seconds
from hyperpod_dpd.cli._common import load_spec_argument, warn
from hyperpod_dpd.cli.trace import render as render_summary
from hyperpod_dpd.columns import ms, render_columns
from hyperpod_dpd.errors import SpecError, UsageError
from hyperpod_dpd.traces import DEFAULT_WINDOW_S, FORMAT_NAMES, Trace, read_trace
from hyperpod_dpd.traces.summary import clock

if TYPE_CHECKING:  # the advisor is imported when the command runs, to keep --help fast
    from hyperpod_dpd.advisor.emulator import EmulatedDay
    from hyperpod_dpd.advisor.replay_check import ReplayRun, WindowError
    from hyperpod_dpd.advisor.trace_advice import TraceAdvice, TraceSizing

EXIT_SLO_MISSED = 1
HOUR_S = 3600.0
# A trace of at least this long is tabulated by the hour; a shorter one window by window.
HOURLY_FROM_S = 3 * HOUR_S
# Options of the load-point advice that a trace replaces (the SLO targets come from the spec's ``slo:``).
LOAD_POINT_OPTIONS = (("--isl", "isl"), ("--osl", "osl"), ("--concurrency", "concurrency"),
                      ("--request-rate", "request_rate"), ("--ttft-ms", "ttft_ms"), ("--tpot-ms", "tpot_ms"),
                      ("--baseline-nodes", "baseline_nodes"), ("--search", "search"), ("--max-nodes", "max_nodes"),
                      ("--top", "top"), ("--write-spec", "write_spec"), ("--any-layout", "any_layout"))
TRACE_OPTIONS = (("--trace-format", "trace_format"), ("--window", "window"), ("--autoscale", "autoscale"),
                 ("--report-dir", "report_dir"), ("--replay", "replay"))


def add_trace_source(parser: argparse.ArgumentParser) -> None:
    """``--trace FILE``, ``--trace-format`` and ``--window``: advise and plan read a trace the same way."""
    parser.add_argument("--trace", metavar="FILE", type=path,
                        help="size and emulate the spec on a request trace (Mooncake JSONL, Azure LLM inference "
                             "CSV or BurstGPT CSV, plain or .gz; hyperpod-dpd trace generate writes one) instead "
                             "of one load point")
    parser.add_argument("--trace-format", choices=FORMAT_NAMES, help="with --trace: its format (default: detected)")
    parser.add_argument("--window", type=seconds, metavar="SECONDS",
                        help=f"with --trace: the window demand is sized in (default: {DEFAULT_WINDOW_S:g})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_trace_source(parser)
    parser.add_argument("--autoscale", action="store_true",
                        help="with --trace: also emulate the spec's compiled SLO autoscaling (KEDA and the HPA) over "
                             "the trace (the slo: true default on both roles if the spec has none)")
    parser.add_argument("--report-dir", metavar="DIR", type=path,
                        help="with --trace: write an HTML page and PNGs of the emulated day (report.html)")
    parser.add_argument("--replay", metavar="RESULT_JSON", type=path,
                        help="with --trace: put the emulated day (the autoscaled one with --autoscale) beside a "
                             "'bench --trace FILE --json' replay of the same trace, window by window, with the error")


def refuse_trace_options(args: argparse.Namespace) -> None:
    """Without ``--trace`` its options have nothing to apply to."""
    for flag, dest in TRACE_OPTIONS:
        if getattr(args, dest, None) not in (None, False):
            raise UsageError(f"{flag} needs --trace FILE: it applies to a trace")


def load_trace(args: argparse.Namespace) -> Trace:
    """The ``--trace`` file; a bad row is the user's to fix (a message and status 2, as a bad spec)."""
    try:
        return read_trace(args.trace, format=args.trace_format)
    except SpecError as err:
        raise UsageError(str(err)) from None


def _ms(seconds_: float) -> str:
    return ms(seconds_, digits=0) if math.isfinite(seconds_) else "inf"  # a NaN mean (no request) prints inf too


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.0f}"


def _bins(count: int, step_s: float, span_s: float) -> list[range]:
    """Consecutive steps grouped by the hour (a trace of at least three hours) or, shorter, by 5 minutes."""
    bin_s = HOUR_S if span_s >= HOURLY_FROM_S else DEFAULT_WINDOW_S
    per = max(1, round(bin_s / step_s))
    return [range(start, min(count, start + per)) for start in range(0, count, per)]


def _span(low: int, high: int) -> str:
    return f"{low}" if low == high else f"{low}-{high}"


def render_sizing(sizing: TraceSizing) -> list[str]:
    """The trace's summary, the replicas each role needs (by the hour) and what they cost per day."""
    summary = sizing.summary
    lines = [*render_summary(summary), ""]
    rows: list[Sequence[str]] = []
    for need in sizing.needs.values():
        unit = "prompt" if need.role == "prefill" else "output"
        rows.append((need.role, f"{need.compiled.capacity.tokens_per_s:,.0f} {unit} tok/s",
                     f"{need.target_tokens_per_s:,.0f}", str(need.min_replicas), str(need.max_replicas),
                     f"{need.node_hours:,.1f}"))
    lines.append(f"replicas each role needs per {summary.window_s:g} s window: demand over one replica's target "
                 "(its capacity at the SLO x utilisation), rounded up")
    lines += render_columns(("role", "capacity per replica", "target", "min", "max", "node-hours"), rows, rule=True)
    for need in sizing.needs.values():
        lines.append(f"  {need.role} capacity: {need.compiled.capacity.source}")
    windows = summary.windows
    hourly: list[Sequence[str]] = []
    for group in _bins(len(windows), summary.window_s, sizing.span_s):
        hourly.append((clock(windows[group[0]].start_s, with_seconds=False),
                       f"{sum(windows[i].requests for i in group) / (len(group) * summary.window_s):,.3f}",
                       *(_span(min(n.needed[i] for i in group), max(n.needed[i] for i in group))
                         for n in sizing.needs.values())))
    lines += ["", *render_columns(("from", "requests/s", "prefill", "decode"), hourly, rule=True), ""]
    price = "no price for this instance type: give --price-per-node-hour" if sizing.price is None else \
        sizing.price.describe()
    lines.append(f"cost: {_usd(sizing.usd_per_day)} per day sized window by window, "
                 f"{_usd(sizing.fixed_usd_per_day)} per day for the layout you wrote ({sizing.fixed_nodes} nodes); "
                 f"{price}")
    lines += [f"note: {note}" for note in sizing.notes]
    return lines


def _day_line(label: str, advice: TraceAdvice, day: EmulatedDay) -> str:
    attained = "-" if day.slo_attainment is None else f"{day.slo_attainment:.1%}"
    hours = sum(role.replica_hours for role in day.roles.values()) * 86_400 / (len(day.times_s) * day.step_s)
    return (f"{label}: SLO met for {attained} of requests; p90 TTFT {_ms(day.mean_ttft_p90_s)} ms, p90 TPOT "
            f"{_ms(day.mean_tpot_p90_s)} ms (means over requests); {hours:,.1f} replica-hours and "
            f"{_usd(advice.usd_per_day(day))} per day")


def render_advice(advice: TraceAdvice) -> list[str]:
    """The sizing, the fixed layout's emulated day and, with ``--autoscale``, the autoscaled one by the hour."""
    fixed = advice.fixed
    slo = fixed.slo_ttft_s, fixed.slo_tpot_s
    lines = render_sizing(advice.sizing)
    layout = ", ".join(f"{name} {role.ready[0]}" for name, role in fixed.roles.items())
    lines += ["", f"SLO: p90 TTFT {_ms(slo[0]) if slo[0] else '-'} ms, p90 TPOT {_ms(slo[1]) if slo[1] else '-'} ms "
                  f"(a step meets it when both its p90s do); latency: {fixed.latency_source}",
              _day_line(f"the layout you wrote ({layout}), emulated", advice, fixed)]
    day = advice.autoscaled
    if day is None:
        return lines
    lines += ["", "SLO autoscaling, emulated (KEDA and the HPA over the compiled triggers):"]
    if advice.scaling_note:
        lines.append(f"note: {advice.scaling_note}")
    for role, compiled in advice.scaling.items():
        lines.append(f"  {role}: {compiled.min_replicas}..{compiled.max_replicas} replicas, demand target "
                     f"{advice.sizing.needs[role].target_tokens_per_s:,.0f} tokens/s per replica, start-up "
                     f"{compiled.start_up_s:,.0f} s")
    rows: list[Sequence[str]] = []
    for group in _bins(len(day.times_s), day.step_s, len(day.times_s) * day.step_s):
        arrivals = sum(day.arrivals_per_s[i] for i in group) / len(group)
        rows.append((clock(day.times_s[group[0]], with_seconds=False), f"{arrivals:,.3f}",
                     *(_span(min(r.ready[i] for i in group), max(r.ready[i] for i in group))
                       for r in day.roles.values()),
                     _ms(max(day.ttft_p90_s[i] for i in group)), _ms(max(day.tpot_p90_s[i] for i in group))))
    lines += render_columns(("from", "requests/s", "prefill", "decode", "worst p90 TTFT ms", "worst p90 TPOT ms"),
                            rows, rule=True)
    lines.append(_day_line("autoscaled, emulated", advice, day))
    lines += [f"note: {note}" for note in day.notes]
    return lines


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def _abs_share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _median_abs(values: Sequence[float | None]) -> float | None:
    found = sorted(abs(v) for v in values if v is not None)
    return found[len(found) // 2] if found else None


def render_replay(label: str, replay: ReplayRun, rows: Sequence[WindowError]) -> list[str]:
    """The emulated day beside the replay, window by window, with the median error."""
    table: list[Sequence[str]] = [
        (clock(r.start_s, with_seconds=False), f"{r.measured_arrivals_per_s:,.3f}", f"{r.emulated_arrivals_per_s:,.3f}",
         "-" if r.measured_ttft_p90_s is None else _ms(r.measured_ttft_p90_s),
         "-" if r.emulated_ttft_p90_s is None else _ms(r.emulated_ttft_p90_s), _share(r.ttft_error),
         "-" if r.measured_tpot_p90_s is None else _ms(r.measured_tpot_p90_s),
         "-" if r.emulated_tpot_p90_s is None else _ms(r.emulated_tpot_p90_s), _share(r.tpot_error)) for r in rows]
    ttft, tpot = _median_abs([r.ttft_error for r in rows]), _median_abs([r.tpot_error for r in rows])
    return ["", f"{label} beside the replay {replay.source} ({replay.speedup:g}x; replay clock), p90s in ms:",
            *render_columns(("from", "req/s measured", "emulated", "TTFT measured", "emulated", "error",
                             "TPOT measured", "emulated", "error"), table, rule=True),
            f"median |error|: TTFT {_abs_share(ttft)}, TPOT {_abs_share(tpot)}"
            " (emulated over measured, less one; a window without a measured latency has none)"]


def _replay_json(label: str, replay: ReplayRun, rows: Sequence[WindowError]) -> dict[str, object]:
    ttft, tpot = _median_abs([r.ttft_error for r in rows]), _median_abs([r.tpot_error for r in rows])
    return {"source": replay.source, "speedup": replay.speedup, "day": label,
            "median_abs_ttft_error": None if ttft is None else round(ttft, 4),
            "median_abs_tpot_error": None if tpot is None else round(tpot, 4),
            "windows": [r.to_json() for r in rows]}


def run(args: argparse.Namespace) -> int:
    for flag, dest in LOAD_POINT_OPTIONS:
        if getattr(args, dest) not in (None, False):
            raise UsageError(f"{flag} does not apply with --trace: the trace gives the traffic and the spec's slo: "
                             "the targets; drop one of them")
    spec = load_spec_argument(args.spec).spec
    trace = load_trace(args)
    from hyperpod_dpd.advisor.replay_check import at_replay_pace, compare, read_replay  # noqa: PLC0415
    from hyperpod_dpd.advisor.trace_advice import advise_trace  # noqa: PLC0415 - keeps --help fast

    source = args.spec or "the embedded default spec"
    replay = None
    if args.replay:
        try:
            replay = read_replay(args.replay)
        except SpecError as err:
            raise UsageError(str(err)) from None
        trace = at_replay_pace(trace, replay.speedup)
    try:
        factors = None
        if args.calibrate:
            from hyperpod_dpd.advisor.calibration import calibrate_at_its_traffic, read_bench  # noqa: PLC0415

            fit = calibrate_at_its_traffic(spec, read_bench(Path(args.calibrate)), source=args.calibrate)
            for warning in fit.warnings:
                warn(warning)
            print(fit.render(), file=sys.stderr)
            factors = fit.factors
        advice = advise_trace(spec, trace, window_s=args.window or DEFAULT_WINDOW_S, autoscale=args.autoscale,
                              factors=factors, price_per_node_hour=args.price_per_node_hour)
    except SpecError as err:
        raise UsageError(f"cannot advise on {source} with {args.trace}:\n" + "\n".join(
            f"  - {problem.render()}" for problem in err.problems)) from None
    if args.report_dir:
        from hyperpod_dpd.advisor.day_report import write_day_report  # noqa: PLC0415 - matplotlib's, if any

        try:
            written = write_day_report(Path(args.report_dir), advice, text="\n".join(render_advice(advice)))
        except OSError as err:
            raise UsageError(f"cannot write the report to {args.report_dir}: {err.strerror}. Fix: choose a "
                             "writable folder") from None
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    day = advice.autoscaled or advice.fixed
    label = "the autoscaled day" if advice.autoscaled is not None else "the layout you wrote"
    rows = compare(day, replay) if replay is not None else ()
    if args.json:
        found = advice.to_json()
        if replay is not None:
            found["replay"] = _replay_json(label, replay, rows)
        print(json.dumps(found, indent=2))
    else:
        lines = render_advice(advice)
        if replay is not None:
            lines += render_replay(label, replay, rows)
        print("\n".join(lines))
    objective = spec.slo.objective if spec.slo is not None else None
    if day.slo_attainment is not None and objective is not None and day.slo_attainment < objective:
        print(f"hyperpod-dpd: the emulated layout meets the SLO for {day.slo_attainment:.1%} of requests, under "
              f"slo.objective {objective:g}", file=sys.stderr)
        return EXIT_SLO_MISSED
    return 0
