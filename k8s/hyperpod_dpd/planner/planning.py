"""``plan(spec)``: the figures of :mod:`hyperpod_dpd.planner.sizing` for one spec, with its findings."""

from __future__ import annotations

from dataclasses import replace

from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.planner import assumptions
from hyperpod_dpd.planner.findings import findings
from hyperpod_dpd.planner.sizing import (
    Plan,
    RequestSizing,
    RoleMemory,
    chunks_for,
    input_problems,
    kv_bytes_per_token,
    kv_bytes_per_token_per_rank,
    kv_heads_per_rank,
    prefill_flops,
    resolve_architecture,
)
from hyperpod_dpd.spec import DpdSpec, RoleSpec
from hyperpod_dpd.spec.architecture import ModelArchitecture


def plan(spec: DpdSpec, *, architecture: ModelArchitecture | None = None, prompt_tokens: int | None = None) -> Plan:
    """Size ``spec``: KV per token and request, PD buffer occupancy, transfer and prefill time, GPU memory.

    ``architecture`` overrides the spec's; without it the spec's preset or model name decides, and an
    unknown model raises :class:`SpecError` (field ``model.architecture``). ``prompt_tokens`` is the
    prompt length the headline figures are for (default: the routing threshold, the shortest prompt
    that takes the disaggregated path). Sizing problems (a model that does not fit, a buffer too small
    for one request) do not raise: they are in :attr:`Plan.problems`, as :func:`hyperpod_dpd.check`
    reports them.
    """
    arch = architecture if architecture is not None else resolve_architecture(spec)
    problems = input_problems(spec, arch)
    # The shortest prompt that takes the disaggregated path; a threshold above max_model_len (no prompt
    # reaches the prefiller, which check() warns about) is sized at the longest prompt vLLM admits.
    shortest_disaggregated = max(1, min(spec.routing.threshold, spec.max_model_len))
    tokens = prompt_tokens if prompt_tokens is not None else shortest_disaggregated
    if prompt_tokens is not None and not 1 <= prompt_tokens <= max(1, spec.max_model_len):
        problems.append(Problem(field="prompt_tokens", value=prompt_tokens, message=f"must be between 1 and "
                                f"max_model_len {spec.max_model_len}; vLLM rejects longer prompts",
                                fix=f"give at most {spec.max_model_len}"))
    if problems:
        raise SpecError(problems)

    facts = spec.instance_type.facts
    tp = spec.tensor_parallel_size
    chunk = spec.kv_cache.chunk_tokens
    per_rank = kv_bytes_per_token_per_rank(arch, tp)
    chunk_bytes = per_rank * chunk
    buffer = spec.kv_cache.pd_buffer_size.bytes
    buffer_chunks = buffer // chunk_bytes
    peak = assumptions.PEAK_DENSE_BF16_TFLOPS.get(facts.gpu_model, assumptions.PEAK_DENSE_BF16_TFLOPS["H100"])

    def request(n: int) -> RequestSizing:
        chunks = chunks_for(n, chunk)
        moved = n * per_rank * tp
        compute = prefill_flops(arch, n) / (tp * peak * 1e12 * assumptions.PREFILL_MFU)
        return RequestSizing(tokens=n, chunks=chunks, kv_bytes_per_rank=chunks * chunk_bytes,
                             kv_bytes_all_ranks=moved, pd_buffer_transfers=buffer_chunks // chunks if chunks else 0,
                             transfer_seconds_at_line_rate=moved / facts.network_bytes_per_second,
                             prefill_compute_seconds=compute)

    weights = arch.weight_bytes
    weights_per_gpu = -(-weights // tp)

    def role_memory(name: str, role: RoleSpec) -> RoleMemory:
        gpu = facts.gpu_memory.bytes
        utilization = spec.role_gpu_memory_utilization(role)
        share = int(gpu * utilization)
        kv_cache = max(0, share - weights_per_gpu - assumptions.ACTIVATION_RESERVE_BYTES)
        kv_tokens = kv_cache // per_rank
        seqs = role.max_num_seqs if role.max_num_seqs is not None else DEFAULT_MAX_NUM_SEQS[name]
        return RoleMemory(role=name, gpu_memory_bytes=gpu, gpu_memory_utilization=utilization,
                          vllm_share_bytes=share, weights_bytes_per_gpu=weights_per_gpu,
                          reserve_bytes=assumptions.ACTIVATION_RESERVE_BYTES, kv_cache_bytes_per_gpu=kv_cache,
                          kv_cache_tokens=kv_tokens, max_length_sequences=kv_tokens // spec.max_model_len,
                          max_num_seqs=seqs, pd_buffer_bytes=buffer, headroom_bytes=gpu - share - buffer)

    draft = Plan(
        model_name=spec.model.name, architecture=arch, instance_type=facts.name, gpu_model=facts.gpu_model,
        tensor_parallel_size=tp, max_model_len=spec.max_model_len, routing_threshold=spec.routing.threshold,
        chunk_tokens=chunk, kv_heads_per_rank=kv_heads_per_rank(arch, tp), kv_bytes_per_token=kv_bytes_per_token(arch),
        kv_bytes_per_token_per_rank=per_rank, kv_bytes_per_chunk_per_rank=chunk_bytes, pd_buffer_bytes=buffer,
        pd_buffer_aligned_bytes=buffer_chunks * chunk_bytes, pd_buffer_chunks=buffer_chunks,
        network_bytes_per_second=facts.network_bytes_per_second, peak_tflops_per_gpu=peak, weights_bytes=weights,
        weights_bytes_per_gpu=weights_per_gpu, request=request(tokens),
        at_threshold=request(shortest_disaggregated), at_max_model_len=request(spec.max_model_len),
        prefill=role_memory("prefill", spec.prefill), decode=role_memory("decode", spec.decode),
        nodes=spec.node_usage())
    problems_found, warnings_found = findings(spec, draft)
    return replace(draft, problems=tuple(problems_found), warnings=tuple(warnings_found))
