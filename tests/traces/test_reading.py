"""Reading the three trace formats, and refusing bad files with the line, field, value and fix.

The CSV fixtures in ``data/`` are made-up rows in the published layouts (Azure's ``TIMESTAMP,ContextTokens,
GeneratedTokens``, BurstGPT's six columns), not rows of the real traces.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import fuzz_examples, watchdog

from hyperpod_dpd.errors import SpecError, UsageError
from hyperpod_dpd.traces import BLOCK_TOKENS, Trace, TraceFormat, TraceRequest, read_trace, write_mooncake
from hyperpod_dpd.traces.model import PackedRequests
from hyperpod_dpd.traces.reading import MAX_PROBLEMS

DATA = Path(__file__).with_name("data")
AZURE = DATA / "azure_conv_sample.csv"
BURSTGPT = DATA / "burstgpt_sample.csv"
FUZZ = settings(max_examples=fuzz_examples(150), deadline=None)


def _write(tmp_path: Path, text: str, name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path, **kwargs: object) -> str:
    with pytest.raises(SpecError) as caught:
        read_trace(path, **kwargs)  # type: ignore[arg-type]
    return str(caught.value)


def test_azure_times_are_read_to_the_tenth_of_a_microsecond_and_start_at_zero() -> None:
    trace = read_trace(AZURE)
    assert [r.at_s for r in trace.requests] == pytest.approx([0.0, 4.314579, 4.4194101, 61.0], abs=1e-9)
    assert [(r.input_tokens, r.output_tokens) for r in trace.requests] == [(374, 44), (396, 109), (91, 16),
                                                                            (1200, 301)]
    assert trace.block_tokens is None and all(not r.prefix_blocks for r in trace.requests)
    assert "Azure LLM inference CSV" in trace.source and "4 requests read" in trace.source
    assert "1 skipped (GeneratedTokens 0)" in trace.source
    assert trace.duration_s == pytest.approx(61.0, abs=1e-9)


def test_burstgpt_skips_failed_requests_and_counts_them() -> None:
    trace = read_trace(BURSTGPT)
    assert [(r.at_s, r.input_tokens, r.output_tokens) for r in trace.requests] == [
        (0.0, 472, 18), (113.0, 417, 347), (115.0, 1360, 289)]
    assert "1 skipped (Response tokens 0: a failed request)" in trace.source


def test_the_format_is_detected_from_the_first_line_and_can_be_forced(tmp_path: Path) -> None:
    moon = _write(tmp_path, '{"timestamp": 0, "input_length": 10, "output_length": 2}\n')
    assert read_trace(moon).source.endswith("(Mooncake JSONL: 1 requests read)")
    assert read_trace(AZURE, format="azure").requests == read_trace(AZURE).requests
    wrong = _problems(AZURE, format=TraceFormat.BURSTGPT)
    assert "line 1: header" in wrong and "Timestamp, Request tokens, Response tokens" in wrong
    with pytest.raises(UsageError, match="'csv' is not a trace format; give one of mooncake, azure, burstgpt"):
        read_trace(AZURE, format="csv")


def test_gzipped_traces_are_read_by_their_magic_bytes(tmp_path: Path) -> None:
    packed = tmp_path / "trace.csv.gz"
    packed.write_bytes(gzip.compress(AZURE.read_bytes()))
    assert read_trace(packed).requests == read_trace(AZURE).requests
    named = tmp_path / "not-really.gz"
    named.write_bytes(AZURE.read_bytes())  # the name does not decide, the bytes do
    assert len(read_trace(named).requests) == 4


def test_unsorted_rows_are_sorted_and_said_so(tmp_path: Path) -> None:
    rows = [{"timestamp": t, "input_length": n, "output_length": 1} for t, n in ((3000, 3), (1000, 1), (2000, 2))]
    trace = read_trace(_write(tmp_path, "\n".join(json.dumps(r) for r in rows)))
    assert [(r.at_s, r.input_tokens) for r in trace.requests] == [(0.0, 1), (1.0, 2), (2.0, 3)]
    assert "1 rows out of time order, sorted" in trace.source


@pytest.mark.parametrize(("row", "expected"), [
    ('{"timestamp": 0, "input_length": "ten", "output_length": 2}',
     "line 1: input_length: is not a whole number (got 'ten'). Fix: give a whole number of tokens"),
    ('{"timestamp": 0, "input_length": -5, "output_length": 2}', "line 1: input_length: is negative (got -5)"),
    ('{"timestamp": 0, "input_length": 1e300, "output_length": 2}',
     "line 1: input_length: is over 10,000,000 tokens, longer than any model's context (got '1.00e+300')"),
    ('{"timestamp": 0, "input_length": 3, "output_length": 2, "hash_ids": [18446744073709551616]}',
     "line 1: hash_ids: is outside a 64-bit signed integer (got '1.84e+19')"),
    ('{"timestamp": NaN, "input_length": 3, "output_length": 2}', "line 1: row: is not JSON (NaN is not a JSON"),
    ('{"timestamp": 1e999, "input_length": 3, "output_length": 2}', "line 1: timestamp: is not a finite number"),
    ('{"timestamp": 1' + "0" * 400 + ', "input_length": 3, "output_length": 2}',
     "line 1: timestamp: is not a finite number (got '1.00e+400')"),
    ('{"input_length": 3, "output_length": 2}', "line 1: timestamp: is missing"),
    ('{"delay": 5, "input_length": 3, "output_length": 2}', "timestamp: is a multi-turn delay without a timestamp"),
    ('{"timestamp": 0, "input_length": 3}', "line 1: output_length: is missing (got None)"),
    ('{"timestamp": 0, "output_length": 3}', "line 1: input_length: is missing"),
    ('{"timestamp": 0, "input_length": 3, "output_length": 2, "hash_ids": [1, true]}',
     "line 1: hash_ids: is not a list of whole numbers (got True)"),
    ('{"timestamp": 0, "input_length": 3, "text_input": "hi", "output_length": 2}',
     "line 1: text_input: is given with input_length; aiperf refuses both"),
    ("[1, 2]", "line 1: row: is not a JSON object"),
])
def test_a_bad_mooncake_row_is_named_by_line_field_value_and_fix(tmp_path: Path, row: str, expected: str) -> None:
    text = _problems(_write(tmp_path, row + "\n"), format="mooncake")
    assert f"invalid Mooncake JSONL trace in {tmp_path / 'trace.jsonl'}" in text
    assert expected in text and "Fix: " in text


@pytest.mark.parametrize(("row", "expected"), [
    ("2023-11-16 18:15:47,abc,3", "line 3: ContextTokens: is not a whole number (got 'abc')"),
    ("2023-11-16 18:15:47,-4,3", "line 3: ContextTokens: is negative (got -4)"),
    ("2023-11-16 25:15:47,4,3", "line 3: TIMESTAMP: is no date"),
    ("yesterday,4,3", "line 3: TIMESTAMP: is not a date and time (got 'yesterday')"),
    ("2023-11-16 18:15:47,4", "line 3: row: has 2 columns, not the header's"),
])
def test_a_bad_azure_row_is_named_by_line_field_value_and_fix(tmp_path: Path, row: str, expected: str) -> None:
    text = AZURE.read_text().splitlines()[:2]
    assert expected in _problems(_write(tmp_path, "\n".join([*text, row]) + "\n", "t.csv"))


def test_a_bad_burstgpt_timestamp_is_refused(tmp_path: Path) -> None:
    head = BURSTGPT.read_text().splitlines()[0]
    text = _problems(_write(tmp_path, f"{head}\nNaN,ChatGPT,4,3,7,API log\nsoon,ChatGPT,4,3,7,API log\n", "b.csv"))
    assert "line 2: Timestamp: is not a finite number (got 'NaN')" in text
    assert "line 3: Timestamp: is not a finite number (got 'soon')" in text


def test_every_bad_row_is_reported_up_to_a_bound(tmp_path: Path) -> None:
    rows = "\n".join('{"timestamp": 0, "input_length": -1, "output_length": 1}' for _ in range(MAX_PROBLEMS + 7))
    text = _problems(_write(tmp_path, rows))
    assert f"({MAX_PROBLEMS + 1} problems)" in text and f"line {MAX_PROBLEMS}: input_length" in text
    assert "more rows: are wrong as well (got 7)" in text


@pytest.mark.parametrize(("content", "expected"), [
    (b"", "line 1: the file holds no row"),
    (b"\n\n  \n", "line 1: the file holds no row"),
    (b"a,b,c\n1,2,3\n", "is neither a Mooncake JSON row nor an Azure or BurstGPT CSV header"),
    (b"TIMESTAMP,ContextTokens,GeneratedTokens\n", "rows: none is a request (no row)"),
    (b"\xff\xfe{}\n", "line 1: is not UTF-8 text"),
    (b'{"timestamp": 0, "text_input": "hi"}\n', "none is a request (1 prompt given as text_input, no token count)"),
])
def test_a_file_with_no_request_is_refused(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "t"
    path.write_bytes(content)
    assert expected in _problems(path)


def test_a_file_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such trace file"):
        read_trace(tmp_path / "missing.jsonl")
    with pytest.raises(UsageError, match="cannot read the trace"):
        read_trace(tmp_path)  # a folder
    broken = tmp_path / "broken.gz"
    broken.write_bytes(gzip.compress(b'{"timestamp": 0}\n' * 100)[:30])
    with pytest.raises(UsageError, match="a broken gzip file"):
        read_trace(broken)


def test_a_line_far_longer_than_any_row_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(b'{"timestamp": 0, "hash_ids": [' + b"1, " * 400_000 + b"1]}\n")
    assert "line 1: is far longer than any trace row" in _problems(path)


# --- fuzz: any bytes, any rows: our errors only, never a hang ------------------------------------------------------

ROW_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2, 10**6), st.floats(allow_nan=True),
                       st.text(max_size=8), st.lists(st.integers(-3, 3), max_size=3))
MOONCAKE_ROWS = st.dictionaries(st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids",
                                                 "text_input", "delay", "session_id"]), ROW_VALUES)
CSV_CELLS = st.one_of(st.integers(-3, 5000).map(str), st.sampled_from(["2023-11-16 18:15:46.6805900", "nan", "",
                                                                       "1e400", "x", '"', "2024-02-30 00:00:00"]))


def _read_cleanly(path: Path) -> None:
    with watchdog(2.0):
        try:
            trace = read_trace(path)
        except (SpecError, UsageError) as err:
            assert str(err).strip()
            return
    assert trace.requests and trace.requests[0].at_s == 0.0
    assert all(a.at_s <= b.at_s for a, b in zip(trace.requests, trace.requests[1:], strict=False))
    assert all(r.input_tokens >= 1 and r.output_tokens >= 1 for r in trace.requests)


@FUZZ
@given(st.binary(max_size=300), st.booleans())
def test_any_bytes_end_in_our_errors_or_a_trace(tmp_path_factory: pytest.TempPathFactory, data: bytes,
                                                packed: bool) -> None:
    path = tmp_path_factory.mktemp("bytes") / "t"
    path.write_bytes(gzip.compress(data) if packed else data)
    _read_cleanly(path)


@FUZZ
@given(st.lists(MOONCAKE_ROWS, min_size=1, max_size=6))
def test_any_mooncake_rows_end_in_our_errors_or_a_trace(tmp_path_factory: pytest.TempPathFactory,
                                                        rows: list[dict[str, object]]) -> None:
    path = tmp_path_factory.mktemp("rows") / "t.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows))  # json.dumps writes NaN: the reader refuses it
    _read_cleanly(path)


@FUZZ
@given(st.sampled_from([AZURE, BURSTGPT]), st.lists(st.lists(CSV_CELLS, max_size=7), min_size=1, max_size=5))
def test_any_csv_rows_end_in_our_errors_or_a_trace(tmp_path_factory: pytest.TempPathFactory, fixture: Path,
                                                   rows: list[list[str]]) -> None:
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    head = fixture.read_text().splitlines()[0]
    path.write_text("\n".join([head, *(",".join(row) for row in rows)]))
    _read_cleanly(path)


def test_mooncake_hashes_are_kept_with_their_block_size(tmp_path: Path) -> None:
    trace = read_trace(_write(tmp_path, '{"timestamp": 5, "input_length": 600, "output_length": 2, '
                                        '"hash_ids": [7, 8]}\n'))
    assert trace.requests[0].prefix_blocks == (7, 8) and trace.block_tokens == BLOCK_TOKENS


def test_arrivals_spanning_more_than_ten_years_are_a_unit_mix_up(tmp_path: Path) -> None:
    head = BURSTGPT.read_text().splitlines()[0]
    text = _problems(_write(tmp_path, f"{head}\n-1e308,x,4,3,7,API log\n1e308,x,4,3,7,API log\n", "b.csv"))
    assert "timestamps: span more than ten years (got 'inf s')" in text and "seconds from the start" in text


def test_a_mooncake_row_of_zero_tokens_is_skipped_and_counted_as_a_csv_row_is(tmp_path: Path) -> None:
    trace = read_trace(_write(tmp_path, '{"timestamp": 0, "input_length": 0, "output_length": 2}\n'
                                        '{"timestamp": 1, "input_length": 3, "output_length": 0}\n'
                                        '{"timestamp": 2, "input_length": 3, "output_length": 2}\n'))
    assert len(trace.requests) == 1
    assert "1 skipped (input_length 0), 1 skipped (output_length 0)" in trace.source


def test_rows_aiperf_cannot_replay_are_counted_and_the_writer_refuses_them(tmp_path: Path) -> None:
    """aiperf's PromptGenerator._build_token_sequence (prompt.py:629-669): the oracle of both rules."""
    rows = [(500, [1, 2, 3]), (600, [7, 8]), (300, [8]), (1024, [7])]
    trace = read_trace(_write(tmp_path, "".join(
        json.dumps({"timestamp": t, "input_length": n, "output_length": 2, "hash_ids": h}) + "\n"
        for t, (n, h) in enumerate(rows))))
    assert len(trace.requests) == 4  # read for the summary, as every row says what arrived
    assert ("2 rows aiperf would refuse to replay, first line 1 has 3 prefix hashes of 512 tokens for a 500-token "
            "prompt: aiperf cannot build it") in trace.source
    with pytest.raises(UsageError, match="request 1 has 3 prefix hashes of 512 tokens for a 500-token prompt"):
        write_mooncake(trace, tmp_path / "out.jsonl")
    with pytest.raises(UsageError, match="request 2 uses hash 8 as a block of 300 tokens, which an earlier request "
                                         "used as 88: aiperf refuses a hash of two sizes; give a partial last"):
        write_mooncake(Trace(requests=trace.requests[1:3], source="t", block_tokens=512), tmp_path / "out.jsonl")


