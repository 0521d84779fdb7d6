"""--prefix-share and the prefix-cache hit rate per level and role, from vLLM's own counters."""

from __future__ import annotations

from typing import Any

from hyperpod_dpd.benchmark.proof.disaggregation import (
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    DpdCounters,
    LevelDisaggregation,
)
from hyperpod_dpd.benchmark.report.report import render_results
from hyperpod_dpd.benchmark.run.results import read_directory
from hyperpod_dpd.load_point import Load

ISL, SHARED = 64, 32  # conftest's prefix_run: half of each 64-token prompt is the shared prefix
REQUESTS, WARMUP = 24, 3


def test_every_prompt_of_the_level_starts_with_the_same_prefix(prefix_run: Any) -> None:
    """The stub kept every prompt it was sent: the first 32 tokens (words, with the suite's word-level tokenizer)
    are one prefix, and the rest is each prompt's own."""
    assert prefix_run.returncode == 0, prefix_run.stdout[-3000:] + prefix_run.stderr
    prompts = [prompt.split() for prompt in prefix_run.prompts]
    assert len(prompts) == REQUESTS + WARMUP
    assert all(len(words) == ISL for words in prompts)  # prefix and body together are --isl tokens
    assert len({tuple(words[:SHARED]) for words in prompts}) == 1
    assert len({tuple(words[SHARED:]) for words in prompts}) == len(prompts)
    (level,) = read_directory(prefix_run.folder).levels
    assert level.mean_input_tokens == ISL and level.completed == REQUESTS


def test_the_decoders_prefix_cache_hit_rate_is_read_per_level(prefix_run: Any) -> None:
    """The stub's decoder caches whole blocks of 8 tokens: after the first prompt, each hits its 32-token prefix
    (4 blocks) of 64 queried, so the level's rate is just under a half."""
    (seen,) = prefix_run.routing().values()
    prompts = REQUESTS + WARMUP
    assert seen.prefix_cache == {"decoder": ((prompts - 1) * SHARED, prompts * ISL)}
    rate = seen.prefix_cache_hit_rate("decoder")
    assert rate is not None and 0.45 < rate < 0.5
    assert seen.as_dict()["prefix_cache"]["decoder"]["hit_rate"] == rate
    assert seen.prefix_cache_hit_rate("prefill") is None  # no prefill pod was read


def test_without_the_series_no_rate_is_made_up(closed_loop_run: Any) -> None:
    assert all(seen.prefix_cache == {} for seen in closed_loop_run.routing().values())


def _vllm(hits: int, queries: int, prompt: int) -> str:
    return (f"{PREFIX_CACHE_HITS} {hits}.0\n{PREFIX_CACHE_QUERIES} {queries}.0\n"
            f"vllm:prompt_tokens_total {prompt}.0\n")


def test_each_role_has_its_own_rate_and_a_prefiller_counts_nothing_else() -> None:
    """A prefiller's prompt tokens are not the decoders' (the level's KV check uses the decoders' count only)."""
    router = "dpd_routing_disaggregated_total 0.0\n"
    before = DpdCounters.parse([router], {"d": _vllm(0, 0, 0)}, prefiller={"p": _vllm(0, 0, 0)})
    after = DpdCounters.parse(["dpd_routing_disaggregated_total 10.0\n"], {"d": _vllm(100, 1000, 1000)},
                              prefiller={"p": _vllm(700, 1000, 1000)})
    seen = LevelDisaggregation.between(before, after, load=Load(concurrency=8))
    assert seen.prefix_cache == {"decoder": (100, 1000), "prefill": (700, 1000)}
    assert seen.prefix_cache_hit_rate("prefill") == 0.7 and seen.prefix_cache_hit_rate("decoder") == 0.1
    assert seen.prompt_tokens == 1000 and seen.pod_changes == ()


def test_the_printed_table_has_each_roles_hit_rate(prefix_run: Any) -> None:
    """The PREFIX HIT column shows what --json's routing[].prefix_cache holds: the decoder's rate, and '-' for the
    prefillers, which exported none here."""
    results = read_directory(prefix_run.folder)
    routing = prefix_run.routing()
    (seen,) = routing.values()
    lines = render_results("prefix", results, [], routing).splitlines()
    header = lines[1].split()
    assert header[-11:-8] == ["PREFIX", "HIT", "dec/pre"] and header[-8] == "DISAGG"
    (row,) = [line.split() for line in lines[2:]]
    assert row[-6] == f"{seen.prefix_cache_hit_rate('decoder'):.0%}/-" == "48%/-"
    other = LevelDisaggregation.between(DpdCounters.parse(["dpd_routing_disaggregated_total 0.0\n"], [_vllm(0, 0, 0)],
                                                          prefiller=[_vllm(0, 0, 0)]),
                                        DpdCounters.parse(["dpd_routing_disaggregated_total 9.0\n"],
                                                          [_vllm(0, 0, 90)], prefiller=[_vllm(3, 4, 90)]),
                                        load=seen.load)
    (row,) = [line.split() for line in render_results("p", results, [], {seen.load: other}).splitlines()[2:]]
    assert row[-6] == "-/75%"  # a decoder without the series, a prefiller that hit 3 of 4 tokens
