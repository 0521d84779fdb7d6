"""The sizes aiperf gives a prompt's hash ids when it replays a Mooncake trace, and the rows it cannot replay.

aiperf==0.13.0 ``aiperf/dataset/generator/prompt.py:576-679`` (``PromptGenerator._build_token_sequence``): a row
of ``n`` tokens and ``m`` hash ids of ``B`` tokens is one of three layouts: every hash a full block (``m * B ==
n``), the last hash a partial block of ``n - (m - 1) * B`` tokens (``m * B > n``; it refuses a final block outside
``(0, B]``, prompt.py:629-637), or the hashes a full-block prefix with fresh tokens after (``m * B < n``). A hash id
is one block of content, so it has one size for the whole file: the same id at another size is refused
(prompt.py:660-669). :class:`BlockSizes` applies both rules row by row, so the reader can count the rows aiperf
would refuse and the writer can refuse to write them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """Why aiperf would refuse a row's hashes, and the fix."""

    message: str
    fix: str


def last_block(input_tokens: int, hashes: int, *, block_tokens: int) -> int | None:
    """The tokens aiperf gives the last of ``hashes`` ids of a prompt, or None when it refuses the row."""
    if hashes * block_tokens <= input_tokens:
        return block_tokens  # exact tile or prefix only (prompt.py:638-640)
    final = input_tokens - (hashes - 1) * block_tokens  # prompt.py:629
    return final if 0 < final <= block_tokens else None  # prompt.py:630-637


class BlockSizes:
    """One size per hash id across a trace, as aiperf materialises each id once (prompt.py:645-669)."""

    def __init__(self, *, block_tokens: int) -> None:
        self._block = block_tokens
        self._sizes: dict[int, int] = {}

    def refusal(self, input_tokens: int, hashes: tuple[int, ...]) -> Refusal | None:
        """Why aiperf refuses this row, or None; the sizes are recorded as aiperf caches them, one by one."""
        if not hashes:
            return None
        last = last_block(input_tokens, len(hashes), block_tokens=self._block)
        if last is None:
            return Refusal(message=f"has {len(hashes)} prefix hashes of {self._block} tokens for a "
                           f"{input_tokens}-token prompt: aiperf cannot build it",
                           fix=f"give at most ceil(input_length / {self._block}) hash_ids per request")
        final = len(hashes) - 1
        for index, hash_id in enumerate(hashes):
            size = last if index == final else self._block
            had = self._sizes.setdefault(hash_id, size)
            if had != size:
                return Refusal(message=f"uses hash {hash_id} as a block of {size} tokens, which an earlier request "
                               f"used as {had}: aiperf refuses a hash of two sizes",
                               fix="give a partial last block a hash of its own, as Mooncake's traces do")
        return None
