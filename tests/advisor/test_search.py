"""``search(spec, traffic)``: the fewest nodes meeting the SLAs, every candidate through ``check()``."""

from __future__ import annotations

import math

import pytest

from hyperpod_dpd.advisor import NoLayoutMeetsSla, SearchResult, Traffic, search
from hyperpod_dpd.advisor.search import layout, pd_buffer_for
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.planner import plan
from hyperpod_dpd.planner.assumptions import CUDA_CONTEXT_HEADROOM_BYTES
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.validation import check

LONG_PROMPTS = Traffic(isl=8192, osl=512, concurrency=(64,), ttft_ms=2000, tpot_ms=30)


@pytest.fixture(scope="module")
def found() -> SearchResult:
    return search(default_spec(), LONG_PROMPTS)


def test_best_layouts_meet_the_sla_fewest_nodes_first(found: SearchResult) -> None:
    assert found.best
    nodes = [c.nodes for c in found.best]
    assert nodes == sorted(nodes)
    for candidate in found.best:
        assert not candidate.misses
        assert candidate.estimate.ttft_s <= 2.0 and candidate.estimate.tpot_s <= 0.030


def test_no_smaller_layout_meets_the_sla(found: SearchResult) -> None:
    """Two nodes (the smallest DPD layout) cannot serve 64 long requests within the SLA."""
    assert found.best[0].nodes > 2
    with pytest.raises(NoLayoutMeetsSla):
        search(default_spec(), LONG_PROMPTS, max_nodes=found.best[0].nodes - 1)


def test_every_best_layout_passes_check_with_whole_nodes(found: SearchResult) -> None:
    for candidate in found.best:
        spec = check(candidate.spec).spec
        gpus = spec.instance_type.facts.gpus
        tp = spec.tensor_parallel_size
        assert spec.prefill.replicas * tp == candidate.prefill_nodes * gpus
        assert spec.decode.replicas * tp == candidate.decode_nodes * gpus


def test_default_search_only_tries_layouts_the_operator_runs(found: SearchResult) -> None:
    """F1: one decoder of whole nodes, so --write-spec never writes a multi-decoder layout."""
    for candidate in found.best:
        assert candidate.runnable
        assert candidate.spec.decode.replicas == 1
        assert candidate.spec.tensor_parallel_size == 8
        assert not any("[SingleDecoder]" in w for w in candidate.warnings)


def test_any_layout_ranks_runnable_layouts_first() -> None:
    """The audit's case: at concurrency 32 a 2-decoder TP4 layout met the SLA on 2 nodes and came first."""
    traffic = Traffic(isl=4096, osl=256, concurrency=(32,), ttft_ms=1000, tpot_ms=20)
    result = search(default_spec(), traffic, any_layout=True, top=50)
    flags = [c.runnable for c in result.best]
    assert flags == sorted(flags, reverse=True)
    assert result.best[0].runnable and result.best[0].spec.decode.replicas == 1


def test_nodes_are_the_stacks_node_count(found: SearchResult) -> None:
    for candidate in found.best:
        spec = candidate.spec
        assert candidate.nodes == sum(spec.role_nodes(role) for _, role in spec.roles())
        assert candidate.estimate.usd_per_hour == pytest.approx(candidate.nodes * 63.296)


def test_pd_buffer_holds_the_decoders_transfers_and_leaves_headroom(found: SearchResult) -> None:
    for candidate in found.best:
        spec = candidate.spec
        sized = plan(spec, prompt_tokens=LONG_PROMPTS.isl)
        transfers = spec.kv_cache.pd_buffer_size.bytes // sized.request.kv_bytes_per_rank
        gpu = spec.instance_type.facts.gpu_memory.bytes
        headroom = gpu - int(gpu * spec.gpu_memory_utilization) - spec.kv_cache.pd_buffer_size.bytes
        assert transfers >= (spec.decode.max_num_seqs or 0) or headroom < CUDA_CONTEXT_HEADROOM_BYTES + 2**30
        assert headroom >= CUDA_CONTEXT_HEADROOM_BYTES


def test_pd_buffer_arithmetic() -> None:
    spec = default_spec()  # TP 8: one KV head per rank, 10 MiB per 256-token chunk
    assert pd_buffer_for(spec, decode_max_num_seqs=32, isl=4096).bytes == 8 * 2**30  # 5 GiB needed, 8Gi kept
    assert pd_buffer_for(spec, decode_max_num_seqs=100, isl=4096).bytes == 16 * 2**30  # 15.6 GiB -> 16
    assert pd_buffer_for(spec, decode_max_num_seqs=1000, isl=4096).bytes == 19 * 2**30  # capped: 80 - 60 - 1


def test_layout_caps_the_decoder_batch_by_its_kv_cache() -> None:
    shaped = layout(default_spec(), tensor_parallel_size=8, prefill_nodes=1, decode_nodes=1, concurrency=4096,
                    isl=4096, osl=256)
    room = plan(shaped, prompt_tokens=4096).decode.kv_cache_tokens // (4096 + 256)
    assert shaped.decode.max_num_seqs == room
    assert shaped.prefill.max_num_seqs == 16
    small = layout(default_spec(), tensor_parallel_size=4, prefill_nodes=2, decode_nodes=1, concurrency=6,
                   isl=4096, osl=256)
    assert (small.prefill.replicas, small.decode.replicas) == (4, 2)
    assert (small.prefill.max_num_seqs, small.decode.max_num_seqs) == (2, math.ceil(6 / 2))


def test_request_rate_search() -> None:
    result = search(default_spec(), Traffic(isl=4096, osl=256, request_rate=6.0, ttft_ms=1500))
    best = result.best[0]
    assert best.estimate.requests_per_s == 6.0 and best.estimate.sustains_load
    assert best.estimate.capacity_requests_per_s > 6.0
    assert best.estimate.ttft_s <= 1.5
    assert result.load == "6 requests/s"


def test_unmeetable_sla_names_the_closest() -> None:
    with pytest.raises(NoLayoutMeetsSla) as caught:
        search(default_spec(), Traffic(isl=4096, osl=256, concurrency=(32,), tpot_ms=3))
    assert caught.value.closest is not None
    assert "no DPD layout of up to 8 nodes meets TPOT <= 3 ms at concurrency 32" in str(caught.value)
    assert "Relax the SLA" in str(caught.value)


@pytest.mark.parametrize(("traffic", "options", "field"), [
    (Traffic(isl=4096, osl=256, concurrency=(8, 16), ttft_ms=500), {}, "traffic.concurrency"),
    (Traffic(isl=4096, osl=256, concurrency=(8,)), {}, "traffic.ttft_ms"),
    (Traffic(isl=4096, osl=256, concurrency=(8,), ttft_ms=500), {"max_nodes": 1}, "max_nodes"),
    (Traffic(isl=4096, osl=256, concurrency=(8,), ttft_ms=500), {"top": 0}, "top"),
])
def test_bad_search_input(traffic: Traffic, options: dict[str, int], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        search(default_spec(), traffic, **options)
    assert field in [problem.field for problem in caught.value.problems]
