"""Mooncake JSONL, the trace format aiperf's fixed schedule replays: one row's rules, and the writer.

A row is ``{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}``. The rules are
aiperf's own (aiperf==0.13.0, ``aiperf/dataset/loader/models.py`` ``MooncakeTrace``), cited beside each one; where
we are stricter it is said, so every row we accept aiperf accepts too (a test checks it against aiperf's model).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, NoReturn

from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.traces.blocks import BlockSizes
from hyperpod_dpd.traces.model import Trace
from hyperpod_dpd.traces.rows import HASH_RANGE, BadRow, Row, Skip, abbreviated, count, instant

# Tokens per hash id: aiperf's default block size for this loader (plugin/plugins.yaml:599 ``default_block_size:
# 512`` and config/dataset/defaults.py:46 ``BLOCK_SIZE = 512``), Mooncake's own block size.
BLOCK_TOKENS = 512
SECONDS_PER_UNIT = 1e-3  # "The timestamp of a request in milliseconds" (models.py:299-302)
# The other input modes: a row has exactly one of them or input_length (models.py:318-332). Their prompts are
# text, not a token count, so such a row cannot be sized here: skipped and counted.
_TEXT_MODES = ("text_input", "messages", "payload")
_FIX_LENGTH = "give a whole number of tokens, at least 1"


def _constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")  # JSON has no NaN/Infinity; orjson (aiperf's parser) refuses them


_DECODER = json.JSONDecoder(parse_constant=_constant)  # one, not one per row as json.loads(parse_constant=) builds


def _json(text: str) -> Any:
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError) as err:  # JSONDecodeError is a ValueError; so is a 5,000-digit int
        message = err.msg if isinstance(err, json.JSONDecodeError) else str(err)[:80]
        raise BadRow(field="row", value=text.strip()[:60], message=f"is not JSON ({message})",
                     fix="give one JSON object per line, as aiperf's loader reads (base_loader.py:186-194)") from None


def parse_row(text: str) -> tuple[int | float, Row]:
    """One JSONL line: its timestamp (ms) and request; raises :class:`BadRow` or :class:`Skip`."""
    data = _json(text)
    if not isinstance(data, dict):
        raise BadRow(field="row", value=data, message="is not a JSON object",
                     fix='give {"timestamp": ms, "input_length": n, "output_length": n} per line')
    modes = [mode for mode in _TEXT_MODES if data.get(mode) is not None]
    length = data.get("input_length")
    if length is not None and modes:  # models.py:329-332: the modes are mutually exclusive
        raise BadRow(field=modes[0], value=data[modes[0]], message="is given with input_length; aiperf refuses both",
                     fix="keep input_length (a token count) and drop the text")
    if length is None:
        if modes:
            raise Skip(f"prompt given as {modes[0]}, no token count")
        raise BadRow(field="input_length", value=None, message="is missing",  # models.py:326-328
                     fix="give the prompt's length in tokens as input_length")
    inp = count(length, field="input_length", fix=_FIX_LENGTH)
    # aiperf makes output_length optional (models.py:295) and then lets the server choose (max_tokens None,
    # base_trace_loader.py:360): a decode demand we cannot size, so we require it.
    out = count(data.get("output_length"), field="output_length",
                fix="give the tokens generated as output_length (aiperf would let the server choose)")
    if inp < 1 or out < 1:  # skipped and counted, as a CSV row of 0 tokens is (csv_formats.py): no work to size
        raise Skip("input_length 0" if inp < 1 else "output_length 0")
    if data.get("timestamp") is None:
        # fixed_schedule.py:88-92 needs a first-turn timestamp; a later turn may give ``delay`` instead, a session
        # this reader does not replay.
        what = "a multi-turn delay without a timestamp" if data.get("delay") is not None else "missing"
        raise BadRow(field="timestamp", value=None, message=f"is {what}",
                     fix="give each row its arrival in milliseconds as timestamp")
    at = instant(data["timestamp"], field="timestamp", fix="give the arrival in milliseconds, a finite number")
    return at, Row(input_tokens=inp, output_tokens=out, prefix_blocks=_hashes(data.get("hash_ids")))


def _hashes(value: Any) -> tuple[int, ...]:
    """``hash_ids``: a list of ints (models.py:298 ``list[int] | None``); a bool or float id is refused."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        shown = value if not isinstance(value, list) else next(
            h for h in value if not isinstance(h, int) or isinstance(h, bool))
        raise BadRow(field="hash_ids", value=shown, message="is not a list of whole numbers",
                     fix="give the prompt's block hashes as a JSON list of integers, or leave hash_ids out")
    low, high = HASH_RANGE
    wide = next((h for h in value if not low <= h < high), None)
    if wide is not None:
        raise BadRow(field="hash_ids", value=abbreviated(wide), message="is outside a 64-bit signed integer",
                     fix="give hash ids that fit in 64 bits, as aiperf's JSON parser (orjson) needs")
    return tuple(value)


