"""The emulator against the real thing: an emulated day window by window beside a ``bench --trace`` replay.

``bench --trace --json`` writes, per replayed window, ``window_start_s`` and ``window_s`` (the replay's clock),
``arrivals_per_s`` and the client's ``ttft_p90_s`` and ``tpot_p90_s`` (``benchmark/replay/replay_proof.py``
``WindowResult.as_dict``), and ``replay.speedup`` (trace seconds per replay second). The trace is emulated at
the replay's pace (every arrival at ``at_s / speedup``), so the two clocks agree; per window the emulated
figure is the arrival-weighted mean of the steps' p90s inside it, and the error is emulated over measured,
less one. A window the replay could not measure (no latency) is shown without an error.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd.advisor.emulator import EmulatedDay
from hyperpod_dpd.errors import Problem, SpecError, UsageError
from hyperpod_dpd.traces import Trace

FIX = "give the file 'hyperpod-dpd bench --trace FILE --json' wrote for this trace"


@dataclass(frozen=True, kw_only=True)
class MeasuredWindow:
    """One replayed window as ``bench --trace`` measured it (seconds; latencies None when unmeasured)."""

    start_s: float
    window_s: float
    arrivals_per_s: float
    ttft_p90_s: float | None
    tpot_p90_s: float | None


@dataclass(frozen=True, kw_only=True)
class ReplayRun:
    source: str
    speedup: float
    windows: tuple[MeasuredWindow, ...]


def _number(value: Any, *, field: str, source: str, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise SpecError([Problem(field=field, value=value, message="is not a non-negative number", fix=FIX)],
                        source=source, what="bench --trace result")
    return float(value)


def read_replay(path: str | Path) -> ReplayRun:
    """The windows of a ``bench --trace --json`` file; :class:`UsageError` when unreadable, :class:`SpecError`
    naming the field when its shape is not that."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{source}: no such file; {FIX}") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise UsageError(f"{source}: cannot read it as JSON ({err}); {FIX}") from None
    replay = data.get("replay") if isinstance(data, dict) else None
    windows = data.get("windows") if isinstance(data, dict) else None
    if not isinstance(replay, dict) or not isinstance(windows, list) or not windows:
        raise SpecError([Problem(field="replay, windows", value=type(data).__name__, message="are missing or empty",
                                 fix=FIX)], source=source, what="bench --trace result")
    speedup = _number(replay.get("speedup"), field="replay.speedup", source=source)
    if not speedup:
        raise SpecError([Problem(field="replay.speedup", value=speedup, message="must be above 0", fix=FIX)],
                        source=source, what="bench --trace result")
    found = []
    for i, window in enumerate(windows):
        if not isinstance(window, dict):
            raise SpecError([Problem(field=f"windows[{i}]", value=window, message="is not an object", fix=FIX)],
                            source=source, what="bench --trace result")
        start, length, rate = (_number(window.get(key), field=f"windows[{i}].{key}", source=source)
                               for key in ("window_start_s", "window_s", "arrivals_per_s"))
        assert start is not None and length is not None and rate is not None  # not optional: raised otherwise
        if not length:
            raise SpecError([Problem(field=f"windows[{i}].window_s", value=length, message="must be above 0",
                                     fix=FIX)], source=source, what="bench --trace result")
        found.append(MeasuredWindow(
            start_s=start, window_s=length, arrivals_per_s=rate,
            ttft_p90_s=_number(window.get("ttft_p90_s"), field=f"windows[{i}].ttft_p90_s", source=source,
                               optional=True),
            tpot_p90_s=_number(window.get("tpot_p90_s"), field=f"windows[{i}].tpot_p90_s", source=source,
                               optional=True)))
    return ReplayRun(source=source, speedup=speedup, windows=tuple(found))


def at_replay_pace(trace: Trace, speedup: float) -> Trace:
    """``trace`` as the replay sent it: every arrival at ``at_s / speedup``."""
    if speedup == 1:
        return trace
    requests = tuple(dataclasses.replace(r, at_s=r.at_s / speedup) for r in trace.requests)
    return Trace(requests=requests, source=f"{trace.source}, at the replay's {speedup:g}x",
                 block_tokens=trace.block_tokens)


@dataclass(frozen=True, kw_only=True)
class WindowError:
    """One window: measured, emulated, and emulated / measured - 1 (None when either is missing)."""

    start_s: float
    measured_arrivals_per_s: float
    emulated_arrivals_per_s: float
    measured_ttft_p90_s: float | None
    emulated_ttft_p90_s: float | None
    measured_tpot_p90_s: float | None
    emulated_tpot_p90_s: float | None

    @staticmethod
    def _error(emulated: float | None, measured: float | None) -> float | None:
        if emulated is None or measured is None or not measured or not math.isfinite(emulated):
            return None
        return emulated / measured - 1

    @property
    def ttft_error(self) -> float | None:
        return self._error(self.emulated_ttft_p90_s, self.measured_ttft_p90_s)

    @property
    def tpot_error(self) -> float | None:
        return self._error(self.emulated_tpot_p90_s, self.measured_tpot_p90_s)

    def to_json(self) -> dict[str, Any]:
        def r(value: float | None, digits: int = 5) -> float | None:
            return None if value is None or not math.isfinite(value) else round(value, digits)

        return {"window_start_s": self.start_s, "measured_arrivals_per_s": r(self.measured_arrivals_per_s),
                "emulated_arrivals_per_s": r(self.emulated_arrivals_per_s),
                "measured_ttft_p90_s": r(self.measured_ttft_p90_s), "emulated_ttft_p90_s": r(self.emulated_ttft_p90_s),
                "ttft_error": r(self.ttft_error, 4), "measured_tpot_p90_s": r(self.measured_tpot_p90_s),
                "emulated_tpot_p90_s": r(self.emulated_tpot_p90_s), "tpot_error": r(self.tpot_error, 4)}


def _weighted(values: Sequence[float], weights: Sequence[float]) -> float | None:
    total = sum(weights)
    if not total:
        return None
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total


def compare(day: EmulatedDay, replay: ReplayRun) -> tuple[WindowError, ...]:
    """Each replayed window beside the emulated steps that start inside it."""
    rows = []
    for window in replay.windows:
        inside = [k for k, t in enumerate(day.times_s) if window.start_s <= t < window.start_s + window.window_s]
        weights = [day.arrivals_per_s[k] for k in inside]
        arrivals = sum(weights) / len(inside) if inside else 0.0
        rows.append(WindowError(
            start_s=window.start_s, measured_arrivals_per_s=window.arrivals_per_s, emulated_arrivals_per_s=arrivals,
            measured_ttft_p90_s=window.ttft_p90_s,
            emulated_ttft_p90_s=_weighted([day.ttft_p90_s[k] for k in inside], weights),
            measured_tpot_p90_s=window.tpot_p90_s,
            emulated_tpot_p90_s=_weighted([day.tpot_p90_s[k] for k in inside], weights)))
    return tuple(rows)
