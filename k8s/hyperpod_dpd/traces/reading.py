"""Read a request trace file of any supported format into a :class:`Trace`, or say exactly what is wrong with it.

The file is streamed one line at a time (gzip'd or not: told by its first two bytes; a pipe works too), and the
requests are held as columns of machine numbers, ~28 bytes each (plus 8 per prefix hash), so a trace of millions
of rows costs no copy of the text and no object per row. Every bad row is reported with its line number, field,
value and fix (up to :data:`MAX_PROBLEMS`), as one :class:`SpecError`; a file that cannot be opened is a
:class:`UsageError`. Rows are sorted by arrival, as aiperf's fixed schedule does before replaying them
(``aiperf/timing/strategies/fixed_schedule.py:110``, aiperf==0.13.0), and shifted so the first is at 0.
"""

from __future__ import annotations

import gzip
import zlib
from array import array
from collections import Counter
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import BinaryIO

from hyperpod_dpd.errors import Problem, SpecError, UsageError
from hyperpod_dpd.traces import csv_formats, mooncake
from hyperpod_dpd.traces.blocks import BlockSizes
from hyperpod_dpd.traces.model import PackedRequests, Trace
from hyperpod_dpd.traces.rows import BadRow, Parser, Row, Skip

MAX_PROBLEMS = 20  # a file with a wrong column has it on every row: the first rows tell the story
MAX_LINE_BYTES = 1 << 20  # a Mooncake row of a 1M-token prompt has ~2,000 hash ids (~40 KB); more is not a row
MAX_SPAN_S = 10 * 365 * 86_400.0  # ten years: a longer trace is a unit mix-up (ns read as ms, say)
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"


class TraceFormat(Enum):
    """The trace formats :func:`read_trace` reads; the value is the ``--format`` name."""

    MOONCAKE = "mooncake"
    AZURE = "azure"
    BURSTGPT = "burstgpt"

    @property
    def label(self) -> str:
        return {TraceFormat.MOONCAKE: "Mooncake JSONL", TraceFormat.AZURE: "Azure LLM inference CSV",
                TraceFormat.BURSTGPT: "BurstGPT CSV"}[self]


FORMAT_NAMES = tuple(f.value for f in TraceFormat)
_UNITS = {TraceFormat.MOONCAKE: "milliseconds", TraceFormat.AZURE: "a date and time",
          TraceFormat.BURSTGPT: "seconds from the start"}


def read_trace(path: str | Path, *, format: TraceFormat | str | None = None) -> Trace:
    """The trace in ``path`` (plain or gzip'd), its format told by its first line unless ``format`` names it.

    :param format: a :class:`TraceFormat` or its name (``mooncake``, ``azure``, ``burstgpt``). :default: None -
        detected: a JSON object is Mooncake, a CSV header names Azure's or BurstGPT's columns
    :raises UsageError: the file cannot be opened or read, or ``format`` is no format's name.
    :raises SpecError: a row is wrong (every bad row, with line, field, value and fix), or no row is a request.
    """
    wanted = _format(format)
    name = str(path)
    try:
        with Path(path).open("rb") as raw:
            gzipped = raw.peek(2)[:2] == _GZIP_MAGIC  # peek, not read and seek: a pipe cannot seek
            stream: BinaryIO = gzip.GzipFile(fileobj=raw) if gzipped else raw  # type: ignore[assignment]
            return _read(stream, name=name, wanted=wanted)
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        if isinstance(err, FileNotFoundError):
            raise UsageError(f"{name}: no such trace file; give the path of a Mooncake JSONL, Azure or BurstGPT "
                             "CSV file") from None
        what = "a broken gzip file" if isinstance(err, EOFError | zlib.error | gzip.BadGzipFile) else str(err)
        raise UsageError(f"{name}: cannot read the trace ({what}); give a readable file, plain or gzip'd") from None


def _format(format: TraceFormat | str | None) -> TraceFormat | None:
    if format is None or isinstance(format, TraceFormat):
        return format
    try:
        return TraceFormat(format)
    except ValueError:
        raise UsageError(f"{format!r} is not a trace format; give one of {', '.join(FORMAT_NAMES)}") from None


def _lines(stream: BinaryIO, name: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each non-blank line, decoded strictly as UTF-8, each at most MAX_LINE_BYTES."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise SpecError([Problem(field=f"line {number}", value=f"over {MAX_LINE_BYTES:,} bytes",
                                     message="is far longer than any trace row",
                                     fix="give a trace file with one request per line")], source=name,
                            what="trace")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SpecError([Problem(field=f"line {number}", value=raw[max(0, err.start - 8):err.start + 8],
                                     message="is not UTF-8 text", fix="give a text trace file (JSONL or CSV)")],
                            source=name, what="trace") from None
        text = text.removeprefix(_BOM) if number == 1 else text
        if text.strip():
            yield number, text


