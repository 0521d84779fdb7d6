"""Where a disaggregated request's TTFT goes, per level, from the servers' own histograms (means per request).

Each stage is a histogram's increase over the level (``_sum`` over ``_count``, per pod with its own
reset detection, :mod:`disaggregation`), read from the metrics contract's families
(``data/metrics-contract.json``, derived from the vLLM 0.19.0 and LMCache 0.4.3 sources):

- **prefill queue**: the prefiller's ``vllm:request_queue_time_seconds`` (scheduled minus queued);
- **prefill**: the prefiller's ``vllm:request_prefill_time_seconds`` (first token minus scheduled),
  less the KV put below: vLLM runs the KV connector's save inside the step that makes the first
  token, so the prefill time holds the put (by code reading of vLLM 0.19's connector flow);
- **KV transfer**: the prefiller's ``lmcache:store_put_time`` (seconds, LMCache's docs), summed over
  the level and shared out over the prefiller's requests: on the PD backend the put waits for the
  decoder's buffer and the NIXL write;
- **decode queue** and **first decode step**: the decoder's ``vllm:request_queue_time_seconds`` and
  ``vllm:request_prefill_time_seconds`` (the step that loads the received KV and makes the first token);
- **router and network**: the router's ``dpd_e2e_ttft_seconds`` mean less every stage above (only
  when all are measured); negative means the stages overlap.

The decoder's own ``vllm:time_to_first_token_seconds`` and the client's mean TTFT are shown beside:
the client's less the router's is the client's overhead. A stage whose series no pod exported is
unmeasured (``None``), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.columns import ms, render_columns
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.observability.metrics import KV_STORE_PUT_TIME, PREFILL_TIME, QUEUE_TIME, TTFT

STAGES = ("router and network", "prefill queue", "prefill", "KV transfer", "decode queue", "first decode step")


def _mean(totals: Mapping[str, float], role: str, family: str, per: str | None = None) -> float | None:
    """``family``'s sum over the level divided by its own count, or by ``per``'s count."""
    total = totals.get(f"{role}:{family}_sum")
    count = totals.get(f"{role}:{per or family}_count")
    return None if total is None or not count else total / count


@dataclass(frozen=True, kw_only=True)
class Decomposition:
    """One level's TTFT by stage (seconds per request, None when unmeasured), and the two whole views."""

    load: Load
    stages: tuple[tuple[str, float | None], ...]
    router_ttft_s: float | None
    decoder_ttft_s: float | None
    client_ttft_s: float | None
    notes: tuple[str, ...] = ()
    runs: int = 1  # the repeats it is the median of (benchmark/report/repeats.py)

    @property
    def measured(self) -> bool:
        """Whether any server-side part (a stage or the decoder's TTFT) was read."""
        return self.decoder_ttft_s is not None or any(value is not None for _, value in self.stages)

    def stage(self, name: str) -> float | None:
        return dict(self.stages)[name]

    def as_dict(self) -> dict[str, Any]:
        return {**self.load.as_dict(), "stages_s": dict(self.stages), "router_ttft_s": self.router_ttft_s,
                "decoder_ttft_s": self.decoder_ttft_s, "client_ttft_s": self.client_ttft_s,
                "client_overhead_s": None if self.client_ttft_s is None or self.router_ttft_s is None
                else self.client_ttft_s - self.router_ttft_s, "notes": list(self.notes), "runs": self.runs}


def decompose(level: LevelResult, seen: LevelDisaggregation | None) -> Decomposition:
    totals = seen.stage_totals if seen is not None else {}
    notes = list(seen.stage_notes) if seen is not None else []  # prefillers the stages leave out
    prefill = _mean(totals, "prefill", PREFILL_TIME.name)
    kv = _mean(totals, "prefill", KV_STORE_PUT_TIME.name, per=PREFILL_TIME.name)
    if prefill is not None and kv is not None:
        if kv <= prefill:
            prefill -= kv
        else:
            notes.append(f"the KV put ({kv * 1e3:.1f} ms) outlasted the prefill step ({prefill * 1e3:.1f} ms): it "
                         "ran outside the step, so the prefill is shown whole")
    parts = {"prefill queue": _mean(totals, "prefill", QUEUE_TIME.name), "prefill": prefill, "KV transfer": kv,
             "decode queue": _mean(totals, "decode", QUEUE_TIME.name),
             "first decode step": _mean(totals, "decode", PREFILL_TIME.name)}
    router = seen.router_ttft_mean_s if seen is not None else None
    known = [value for value in parts.values() if value is not None]
    residual = router - sum(known) if router is not None and len(known) == len(parts) else None
    stages = tuple((name, residual if name == STAGES[0] else parts[name]) for name in STAGES)
    return Decomposition(load=level.load, stages=stages, router_ttft_s=router,
                         decoder_ttft_s=_mean(totals, "decode", TTFT.name), client_ttft_s=level.client_ttft_mean,
                         notes=tuple(notes))


def render_decompositions(rows: list[Decomposition], header: str) -> str:
    """One line per level: each stage in ms (or unmeasured), the router's, the decoder's and the client's TTFT."""
    headers = (header, *(f"{name} ms" for name in STAGES), "ROUTER TTFT", "DECODER TTFT", "CLIENT TTFT")
    table = [[row.load.cell(), *(ms(value, missing="unmeasured") for value in (
        *(value for _, value in row.stages), row.router_ttft_s, row.decoder_ttft_s, row.client_ttft_s))]
        for row in rows]
    lines = ["TTFT by stage (mean per request, from the router's and vLLM's histograms; the client's beside it):",
             *render_columns(headers, table)]
    lines += [f"  {row.load.describe()}: {note}" for row in rows for note in row.notes]
    return "\n".join(lines)
