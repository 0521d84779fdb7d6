"""One request of a trace, and a trace: requests in arrival order."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceRequest:
    """A request as public traces record it.

    :param at_s: arrival, in seconds from the trace's first request (so the first is at 0).
    :param input_tokens: the prompt's length in tokens (at least 1).
    :param output_tokens: the tokens generated (at least 1).
    :param prefix_blocks: hashes of the prompt's fixed-size blocks where the trace has them (Mooncake's
        ``hash_ids``): two requests with the same leading hashes share that prefix. :default: () - unknown
    """

    at_s: float
    input_tokens: int
    output_tokens: int
    prefix_blocks: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Trace:
    """Requests sorted by arrival, with where they came from.

    :param requests: sorted by ``at_s``, the first at 0.
    :param source: what was read (a file name and its format, or the generator and its seed), printed with
        every result.
    :param block_tokens: the tokens one ``prefix_blocks`` hash covers (Mooncake: 512). :default: None - no hashes
    """

    requests: tuple[TraceRequest, ...]
    source: str
    block_tokens: int | None = None

    @property
    def duration_s(self) -> float:
        """From the first arrival to the last."""
        return self.requests[-1].at_s if self.requests else 0.0