def _detect(first: str) -> TraceFormat | None:
    if first.lstrip().startswith("{"):
        return TraceFormat.MOONCAKE
    found = csv_formats.detect(first)
    return TraceFormat(found) if found else None


def _read(stream: BinaryIO, *, name: str, wanted: TraceFormat | None) -> Trace:
    lines = _lines(stream, name)
    head = next(lines, None)
    if head is None:
        raise SpecError([Problem(field="line 1", value="", message="the file holds no row",
                                 fix="give a trace with at least one request")], source=name, what="trace")
    fmt = wanted or _detect(head[1])
    if fmt is None:
        raise SpecError([Problem(field=f"line {head[0]}", value=head[1].strip()[:80],
                                 message="is neither a Mooncake JSON row nor an Azure or BurstGPT CSV header",
                                 fix=f"name the trace's format ({', '.join(FORMAT_NAMES)}) with the format option, "
                                     "or give a header of "
                                     f"{csv_formats.AZURE_HEADER!r} or {csv_formats.BURSTGPT_HEADER!r}")],
                        source=name, what="trace")
    parse: Parser
    if fmt is TraceFormat.MOONCAKE:
        parse, unit = mooncake.parse_row, mooncake.SECONDS_PER_UNIT
        rows: Iterator[tuple[int, str]] = _chain(head, lines)
    else:
        try:
            columns = csv_formats.header(head[1], fmt.value)
        except BadRow as err:
            raise SpecError([err.problem(head[0])], source=name, what=f"{fmt.label} trace") from None
        parse = csv_formats.row_parser(fmt.value, columns)
        unit = csv_formats.SECONDS_PER_UNIT[fmt.value]
        rows = lines
    return _collect(rows, parse=parse, unit=unit, name=name, fmt=fmt)