def test_csv_quirks_of_real_files_are_read(tmp_path: Path) -> None:
    """A byte-order mark, CRLF line ends, quoted fields, extra columns, and the 2024 Azure time (a zone, sometimes
    no fraction: ``2024-05-10 00:00:00.009930+00:00``)."""
    path = tmp_path / "t.csv"
    path.write_bytes("\ufeffTIMESTAMP,ContextTokens,GeneratedTokens,Extra\r\n"
                     '2024-05-10 00:00:00.009930+00:00,"1,024",7,x\r\n'.replace('"1,024"', '"1024"').encode()
                     + b'"2024-05-10 00:00:01+00:00",20,"8",y\r\n2024-05-10 00:00:02.5,30,9,z\r\n')
    trace = read_trace(path)
    assert [(r.at_s, r.input_tokens, r.output_tokens) for r in trace.requests] == [
        (0.0, 1024, 7), (pytest.approx(0.99007, abs=1e-12), 20, 8), (pytest.approx(2.49007, abs=1e-12), 30, 9)]
    assert "Azure LLM inference CSV" in trace.source


def test_a_trace_is_read_from_a_pipe(tmp_path: Path) -> None:
    """A pipe cannot seek back over the gzip magic bytes (``summary <(zcat f)``): they are peeked."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    payload = gzip.compress(b'{"timestamp": 0, "input_length": 3, "output_length": 2}\n')
    writer = threading.Thread(target=fifo.write_bytes, args=(payload,))
    writer.start()
    try:
        trace = read_trace(fifo)
    finally:
        writer.join(timeout=5)
    assert [(r.input_tokens, r.output_tokens) for r in trace.requests] == [(3, 2)]


def test_a_read_trace_is_held_as_packed_columns_and_equals_its_requests(tmp_path: Path) -> None:
    rows = [(5, 600, 3, [1, 2]), (2, 10, 4, []), (9, 512, 5, [1])]
    path = _write(tmp_path, "".join(json.dumps({"timestamp": t, "input_length": i, "output_length": o, "hash_ids": h})
                                    + "\n" for t, i, o, h in rows))
    trace = read_trace(path)
    assert isinstance(trace.requests, PackedRequests)
    expected = (TraceRequest(at_s=0.0, input_tokens=10, output_tokens=4),
                TraceRequest(at_s=0.003, input_tokens=600, output_tokens=3, prefix_blocks=(1, 2)),
                TraceRequest(at_s=0.007, input_tokens=512, output_tokens=5, prefix_blocks=(1,)))
    assert trace.requests == expected and tuple(trace.requests) == expected
    assert trace.requests[-1] == expected[-1] and trace.requests[1:] == expected[1:]
    with pytest.raises(IndexError):
        trace.requests[3]


def _mooncake_rows(times: list[float]) -> str:
    return "".join(json.dumps({"timestamp": t, "input_length": 100, "output_length": 10}) + "\n" for t in times)


def test_a_mooncake_file_in_seconds_gets_a_unit_hint(tmp_path: Path) -> None:
    """Arrivals written in seconds read 1,000 times too fast: the note names the likely unit error and its fix,
    whether the rate gives it away (two hours' 20,000 requests within 7.2 s) or short, fractional times do."""
    busy = read_trace(_write(tmp_path, _mooncake_rows([i * 7200 // 19_999 for i in range(20_000)])))
    assert "timestamps look like seconds, not milliseconds" in busy.source and "multiply them by 1,000" in busy.source
    short = read_trace(_write(tmp_path, _mooncake_rows([i * 7200 / 199 for i in range(200)]), "short.jsonl"))
    assert "timestamps look like seconds, not milliseconds" in short.source
    in_ms = read_trace(_write(tmp_path, _mooncake_rows([i * 7_200_000 // 199 for i in range(200)]), "ms.jsonl"))
    assert "look like" not in in_ms.source


def test_a_burstgpt_file_in_milliseconds_gets_a_unit_hint(tmp_path: Path) -> None:
    header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    rows = "".join(f"{i * 36_000_000 / 199:.0f},ChatGPT,100,10,110,Conversation log\n" for i in range(200))
    text = read_trace(_write(tmp_path, header + rows, "b.csv")).source
    assert "timestamps look like milliseconds, not seconds" in text and "divide them by 1,000" in text


def test_too_few_rows_say_nothing_about_the_unit(tmp_path: Path) -> None:
    assert "look like" not in read_trace(_write(tmp_path, _mooncake_rows([i / 1000 for i in range(99)]))).source
