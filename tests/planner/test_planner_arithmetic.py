"""Hand-checked figures for the presets; the arithmetic is written out next to each assertion."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperpod_dpd import ByteSize, InstanceType, RoleSpec, RoutingSpec
from hyperpod_dpd.planner import chunks_for, kv_bytes_per_token, kv_bytes_per_token_per_rank, plan, prefill_flops
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import PRESETS, architectures_data, estimate_parameters
from hyperpod_dpd.spec.defaults import default_spec

GIB = 2**30
MIB = 2**20


def spec_for(model_name: str, **changes: object) -> DpdSpec:
    base = default_spec()
    return replace(base, model=replace(base.model, name=model_name), **changes)  # type: ignore[arg-type]


def test_llama_3_3_70b_default_spec_figures() -> None:
    p = plan(default_spec())
    # 2 (K, V) x 80 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) = 327,680 B per token
    assert p.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    # TP 8 -> 1 KV head per rank: 2 x 80 x 1 x 128 x 2 = 40,960 B
    assert p.kv_heads_per_rank == 1
    assert p.kv_bytes_per_token_per_rank == 40_960
    # one 256-token chunk per rank: 256 x 40,960 = 10,485,760 B = 10 MiB
    assert p.kv_bytes_per_chunk_per_rank == 10 * MIB
    # 8 GiB = 8,192 MiB -> 819 whole 10 MiB chunks (819.2 aligned down)
    assert p.pd_buffer_chunks == 819
    assert p.pd_buffer_aligned_bytes == 819 * 10 * MIB
    # at the 4,096-token threshold: 16 chunks = 160 MiB per rank; 819 // 16 = 51 transfers
    assert p.request.tokens == 4096
    assert p.request.chunks == 16
    assert p.request.kv_bytes_per_rank == 160 * MIB == 167_772_160
    assert p.request.pd_buffer_transfers == 51
    # at max_model_len 16,384: 64 chunks = 640 MiB per rank; 819 // 64 = 12 transfers
    assert p.at_max_model_len.kv_bytes_per_rank == 640 * MIB
    assert p.at_max_model_len.pd_buffer_transfers == 12
    # 4,096 x 40,960 x 8 ranks = 1,342,177,280 B over 3,200 Gbps = 400 GB/s -> 3.355 ms
    assert p.request.kv_bytes_all_ranks == 4096 * 327_680 == 1_342_177_280
    assert p.request.transfer_seconds_at_line_rate == pytest.approx(1_342_177_280 / 400e9)
    # weights: 70,553,706,496 params x 2 B = 141,107,412,992 B; / 8 = 17,638,426,624 B per GPU
    assert p.weights_bytes == 141_107_412_992
    assert p.weights_bytes_per_gpu == 17_638_426_624
    # decode GPU: 80 GiB x 0.75 = 60 GiB share; 60 GiB - 17,638,426,624 - 4 GiB reserve = 42,491,115,520 B
    assert p.decode.vllm_share_bytes == 60 * GIB
    assert p.decode.kv_cache_bytes_per_gpu == 60 * GIB - 17_638_426_624 - 4 * GIB == 42_491_115_520
    # / 40,960 B per token = 1,037,380 tokens; / 16,384 = 63 max-length sequences (>= max_num_seqs 32)
    assert p.decode.kv_cache_tokens == 1_037_380
    assert p.decode.max_length_sequences == 63
    assert (p.prefill.max_num_seqs, p.decode.max_num_seqs) == (16, 32)
    # outside the share: 80 GiB - 60 GiB - 8 GiB buffer = 12 GiB
    assert p.decode.headroom_bytes == 12 * GIB
    assert p.problems == ()
    assert p.warnings == ()


def test_blog_sanity_8000_tokens_is_single_digit_milliseconds() -> None:
    p = plan(default_spec(), prompt_tokens=8000)
    # 8,000 x 327,680 B = 2,621,440,000 B; / 400e9 B/s = 6.55 ms: "single-digit ms" on 3,200 Gbps EFA
    assert p.request.kv_bytes_all_ranks == 2_621_440_000
    assert p.request.transfer_seconds_at_line_rate == pytest.approx(0.0065536)
    # 8,000 tokens -> ceil(8000 / 256) = 32 chunks (31.25 rounded up) -> 320 MiB per rank
    assert p.request.chunks == 32
    assert p.request.kv_bytes_per_rank == 320 * MIB


def test_llama_3_1_8b_at_tp1() -> None:
    p = plan(spec_for("Llama-3.1-8B-Instruct", tensor_parallel_size=1))
    # 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B per token, all on the one rank
    assert p.kv_bytes_per_token == p.kv_bytes_per_token_per_rank == 2 * 32 * 8 * 128 * 2 == 131_072
    # chunk: 256 x 128 KiB = 32 MiB; 8 GiB / 32 MiB = 256 chunks; 4,096 tokens = 16 chunks = 512 MiB; 16 transfers
    assert p.kv_bytes_per_chunk_per_rank == 32 * MIB
    assert p.pd_buffer_chunks == 256
    assert p.request.kv_bytes_per_rank == 512 * MIB
    assert p.request.pd_buffer_transfers == 16
    # weights: 8,030,261,248 x 2 B = 16,060,522,496 B on one GPU
    assert p.weights_bytes_per_gpu == 16_060_522_496
    # KV: 60 GiB - 16,060,522,496 - 4 GiB = 44,069,019,648 B / 131,072 = 336,219 tokens / 16,384 = 20 sequences
    assert p.decode.kv_cache_tokens == (60 * GIB - 16_060_522_496 - 4 * GIB) // 131_072 == 336_219
    assert p.decode.max_length_sequences == 20
    codes = {w.code for w in p.warnings}
    # 16 transfers < decoder's 32 seqs; 20 sequences < 32; 8B params < 30B
    assert codes == {"PdBufferBelowMaxNumSeqs", "KvCacheBelowMaxNumSeqs", "SmallModel"}


def test_llama_3_1_8b_at_tp8_replicates_kv_heads() -> None:
    p = plan(spec_for("Llama-3.1-8B-Instruct"))
    # 8 KV heads / TP 8 = 1 per rank: 2 x 32 x 1 x 128 x 2 = 16,384 B per token per rank
    assert p.kv_bytes_per_token_per_rank == 16_384
    assert "KvHeadsReplicated" not in {w.code for w in p.warnings}


def test_qwen2_5_72b_figures() -> None:
    p = plan(spec_for("Qwen2.5-72B-Instruct"))
    # Qwen2.5-72B config.json: 80 layers, 64 heads, 8 KV heads, head_dim 8192 / 64 = 128 -> same KV as Llama 70B
    assert p.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680
    # weights: 72,706,203,648 x 2 = 145,412,407,296 B; / 8 = 18,176,550,912 B per GPU
    assert p.weights_bytes_per_gpu == 145_412_407_296 // 8 == 18_176_550_912
    assert p.problems == ()


def test_mistral_large_figures() -> None:
    p = plan(spec_for("Mistral-Large-Instruct-2407"))
    # 88 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 360,448 B per token; per rank (TP 8) 45,056 B
    assert p.kv_bytes_per_token == 2 * 88 * 8 * 128 * 2 == 360_448
    assert p.kv_bytes_per_token_per_rank == 45_056
    # 122,610,069,504 params x 2 B / 8 = 30,652,517,376 B per GPU: fits the 60 GiB share
    assert p.weights_bytes_per_gpu == 30_652_517_376
    assert p.problems == ()


def test_mixtral_counts_active_parameters_for_compute() -> None:
    arch = PRESETS["mixtral-8x7b"]
    # 6 idle experts x 32 layers x 3 x 4096 x 14,336 = 33,822,867,456 params skipped per token
    assert arch.active_parameters == 46_702_792_704 - 6 * 32 * 3 * 4096 * 14_336 == 12_879_925_248
    p = plan(spec_for("Mixtral-8x7B-Instruct-v0.1"))
    assert p.weights_bytes == 46_702_792_704 * 2  # memory holds every expert
    assert "SmallModel" in {w.code for w in p.warnings}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_parameter_counts_match_their_shape(name: str) -> None:
    arch = PRESETS[name]
    # The published table records each config.json: its tied embeddings and attention bias are known exactly.
    config = {e["name"]: e["config"] for e in architectures_data()["entries"]}.get(name)
    tied = bool(config.get("tie_word_embeddings")) if config else False
    bias = bool(config.get("attention_bias")) if config else name.startswith("qwen")
    estimate = estimate_parameters(
        layers=arch.num_layers, hidden=arch.hidden_size, heads=arch.num_attention_heads, kv_heads=arch.num_kv_heads,
        head_dim=arch.head_dim, vocab=arch.vocab_size, intermediate=arch.intermediate_size,
        experts=arch.num_experts, tied=tied, attention_bias=bias)
    assert abs(estimate - arch.num_parameters) / arch.num_parameters < 1e-3
    assert arch.num_attention_heads % arch.num_kv_heads == 0
    assert arch.problems() == []


def test_llama_8b_parameter_count_by_hand() -> None:
    # per layer: attention 4096 x 32 x 128 x 2 + 4096 x 8 x 128 x 2 = 41,943,040; MLP 3 x 4096 x 14,336 = 176,160,768;
    # norms 2 x 4096 -> 218,112,000 x 32 = 6,979,584,000; embeddings + LM head 2 x 128,256 x 4096 = 1,050,673,152;
    # final norm 4096 -> 8,030,261,248
    assert PRESETS["llama-3.1-8b"].num_parameters == 32 * (41_943_040 + 176_160_768 + 8192) + 1_050_673_152 + 4096


@pytest.mark.parametrize(("tokens", "chunks"), [(1, 1), (255, 1), (256, 1), (257, 2), (512, 2), (513, 3),
                                                (4096, 16), (8000, 32), (16_384, 64)])
def test_chunk_rounding(tokens: int, chunks: int) -> None:
    assert chunks_for(tokens, 256) == chunks


def test_request_bytes_are_whole_chunks() -> None:
    # a 257-token prompt occupies 2 chunks: 512 x 40,960 B per rank, not 257 x 40,960
    p = plan(default_spec(), prompt_tokens=257)
    assert p.request.kv_bytes_per_rank == 2 * 256 * 40_960
    # the bytes moved are the exact tokens: 257 x 327,680
    assert p.request.kv_bytes_all_ranks == 257 * 327_680
    one = plan(default_spec(), prompt_tokens=1)
    assert one.request.chunks == 1
    assert one.request.pd_buffer_transfers == 819


def test_chunk_size_comes_from_the_spec() -> None:
    base = default_spec()
    p = plan(replace(base, kv_cache=replace(base.kv_cache, chunk_tokens=512)))
    # 512 x 40,960 = 20 MiB chunks; 8,192 MiB / 20 = 409 chunks; 4,096 tokens = 8 chunks -> 51 transfers
    assert p.kv_bytes_per_chunk_per_rank == 20 * MIB
    assert p.pd_buffer_chunks == 409
    assert p.request.chunks == 8
    assert p.request.pd_buffer_transfers == 51


def test_prefill_compute_estimate() -> None:
    arch = PRESETS["llama-3.3-70b"]
    # 2 x 70,553,706,496 x 4,096 + 2 x 80 x 4,096^2 x 64 x 128 FLOPs
    flops = 2 * 70_553_706_496 * 4096 + 2 * 80 * 4096 * 4096 * 64 * 128
    assert prefill_flops(arch, 4096) == pytest.approx(flops)
    p = plan(default_spec())
    # / (8 GPUs x 989e12 FLOP/s x 0.4 MFU) = about 0.19 s, some 56x the 3.4 ms transfer
    assert p.request.prefill_compute_seconds == pytest.approx(flops / (8 * 989e12 * 0.4))
    assert 0.15 < p.request.prefill_compute_seconds < 0.25


def test_b300_uses_its_own_line_rate_and_flops() -> None:
    p = plan(replace(default_spec(), instance_type=InstanceType.P6_B300_48XLARGE))
    # 6,400 Gbps = 800 GB/s: half the p5's 3.355 ms
    assert p.network_bytes_per_second == 800e9
    assert p.request.transfer_seconds_at_line_rate == pytest.approx(1_342_177_280 / 800e9)
    assert p.peak_tflops_per_gpu == 2250.0


def test_role_overrides_change_role_memory() -> None:
    base = default_spec()
    spec = replace(base, decode=RoleSpec(gpu_memory_utilization=0.6, max_num_seqs=8))
    p = plan(spec)
    assert p.decode.vllm_share_bytes == int(80 * GIB * 0.6)
    assert p.decode.max_num_seqs == 8
    assert p.prefill.vllm_share_bytes == 60 * GIB


def test_threshold_zero_plans_one_token_requests() -> None:
    p = plan(replace(default_spec(), routing=RoutingSpec(threshold=0)))
    assert p.request.tokens == 1
    assert "ShortRoutingThreshold" in {w.code for w in p.warnings}


@given(tokens=st.integers(1, 131_072), chunk=st.sampled_from([16, 64, 256, 512]),
       buffer_mib=st.integers(64, 65_536))
def test_buffer_occupancy_never_exceeds_the_aligned_buffer(tokens: int, chunk: int, buffer_mib: int) -> None:
    base = default_spec()
    spec = replace(base, max_model_len=131_072,
                   kv_cache=replace(base.kv_cache, chunk_tokens=chunk, pd_buffer_size=ByteSize(buffer_mib * MIB)))
    p = plan(spec, prompt_tokens=tokens)
    request = p.request
    assert (request.chunks - 1) * chunk < tokens <= request.chunks * chunk
    assert request.pd_buffer_transfers * request.kv_bytes_per_rank <= p.pd_buffer_aligned_bytes <= buffer_mib * MIB
    assert (request.pd_buffer_transfers + 1) * request.kv_bytes_per_rank > p.pd_buffer_aligned_bytes


def test_kv_formulas_by_hand_for_every_tp() -> None:
    arch = PRESETS["llama-3.3-70b"]
    assert kv_bytes_per_token(arch) == 327_680
    # TP 1, 2, 4, 8: 8, 4, 2, 1 KV heads per rank
    assert [kv_bytes_per_token_per_rank(arch, tp) for tp in (1, 2, 4, 8)] == [327_680, 163_840, 81_920, 40_960]
