"""One load point, as the advisor predicts it and ``bench`` measures it.

Closed loop: ``concurrency`` clients, each sending its next request when the last one ends (genai-bench's
``--num-concurrency``). Open loop: ``rate`` Poisson arrivals per second whatever the server does
(aiperf's and ``vllm bench serve``'s ``--request-rate``), so a queue builds when the rate is above
capacity. One value type for both, so a measured level and a predicted point are matched by equality.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Load:
    """``concurrency`` clients in a closed loop, or ``rate`` Poisson arrivals per second (exactly one)."""

    concurrency: int | None = None
    rate: float | None = None

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError(f"a load point is a concurrency or a rate, exactly one (got {self!r})")

    @property
    def closed_loop(self) -> bool:
        return self.concurrency is not None

    @property
    def value(self) -> float:
        """The concurrency or the rate."""
        return float(self.concurrency if self.concurrency is not None else self.rate)  # type: ignore[arg-type]

    def describe(self) -> str:
        """``concurrency 8`` or ``2.5 requests/s``."""
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"{self.rate:g} requests/s"

    def cell(self) -> str:
        """The short form for a table column: ``8`` or ``2.5/s``."""
        return str(self.concurrency) if self.concurrency is not None else f"{self.rate:g}/s"

    def as_dict(self) -> dict[str, Any]:
        """``{"concurrency": 8}`` or ``{"request_rate": 2.5}``, for JSON documents."""
        return {"concurrency": self.concurrency} if self.concurrency is not None else {"request_rate": self.rate}

    def sort_key(self) -> tuple[bool, float]:
        return (not self.closed_loop, self.value)


def column_header(loads: tuple[Load, ...] | list[Load]) -> str:
    """``CONC`` for closed-loop levels, ``RATE`` for open-loop ones (``LOAD`` when a table mixes them)."""
    kinds = {load.closed_loop for load in loads}
    return "CONC" if kinds == {True} else "RATE" if kinds == {False} else "LOAD"
