"""The two CSV trace formats: Azure's LLM inference traces (2023, 2024) and BurstGPT.

- Azure: ``TIMESTAMP,ContextTokens,GeneratedTokens``, the invocation time and the context and generated tokens
  (the schema table of ``Azure/AzurePublicDataset@1a61e6c6:AzureLLMInferenceDataset2023.md``; the 2024 release,
  ``@04e28b8a:AzureLLMInferenceDataset2024.md``, has the same three columns). The time is a date and time of day with
  up to 7 fractional digits, ``2023-11-16 18:15:46.6805900`` (the loaders in use parse it as
  ``%Y-%m-%d %H:%M:%S.%f``); it is read exactly, to the nanosecond, before the first is subtracted.
- BurstGPT: ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type``, Timestamp in seconds from the
  trace's start (``HPMLL/BurstGPT`` README). Only Timestamp, Request tokens and Response tokens are needed, as in
  aiperf's loader (``aiperf/dataset/loader/burst_gpt.py:23-30``, aiperf==0.13.0); the others are ignored.
  A failed request has Response tokens 0 (the README: "some failure that Response tokens are 0s"). aiperf replays it
  asking for 0 tokens (burst_gpt.py:57-61); we **skip and count** it: a failure puts no decode work on the pool
  and sizing for it would overstate demand (the ``without_fails`` files drop the same rows). aiperf also drops a row
  it cannot parse without a word (burst_gpt.py:62-63); we refuse it with its line.

A row with 0 prompt or output tokens is skipped and counted in every CSV format, for the same reason.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from datetime import UTC, datetime

from hyperpod_dpd.traces.rows import BadRow, Parser, Row, Skip, count, instant

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
# The columns each format needs: (time, prompt tokens, output tokens).
_NEEDED = {"azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
           "burstgpt": ("Timestamp", "Request tokens", "Response tokens")}
SECONDS_PER_UNIT = {"azure": 1e-9, "burstgpt": 1.0}  # Azure times are read in nanoseconds, BurstGPT's in seconds
_HEADERS = {"azure": AZURE_HEADER, "burstgpt": BURSTGPT_HEADER}
_AZURE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?")
_FIX_COUNT = "give a whole number of tokens"


def _fields(line: str) -> list[str]:
    try:
        return next(csv.reader([line]), [])
    except csv.Error as err:
        raise BadRow(field="row", value=line.strip()[:60], message=f"is not a CSV row ({err})",
                     fix="give comma-separated values, one request per line") from None


def detect(first: str) -> str | None:
    """``azure``, ``burstgpt`` or None for a first line that is no known header."""
    try:
        names = {name.strip() for name in _fields(first)}
    except BadRow:
        return None
    return next((fmt for fmt, needed in _NEEDED.items() if set(needed) <= names), None)


def header(line: str, fmt: str) -> tuple[int, int, int]:
    """The positions of the time, prompt-token and output-token columns in the header; raises :class:`BadRow`."""
    names = [name.strip() for name in _fields(line)]
    missing = [name for name in _NEEDED[fmt] if name not in names]
    if missing:
        raise BadRow(field="header", value=line.strip()[:80], message=f"has no column {', '.join(missing)}",
                     fix=f"give the {fmt} header {_HEADERS[fmt]!r} as the first line, or name the right format "
                         "with the command's format option")
    at, inp, out = (names.index(name) for name in _NEEDED[fmt])
    return at, inp, out


def _azure_time(text: str) -> int:
    """Nanoseconds since the epoch (a time without a zone is UTC)."""
    match = _AZURE_TIME.fullmatch(text.strip())
    fix = "give the invocation time as YYYY-MM-DD HH:MM:SS.fffffff"
    if not match:
        raise BadRow(field="TIMESTAMP", value=text, message="is not a date and time", fix=fix)
    whole, fraction, zone = match.groups()
    try:
        moment = datetime.fromisoformat(whole + (zone or ""))
    except ValueError as err:
        raise BadRow(field="TIMESTAMP", value=text, message=f"is no date ({err})", fix=fix) from None
    seconds = int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp())  # whole: exact in a float
    return seconds * 10**9 + int((fraction or "0").ljust(9, "0"))


def _seconds(text: str) -> float:
    fix = "give seconds from the trace's start, a finite number"
    try:
        return float(instant(float(text), field="Timestamp", fix=fix))
    except (ValueError, BadRow):  # the text as written, not the nan it parsed to
        raise BadRow(field="Timestamp", value=text, message="is not a finite number", fix=fix) from None


def _tokens(text: str, field: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise BadRow(field=field, value=text, message="is not a whole number", fix=_FIX_COUNT) from None
    return count(value, field=field, fix=_FIX_COUNT)


def row_parser(fmt: str, columns: tuple[int, int, int]) -> Parser:
    """A parser of one data row of ``fmt`` whose columns are at ``columns`` (from :func:`header`)."""
    at_col, inp_col, out_col = columns
    width = max(columns) + 1
    when: Callable[[str], int | float] = _azure_time if fmt == "azure" else _seconds
    names = _NEEDED[fmt]

    def parse(line: str) -> tuple[int | float, Row]:
        fields = _fields(line)
        if len(fields) < width:
            raise BadRow(field="row", value=line.strip()[:60], message=f"has {len(fields)} columns, not the header's",
                         fix=f"give every row the header's columns ({_HEADERS[fmt]})")
        at = when(fields[at_col])
        inp, out = _tokens(fields[inp_col], names[1]), _tokens(fields[out_col], names[2])
        if out == 0:
            raise Skip(f"{names[2]} 0: a failed request" if fmt == "burstgpt" else f"{names[2]} 0")
        if inp == 0:
            raise Skip(f"{names[1]} 0")
        return at, Row(input_tokens=inp, output_tokens=out)

    return parse
