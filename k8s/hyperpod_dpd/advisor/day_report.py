"""The report ``advise --trace --report-dir`` writes: the emulated day as one page, its PNG and its data as JSON.

One figure of four panels over the trace's time: arrivals per second, replicas serving per role, and the
p90 TTFT and TPOT of each step against the spec's SLO line. It is drawn from :func:`day_series` alone,
which the page embeds (``read_embedded``) and ``report.json`` holds, so what it shows can be checked. The
page machinery is shared with ``bench`` (:func:`~hyperpod_dpd.report_page.write_page`): deterministic files,
and without matplotlib the numbers and the extra's name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hyperpod_dpd.advisor.emulator import EmulatedDay
from hyperpod_dpd.advisor.trace_advice import TraceAdvice
from hyperpod_dpd.report_page import write_page

DAY_PNG = "emulated-day.png"
TITLE = "hyperpod-dpd advise --trace: the emulated day"
COLORS = {"prefill": "tab:blue", "decode": "tab:orange"}


def _ms(value: float) -> float | None:
    """Milliseconds, or None for a step with no capacity (infinite latency is not drawn); bench's figures
    keep a NaN instead."""
    return round(value * 1000, 3) if math.isfinite(value) else None


def day_series(day: EmulatedDay, *, label: str) -> dict[str, Any]:
    """Every number the figure draws, by panel: the data the page embeds and the tests check."""
    return {"label": label, "source": day.source, "step_s": day.step_s,
            "time_h": [round(t / 3600, 6) for t in day.times_s],
            "arrivals_per_s": [round(a, 4) for a in day.arrivals_per_s],
            "replicas": {name: list(role.ready) for name, role in day.roles.items()},
            "autoscaled": sorted(name for name, role in day.roles.items() if role.autoscaled),
            "ttft_p90_ms": [_ms(v) for v in day.ttft_p90_s], "tpot_p90_ms": [_ms(v) for v in day.tpot_p90_s],
            "slo": {"ttft_p90_ms": None if day.slo_ttft_s is None else _ms(day.slo_ttft_s),
                    "tpot_p90_ms": None if day.slo_tpot_s is None else _ms(day.slo_tpot_s)},
            "slo_attainment": None if day.slo_attainment is None else round(day.slo_attainment, 4)}


def _points(xs: Sequence[float], ys: Sequence[float | None]) -> tuple[list[float], list[float]]:
    kept = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def day_figure(data: Mapping[str, Any]) -> Any:
    """Arrivals, replicas per role, p90 TTFT and p90 TPOT over the day, the SLO as a red line."""
    from matplotlib.figure import Figure  # noqa: PLC0415 - the bench extra's

    figure = Figure(figsize=(9.0, 8.0), dpi=80, layout="constrained")
    arrivals, replicas, ttft, tpot = figure.subplots(4, 1, sharex=True)
    hours = data["time_h"]
    arrivals.plot(hours, data["arrivals_per_s"], color="tab:gray", linewidth=0.6, gid="arrivals")
    arrivals.set_ylabel("arrivals/s")
    for role, ready in data["replicas"].items():
        kind = "autoscaled" if role in data["autoscaled"] else "fixed"
        replicas.step(hours, ready, where="post", color=COLORS.get(role), label=f"{role} ({kind})",
                      gid=f"replicas-{role}")
    replicas.set_ylabel("replicas serving")
    replicas.legend(fontsize=7, loc="upper left")
    for ax, key, name in ((ttft, "ttft_p90_ms", "TTFT"), (tpot, "tpot_p90_ms", "TPOT")):
        ax.plot(*_points(hours, data[key]), color="tab:blue", linewidth=0.7, label=f"p90 {name}", gid=key)
        target = data["slo"][key]
        if target is not None:
            ax.axhline(target, color="tab:red", linewidth=1.0, label=f"SLO {target:g} ms", gid=f"slo-{key}")
        ax.set_ylabel(f"p90 {name} ms")
        ax.set_yscale("log")
        ax.legend(fontsize=7, loc="upper left")
    for ax in (arrivals, replicas, ttft, tpot):
        ax.grid(True, alpha=0.3)
    tpot.set_xlabel("hours from the trace's first request")
    attained = data["slo_attainment"]
    figure.suptitle(f"{data['label']}: SLO met for {'-' if attained is None else f'{attained:.1%}'} of requests",
                    fontsize=9)
    return figure


def write_day_report(folder: Path, advice: TraceAdvice, *, text: str) -> list[Path]:
    """``report.html``, ``report.json`` (the advice and the figure's data) and, with matplotlib, the day's PNG.

    The day drawn is the autoscaled one when the advice has it, else the layout the user wrote.
    """
    day, label = ((advice.autoscaled, "SLO autoscaling") if advice.autoscaled is not None
                  else (advice.fixed, "the layout you wrote"))
    return write_page(folder, title=TITLE, text=text, data=day_series(day, label=label), document=advice.to_json(),
                      draw=lambda data: [(DAY_PNG, day_figure(data))])
