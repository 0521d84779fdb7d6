"""What one load level measured, whichever client's files it was read from (genai-bench's or aiperf's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.errors import DpdError
from hyperpod_dpd.load_point import Load


class ResultsError(DpdError, ValueError):
    """A result file that is not its client's output (genai-bench's, aiperf's); the message names the file and key."""


@dataclass(frozen=True)
class Percentiles:
    """p50, p90 and p99 in seconds; None when no request produced the metric."""

    p50: float | None
    p90: float | None
    p99: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True, kw_only=True)
class LevelResult:
    """What one load level (a concurrency or a request rate) measured."""

    load: Load
    scenario: str
    ttft: Percentiles
    tpot: Percentiles
    e2e: Percentiles
    output_tokens_per_s: float
    completed: int
    failed: int
    duration_s: float
    mean_input_tokens: float | None
    mean_output_tokens: float | None
    error_codes: Mapping[str, int] = field(default_factory=dict)
    first_error: str | None = None
    # (TTFT, TPOT) in seconds of every answered request, warm-up included (the router counts those too)
    answered: tuple[tuple[float, float | None], ...] = ()
    warmup_answered: int = 0  # how many of ``answered``, at its start, were warm-up requests (aiperf marks them)
    # every request the client sent in the level (warm-up, answered and failed), as its own files count them; None
    # when they do not (aiperf's records file missing: its summary counts neither the warm-up nor its errors)
    sent: int | None = None
    client: str | None = None  # the client whose files these are (a Client value), when known
    # output tokens streamed to warm-up requests outside the window ``duration_s`` times: aiperf's benchmark_duration
    # is its measured phase's alone, so its warm-up's tokens are these; 0 when ``duration_s`` covers the warm-up
    # (genai-bench's run_duration); None when unknown (aiperf's per-request records missing)
    warmup_output_tokens: int | None = 0
    # the client's summary was lost (aiperf's .json gone, its records there): its figures are unknown, not 0
    summary_lost: bool = False

    @property
    def client_ttft_mean(self) -> float | None:
        """Mean TTFT over every answered request, warm-up included: comparable with the router's own mean."""
        return _means(self.answered)[0]

    @property
    def measured_means(self) -> tuple[float | None, float | None]:
        """Mean TTFT and TPOT of the measured (non-warm-up) requests, the phase the throughput covers: the means
        calibration's Little's-law identity needs (``client_ttft_mean_s``, ``client_tpot_mean_s`` in the JSON)."""
        return _means(self.measured_answered)

    @property
    def measured_answered(self) -> tuple[tuple[float, float | None], ...]:
        """``answered`` without the warm-up requests the client marked as such."""
        return self.answered[self.warmup_answered:]

    def goodput(self, *, ttft_s: float | None, tpot_s: float | None) -> tuple[int, float]:
        """Measured requests that met both targets (a missing target always holds), and their rate per second."""
        good = sum(1 for ttft, tpot in self.measured_answered if (ttft_s is None or ttft <= ttft_s)
                   and (tpot_s is None or (tpot is not None and tpot <= tpot_s)))
        return good, good / self.duration_s if self.duration_s else 0.0

    @property
    def requests(self) -> int:
        return self.completed + self.failed

    @property
    def error_rate(self) -> float:
        """Failed over sent, from the counts (genai-bench's own ``error_rate`` is always 0)."""
        return self.failed / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.load.as_dict(), "scenario": self.scenario,
            "ttft_s": self.ttft.as_dict(), "tpot_s": self.tpot.as_dict(), "e2e_s": self.e2e.as_dict(),
            "output_tokens_per_s": None if self.summary_lost else self.output_tokens_per_s,
            **({"summary": "lost"} if self.summary_lost else {}), "requests": self.requests,
            "completed": self.completed, "failed": self.failed, "error_rate": self.error_rate,
            "error_codes": dict(sorted(self.error_codes.items())), "duration_s": self.duration_s,
            "mean_input_tokens": self.mean_input_tokens, "mean_output_tokens": self.mean_output_tokens,
            "first_error": self.first_error, "client_ttft_mean_s": self.measured_means[0],
            "client_tpot_mean_s": self.measured_means[1],
        }


def _means(answered: tuple[tuple[float, float | None], ...]) -> tuple[float | None, float | None]:
    """Mean TTFT of ``answered`` and mean TPOT of those that have one (None where there are none)."""
    tpots = [tpot for _, tpot in answered if tpot is not None]
    return (sum(ttft for ttft, _ in answered) / len(answered) if answered else None,
            sum(tpots) / len(tpots) if tpots else None)
