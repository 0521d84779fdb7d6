"""One request of a trace, and a trace: requests in arrival order."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload


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


class PackedRequests(Sequence[TraceRequest]):
    """Requests stored as columns of machine numbers (~28 bytes a request, plus 8 a hash), not one object each
    (~300 bytes): what a reader holds for a trace of millions of rows. Reads as a sequence of :class:`TraceRequest`.
    """

    __slots__ = ("_at", "_ends", "_hashes", "_inp", "_out")

    def __init__(self, *, at_s: array[float], input_tokens: array[int], output_tokens: array[int],
                 hashes: array[int], hash_ends: array[int]) -> None:
        """``hash_ends[i]``: where request i's hashes end in ``hashes`` (they start where request i - 1's end)."""
        self._at, self._inp, self._out, self._hashes, self._ends = at_s, input_tokens, output_tokens, hashes, hash_ends

    def __len__(self) -> int:
        return len(self._at)

    @overload
    def __getitem__(self, index: int) -> TraceRequest: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[TraceRequest, ...]: ...

    def __getitem__(self, index: int | slice) -> TraceRequest | tuple[TraceRequest, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("request index out of range")
        start = self._ends[index - 1] if index else 0
        return TraceRequest(at_s=self._at[index], input_tokens=self._inp[index], output_tokens=self._out[index],
                            prefix_blocks=tuple(self._hashes[start:self._ends[index]]))

    def __iter__(self) -> Iterator[TraceRequest]:
        start, hashes = 0, self._hashes
        for at, inp, out, end in zip(self._at, self._inp, self._out, self._ends, strict=True):
            yield TraceRequest(at_s=at, input_tokens=inp, output_tokens=out,
                               prefix_blocks=tuple(hashes[start:end]) if end > start else ())
            start = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(
            a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable-looking columns: no hash, as a list


@dataclass(frozen=True, kw_only=True)
class Trace:
    """Requests sorted by arrival, with where they came from.

    :param requests: sorted by ``at_s``, the first at 0 (a tuple, or a :class:`PackedRequests` from a reader).
    :param source: what was read (a file name and its format, or the generator and its seed), printed with
        every result.
    :param block_tokens: the tokens one ``prefix_blocks`` hash covers (Mooncake: 512). :default: None - no hashes
    """

    requests: Sequence[TraceRequest]
    source: str
    block_tokens: int | None = None

    @property
    def duration_s(self) -> float:
        """From the first arrival to the last."""
        return self.requests[-1].at_s if self.requests else 0.0