def _chain(head: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield head
    yield from rest


def _collect(rows: Iterator[tuple[int, str]], *, parse: Parser, unit: float, name: str,
             fmt: TraceFormat) -> Trace:
    packed = _Columns(unit=unit)
    problems: list[Problem] = []
    bad = 0
    skipped: Counter[str] = Counter()
    for number, text in rows:
        try:
            at, row = parse(text)
        except BadRow as err:
            bad += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(err.problem(number))
            continue
        except Skip as skip:
            skipped[skip.reason] += 1
            continue
        packed.add(at, row, line=number)
    if bad > len(problems):
        problems.append(Problem(field="more rows", value=bad - len(problems), message="are wrong as well",
                                fix="fix the rows above (often the same mistake) and read the trace again"))
    if problems:
        raise SpecError(problems, source=name, what=f"{fmt.label} trace")
    if not len(packed.at_s):
        why = "; ".join(f"{count} {reason}" for reason, count in sorted(skipped.items())) or "no row"
        raise SpecError([Problem(field="rows", value=sum(skipped.values()), message=f"none is a request ({why})",
                                 fix="give a trace with at least one request that has input and output tokens")],
                        source=name, what=f"{fmt.label} trace")
    return packed.trace(name=name, fmt=fmt, skipped=skipped)


# A trace's mean arrival rate beyond which its times were written in a unit 1,000 times too large (seconds read
# as milliseconds: a day's requests arrive within 86 s), and below which 1,000 times too small (milliseconds
# read as seconds). Public traces sit far inside: Mooncake's 23,608 requests in an hour (6.6 per second),
# BurstGPT's 1.4 million over 121 days (0.13 per second). Too few rows say nothing about a rate. A Mooncake file
# shorter than UNIT_HINT_SHORT_S whose times mostly carry fractions reads as seconds too: milliseconds are
# written whole (the published traces, and this project's writer unless a request falls between two).
UNIT_HINT_MAX_PER_S = 1000.0
UNIT_HINT_SHORT_S = 300.0
UNIT_HINT_MIN_PER_S = 1 / 3600
UNIT_HINT_MIN_ROWS = 100


def unit_hint(fmt: TraceFormat, *, requests: int, span_s: float, fractional: int = 0) -> str | None:
    """A note when the arrivals say the file's times are in another unit than its format's (or ``None``).

    ``fractional``: how many rows' times carry a fraction in the file's own unit.
    """
    if fmt is TraceFormat.AZURE or requests < UNIT_HINT_MIN_ROWS or span_s <= 0:
        return None
    rate = requests / span_s
    short_with_fractions = span_s < UNIT_HINT_SHORT_S and fractional > requests / 2
    if fmt is TraceFormat.MOONCAKE and (rate > UNIT_HINT_MAX_PER_S or short_with_fractions):
        return (f"timestamps look like seconds, not milliseconds ({requests:,} requests in {span_s:.3g} s, "
                f"{rate:,.0f} per second): Mooncake timestamps are milliseconds, so multiply them by 1,000")
    if fmt is TraceFormat.BURSTGPT and rate < UNIT_HINT_MIN_PER_S:
        return (f"timestamps look like milliseconds, not seconds ({requests:,} requests over {span_s / 86400:,.0f} "
                f"days, {rate * 3600:.2g} per hour): BurstGPT's Timestamp is seconds, so divide them by 1,000")
    return None


class _Columns:
    """The rows read, as columns of machine numbers (a real week of 27M rows must fit in memory: ~28 bytes a row).

    An arrival is kept as seconds after the file's first row, subtracted in the format's own unit first (Azure's
    integer nanoseconds exactly), so a row's time loses nothing before it is made relative to the earliest.
    """

    def __init__(self, *, unit: float) -> None:
        self.unit = unit
        self.at_s, self.inp, self.out = array("d"), array("q"), array("q")
        self.hashes, self.ends = array("q"), array("q")
        self.origin: int | float | None = None
        self.previous: int | float | None = None
        self.out_of_order = 0
        self.fractional = 0
        self.sizes = BlockSizes(block_tokens=mooncake.BLOCK_TOKENS)
        self.unreplayable = 0
        self.first_refusal = ""

    def add(self, at: int | float, row: Row, *, line: int) -> None:
        if self.origin is None:
            self.origin = at
        elif self.previous is not None and at < self.previous:
            self.out_of_order += 1
        self.previous = at
        self.fractional += isinstance(at, float) and not at.is_integer()
        self.at_s.append((at - self.origin) * self.unit)
        self.inp.append(row.input_tokens)
        self.out.append(row.output_tokens)
        self.hashes.extend(row.prefix_blocks)
        self.ends.append(len(self.hashes))
        refusal = self.sizes.refusal(row.input_tokens, row.prefix_blocks)
        if refusal:
            self.unreplayable += 1
            self.first_refusal = self.first_refusal or f"line {line} {refusal.message}"

    def trace(self, *, name: str, fmt: TraceFormat, skipped: Counter[str]) -> Trace:
        if self.out_of_order:
            self._sort()  # stable: rows at the same time keep their order
        first = self.at_s[0]
        span = self.at_s[-1] - first
        if not span <= MAX_SPAN_S:
            raise SpecError([Problem(field="timestamps", value=f"{span:.3g} s", message="span more than ten years",
                                     fix=f"give arrivals in the {fmt.label} unit ({_UNITS[fmt]}); a mixed-up unit "
                                         "reads this way")], source=name, what=f"{fmt.label} trace")
        if first:
            self.at_s = array("d", (at - first for at in self.at_s))
        notes = [f"{len(self.at_s):,} requests read"]
        notes += [f"{count:,} skipped ({reason})" for reason, count in sorted(skipped.items())]
        if self.out_of_order:
            notes.append(f"{self.out_of_order:,} rows out of time order, sorted")
        hint = unit_hint(fmt, requests=len(self.at_s), span_s=span, fractional=self.fractional)
        if hint:
            notes.append(hint)
        if self.unreplayable:
            notes.append(f"{self.unreplayable:,} rows aiperf would refuse to replay, first {self.first_refusal}")
        requests = PackedRequests(at_s=self.at_s, input_tokens=self.inp, output_tokens=self.out, hashes=self.hashes,
                                  hash_ends=self.ends)
        return Trace(requests=requests, source=f"{name} ({fmt.label}: {', '.join(notes)})",
                     block_tokens=mooncake.BLOCK_TOKENS if len(self.hashes) else None)

    def _sort(self) -> None:
        order = sorted(range(len(self.at_s)), key=self.at_s.__getitem__)
        starts = array("q", [0]) + self.ends[:-1]
        hashes, ends = array("q"), array("q")
        for i in order:
            hashes.extend(self.hashes[starts[i]:self.ends[i]])
            ends.append(len(hashes))
        self.at_s = array("d", (self.at_s[i] for i in order))
        self.inp = array("q", (self.inp[i] for i in order))
        self.out = array("q", (self.out[i] for i in order))
        self.hashes, self.ends = hashes, ends
