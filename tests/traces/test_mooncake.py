"""Mooncake JSONL against aiperf's own loader (aiperf==0.13.0): its shipped samples, its row model, the writer."""

from __future__ import annotations

import gzip
import json
import random
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiperf.common.exceptions import ConfigurationError
from aiperf.dataset.generator.prompt import PromptGenerator
from aiperf.dataset.loader.models import MooncakeTrace
from aiperf.dataset.loader.mooncake_trace import MooncakeTraceDatasetLoader
from aiperf.dataset.synthesis.prefix_analyzer import PrefixAnalyzer
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support import fuzz_examples

from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.traces import (
    BLOCK_TOKENS,
    Lengths,
    LengthShape,
    PrefixGroups,
    Trace,
    TraceRequest,
    generate,
    mooncake_lines,
    read_trace,
    summarise,
    write_mooncake,
)
from hyperpod_dpd.traces.mooncake import parse_row
from hyperpod_dpd.traces.rows import BadRow, Skip

SAMPLES = resources.files("aiperf") / "config" / "templates" / "data"
SAMPLE_NAMES = ("production_trace.jsonl", "precise_schedule.jsonl")


def _aiperf_rows(path: Path) -> list[MooncakeTrace]:
    """Each row as aiperf's loader models it (its loader reads each non-blank line: base_loader.py:186-194)."""
    return [MooncakeTrace.model_validate(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_aiperfs_shipped_samples_read_as_aiperf_reads_them(name: str) -> None:
    path = Path(str(SAMPLES / name))
    theirs = _aiperf_rows(path)
    ours = read_trace(path)
    assert len(ours.requests) == len(theirs) > 0
    first = min(float(row.timestamp or 0) for row in theirs)
    for mine, row in zip(ours.requests, sorted(theirs, key=lambda r: float(r.timestamp or 0)), strict=True):
        assert mine.at_s == pytest.approx((float(row.timestamp or 0) - first) / 1e3, abs=1e-12)  # ms -> s
        assert (mine.input_tokens, mine.output_tokens) == (row.input_length, row.output_length)
        assert mine.prefix_blocks == tuple(row.hash_ids or ())
    assert ours.block_tokens == BLOCK_TOKENS == 512


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_prefix_reuse_per_request_is_aiperfs_cache_hit_rate(name: str) -> None:
    path = Path(str(SAMPLES / name))
    expected = PrefixAnalyzer().analyze_file(path).cache_hit_rate  # its `aiperf analyze-trace` figure
    assert summarise(read_trace(path)).prefix_reuse_per_request == pytest.approx(expected, abs=1e-12)


def test_prefix_reuse_of_a_shared_prefix_trace_is_aiperfs_too(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    trace = generate("shared-prefix", rate_per_s=3, duration_s=300, seed=8)
    write_mooncake(trace, path)
    reuse = summarise(trace).prefix_reuse_per_request
    assert reuse == pytest.approx(PrefixAnalyzer().analyze_file(path).cache_hit_rate, abs=1e-12) and reuse > 0.1


def test_precise_schedule_has_the_figures_its_file_holds() -> None:
    trace = read_trace(Path(str(SAMPLES / "precise_schedule.jsonl")))
    assert trace.duration_s == 5.0 and trace.requests[4].prefix_blocks == (3005, 3050)


def _roundtrip(tmp_path: Path, trace: Trace, name: str) -> Trace:
    path = tmp_path / name
    write_mooncake(trace, path)
    return read_trace(path)


@pytest.mark.parametrize("name", ["t.jsonl", "t.jsonl.gz"])
def test_the_writer_round_trips_through_the_reader(tmp_path: Path, name: str) -> None:
    trace = generate("shared-prefix", rate_per_s=5, duration_s=120, seed=3)
    back = _roundtrip(tmp_path, trace, name)
    assert len(back.requests) == len(trace.requests)
    for a, b in zip(trace.requests, back.requests, strict=True):
        assert b.at_s == pytest.approx(a.at_s, abs=1e-9)  # written in ms rounded to the nanosecond's 1e-6 ms
        assert (a.input_tokens, a.output_tokens, a.prefix_blocks) == (b.input_tokens, b.output_tokens,
                                                                      b.prefix_blocks)
    assert back.block_tokens == BLOCK_TOKENS
    if name.endswith(".gz"):
        assert gzip.decompress((tmp_path / name).read_bytes()).startswith(b'{"timestamp": 0, ')


class _CorpusRng(random.Random):
    def reseed_for_hash_id(self, hash_id: int) -> None:
        self.seed(hash_id)


def _stub() -> SimpleNamespace:
    return SimpleNamespace(_cache={}, _hash_id_corpus_rng=_CorpusRng(0), _tokenized_corpus=list(range(1000)),
                           tokenizer=SimpleNamespace(block_separation_token_id=None), _sample_tokens=lambda n: [0] * n)


def _aiperf_prompts(rows: list[MooncakeTrace]) -> list[list[int]]:
    """Each row's prompt as aiperf builds it: its own ``PromptGenerator._build_token_sequence``
    (aiperf/dataset/generator/prompt.py:576-679) on one generator per file, with a stub corpus and no tokenizer
    (the method only samples corpus ids; the stub keeps the hash-id cache, the part that refuses)."""
    stub = _stub()
    return [PromptGenerator._build_token_sequence(stub, row.input_length or 0, row.hash_ids or [], BLOCK_TOKENS)
            for row in rows]


def test_every_row_written_is_one_aiperfs_loader_takes(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_mooncake(generate("shared-prefix", rate_per_s=4, duration_s=120, seed=1), path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows and all(MooncakeTraceDatasetLoader.can_load(data=row) for row in rows)  # its own format probe
    parsed = _aiperf_rows(path)
    assert all(row.timestamp is not None and row.output_length for row in parsed)  # fixed_schedule.py:88-92
    assert sum(1 for row in parsed if row.hash_ids) == len(parsed)
    assert [len(p) for p in _aiperf_prompts(parsed)] == [row.input_length for row in parsed]


@settings(max_examples=fuzz_examples(40), deadline=None)
@given(kind=st.sampled_from(["shared-prefix", "bursty", "diurnal"]), seed=st.integers(0, 2**32),
       mean=st.integers(1, 6000), fixed=st.booleans(), groups=st.integers(1, 20), shared=st.integers(1, 8))
@example(kind="shared-prefix", seed=1, mean=1024, fixed=False, groups=8, shared=2)  # the default, 99 % refused once
def test_every_generated_prompt_is_one_aiperf_builds(*, kind: str, seed: int, mean: int, fixed: bool, groups: int,
                                                     shared: int) -> None:
    """aiperf builds every prompt of every generated trace at its length (a partial block is never shared)."""
    shape = LengthShape.FIXED if fixed else LengthShape.LOGNORMAL
    trace = generate(kind, rate_per_s=2, duration_s=60, seed=seed, input_tokens=Lengths(mean=mean, shape=shape),
                     prefix=PrefixGroups(groups=groups, shared_blocks=shared))
    rows = [MooncakeTrace.model_validate_json(line) for line in mooncake_lines(trace)]
    assert [len(p) for p in _aiperf_prompts(rows)] == [r.input_tokens for r in trace.requests]


def _aiperf_refusals(rows: list[MooncakeTrace]) -> list[int]:
    """The 1-based rows aiperf's builder refuses, going on past each (one generator, its cache kept)."""
    stub = _stub()
    refused = []
    for number, row in enumerate(rows, 1):
        try:
            PromptGenerator._build_token_sequence(stub, row.input_length or 0, row.hash_ids or [], BLOCK_TOKENS)
        except ConfigurationError:
            refused.append(number)
    return refused


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_the_rows_counted_unreplayable_are_the_rows_aiperfs_builder_refuses(name: str) -> None:
    """aiperf's shipped samples hold such rows (production_trace.jsonl: 1,024 tokens under 3 hashes;
    precise_schedule.jsonl: hash 3050 at 288 then 88 tokens): its own builder refuses them, and we count the same."""
    path = Path(str(SAMPLES / name))
    refused = _aiperf_refusals(_aiperf_rows(path))
    source = read_trace(path).source
    assert f"{len(refused)} rows aiperf would refuse to replay, first line {refused[0]} " in source
    assert refused  # both samples show it


def test_a_trace_of_other_block_sizes_is_not_written_as_512_token_blocks(tmp_path: Path) -> None:
    trace = Trace(requests=(TraceRequest(at_s=0, input_tokens=32, output_tokens=1, prefix_blocks=(1, 2)),),
                  source="a Bailian trace", block_tokens=16)
    with pytest.raises(UsageError, match="cover 16 tokens, but aiperf reads Mooncake hash_ids as 512-token"):
        write_mooncake(trace, tmp_path / "t.jsonl")
    with pytest.raises(UsageError, match="cannot write the trace"):
        write_mooncake(generate("poisson", duration_s=5), tmp_path / "no" / "such" / "folder.jsonl")


ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 5000), st.floats(-1e4, 1e4), st.text(max_size=4),
                st.integers(-(10**400), 10**400), st.floats(),  # past int64, MAX_TOKENS and a float; NaN, infinities
                st.lists(st.one_of(st.integers(-3, 3), st.booleans(), st.floats(-2, 2), st.integers(-(2**70), 2**70)),
                         max_size=3),
                st.just({"prompt": "x"}), st.just([{"role": "user", "content": "x"}]))
ROWS = st.one_of(
    st.dictionaries(st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids", "text_input",
                                     "messages", "payload", "delay"]), ANY),
    st.fixed_dictionaries({"timestamp": ANY, "input_length": ANY, "output_length": ANY},  # mostly rows we size
                          optional={"hash_ids": ANY, "text_input": ANY, "delay": ANY}))


@settings(max_examples=fuzz_examples(300), deadline=None)
@given(ROWS)
@example({"timestamp": 1.5, "input_length": 3.0, "output_length": 2, "hash_ids": [1, 9]})  # the accepted path, surely
def test_every_row_we_accept_aiperfs_model_accepts_with_the_same_figures(row: dict[str, Any]) -> None:
    """We are never looser than aiperf (models.py MooncakeTrace): a row we size is one it replays as sized."""
    try:
        at, mine = parse_row(json.dumps(row))
    except (BadRow, Skip):
        return
    try:
        theirs = MooncakeTrace.model_validate(row)
    except ValidationError as err:
        raise AssertionError(f"we accept {row!r}, aiperf refuses it: {err}") from err
    assert (mine.input_tokens, mine.output_tokens, at) == (theirs.input_length, theirs.output_length,
                                                           theirs.timestamp)
    assert mine.prefix_blocks == tuple(theirs.hash_ids or ())