def _timestamp_ms(at_s: float) -> int | float:
    """Milliseconds as aiperf reads them (int or float, models.py:299), whole when they are whole."""
    ms = round(at_s * 1e3, 6)  # a microsecond is far below aiperf's millisecond scheduling accuracy (models.py:301)
    return int(ms) if ms.is_integer() else ms


def mooncake_lines(trace: Trace) -> Iterator[str]:
    """The trace as Mooncake JSONL rows (each without its newline), in arrival order.

    :raises UsageError: the trace's hashes cover other than 512 tokens (aiperf would read them as 512).
    """
    if trace.block_tokens not in (None, BLOCK_TOKENS):
        raise UsageError(f"{trace.source}: its prefix hashes cover {trace.block_tokens} tokens, but aiperf reads "
                         f"Mooncake hash_ids as {BLOCK_TOKENS}-token blocks; regenerate with "
                         f"{BLOCK_TOKENS}-token blocks")
    sizes = BlockSizes(block_tokens=BLOCK_TOKENS)
    for number, request in enumerate(trace.requests, 1):
        if not math.isfinite(request.at_s * 1e3):  # written in ms: 1e307 s is no more a time than inf
            raise UsageError(f"{trace.source}: an arrival at {request.at_s} s is no time; give finite arrivals")
        refusal = sizes.refusal(request.input_tokens, request.prefix_blocks)
        if refusal:  # aiperf==0.13.0 prompt.py:629-669
            raise UsageError(f"{trace.source}: request {number:,} {refusal.message}; {refusal.fix}")
        row: dict[str, Any] = {"timestamp": _timestamp_ms(request.at_s), "input_length": request.input_tokens,
                               "output_length": request.output_tokens}
        if request.prefix_blocks:
            row["hash_ids"] = list(request.prefix_blocks)
        yield json.dumps(row, separators=(", ", ": "), allow_nan=False)  # JSON has no NaN: orjson refuses it


def write_lines(lines: Iterable[str], stream: IO[str]) -> None:
    for line in lines:
        stream.write(line + "\n")


def write_mooncake(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` as Mooncake JSONL to ``path`` (gzip'd when it ends in ``.gz``, which aiperf also reads:
    base_loader.py:167-169), the file ``bench --trace`` hands aiperf's fixed schedule.

    :raises UsageError: the file cannot be written, or the trace's hashes are not 512-token blocks.
    """
    target = Path(path)
    lines = mooncake_lines(trace)
    try:
        if target.name.endswith(".gz"):
            with gzip.open(target, "wt", encoding="utf-8") as stream:
                write_lines(lines, stream)
        else:
            with target.open("w", encoding="utf-8") as stream:
                write_lines(lines, stream)
    except OSError as err:
        raise UsageError(f"{path}: cannot write the trace ({err.strerror or err}); give a writable file") from None
