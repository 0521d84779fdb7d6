"""What the figures mean for a spec: errors that fail at start or under load, and advice.

Errors (each would fail after a deploy): weights that do not fit a role's vLLM share; a KV cache
that cannot hold one ``max_model_len`` sequence even with no activation reserve (vLLM refuses to
start); vLLM's share plus the PD buffer exceeding a GPU (out of memory at start); a PD buffer that
cannot hold one ``max_model_len`` request per rank (that request retries allocation forever).

Warnings: a buffer holding fewer threshold-length transfers than the decoder's ``--max-num-seqs``
("long prompts" are those at the routing threshold, the shortest that take the disaggregated
path: if even they do not fit, the buffer fills under load); a KV cache below ``max_num_seqs``
sequences of maximum length (vLLM queues or preempts); an estimated KV cache below one sequence; little
memory left outside vLLM's share; a small model, a short routing threshold, or a transfer that
costs a large part of the prefill it follows; replicated KV heads.
"""

from __future__ import annotations

import math

from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.planner import assumptions
from hyperpod_dpd.planner.sizing import (
    Plan,
    RoleMemory,
    human_seconds,
    kv_bytes_per_token_per_rank,
    suggest_size,
)
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.units import format_bytes


def _needed_per_gpu(p: Plan, tensor_parallel_size: int, max_model_len: int) -> int:
    """Weights, reserve and one max-length sequence of KV on one GPU at ``tensor_parallel_size``."""
    per_rank = kv_bytes_per_token_per_rank(p.architecture, tensor_parallel_size)
    return -(-p.weights_bytes // tensor_parallel_size) + assumptions.ACTIVATION_RESERVE_BYTES + max_model_len * per_rank


def _valid_tp(p: Plan, tp: int) -> bool:
    arch = p.architecture
    return arch.num_attention_heads % tp == 0 and (arch.num_kv_heads % tp == 0 or tp % arch.num_kv_heads == 0)


def _fit_fix(spec: DpdSpec, p: Plan, role: RoleMemory) -> str:
    facts = spec.instance_type.facts
    for tp in range(p.tensor_parallel_size + 1, facts.gpus + 1):
        if _valid_tp(p, tp) and _needed_per_gpu(p, tp, spec.max_model_len) <= role.vllm_share_bytes:
            return f"use tensor_parallel_size {tp}"
    for member in InstanceType:
        other = member.facts
        if other.gpu_memory.bytes <= facts.gpu_memory.bytes:
            continue
        share = int(other.gpu_memory.bytes * role.gpu_memory_utilization)
        fitting = [t for t in range(1, other.gpus + 1)
                   if _valid_tp(p, t) and _needed_per_gpu(p, t, spec.max_model_len) <= share]
        if fitting:
            return (f"use instance_type {other.name} ({format_bytes(other.gpu_memory.bytes)} per GPU) with "
                    f"tensor_parallel_size {fitting[0]}, or a quantised (FP8) checkpoint")
    return "use a quantised (FP8) checkpoint or a smaller model: no DPD instance type holds these weights on one node"


def _role_groups(spec: DpdSpec, p: Plan) -> list[tuple[str, str, RoleMemory]]:
    """Roles that share a GPU memory utilization are checked once: (label, utilization field, memory)."""
    groups: dict[str, list[tuple[str, RoleMemory]]] = {}
    for role_name, role_spec in spec.roles():
        util_field = (f"{role_name}.gpu_memory_utilization" if role_spec.gpu_memory_utilization is not None
                      else "gpu_memory_utilization")
        groups.setdefault(util_field, []).append((role_name, p.prefill if role_name == "prefill" else p.decode))
    shared = groups.pop("gpu_memory_utilization", [])
    result = [(f"{name}.gpu_memory_utilization", name, role) for members in groups.values() for name, role in members]
    if shared:
        label = " and ".join(name for name, _ in shared)
        result.insert(0, ("gpu_memory_utilization", label, shared[0][1]))
    return result


def _memory_findings(spec: DpdSpec, p: Plan) -> tuple[list[Problem], list[SpecWarning]]:
    problems: list[Problem] = []
    warnings: list[SpecWarning] = []
    per_rank = p.kv_bytes_per_token_per_rank
    one_sequence = spec.max_model_len * per_rank
    for util_field, label, role in _role_groups(spec, p):
        share_text = (f"the {format_bytes(role.vllm_share_bytes)} vLLM may use on each {label} GPU "
                      f"({format_bytes(role.gpu_memory_bytes)} x {role.gpu_memory_utilization:g})")
        room = role.vllm_share_bytes - role.weights_bytes_per_gpu
        if room < 0:
            problems.append(Problem(
                field="tensor_parallel_size", value=p.tensor_parallel_size,
                message=f"puts {format_bytes(role.weights_bytes_per_gpu)} of {p.architecture.name} weights "
                        f"({format_bytes(p.weights_bytes)} in all) on each GPU, more than {share_text}; vLLM "
                        "runs out of memory loading the model", fix=_fit_fix(spec, p, role)))
        elif room < one_sequence:
            fits = max(0, room // per_rank // 256 * 256)
            problems.append(Problem(
                field="max_model_len", value=spec.max_model_len,
                message=f"needs {format_bytes(one_sequence)} of KV cache per GPU for one sequence, but after "
                        f"{format_bytes(role.weights_bytes_per_gpu)} of weights per GPU, {share_text} leaves "
                        f"{format_bytes(room)} even before activations; vLLM refuses to start",
                fix=(f"lower max_model_len to {fits}, or " if fits else "") + f"raise {util_field}, or "
                    + _fit_fix(spec, p, role)))
        elif role.kv_cache_tokens < spec.max_model_len:
            warnings.append(SpecWarning(
                code="KvCacheTight", field="max_model_len",
                message=f"after weights and an estimated {format_bytes(assumptions.ACTIVATION_RESERVE_BYTES)} "
                        f"activation reserve, each {label} GPU has about "
                        f"{format_bytes(role.kv_cache_bytes_per_gpu)} of KV cache, less than one "
                        f"{spec.max_model_len}-token sequence ({format_bytes(one_sequence)}); "
                        f"vLLM may refuse to start: raise {util_field} or tensor_parallel_size"))
        if role.headroom_bytes < 0:
            limit = math.floor((role.gpu_memory_bytes - p.pd_buffer_bytes - assumptions.CUDA_CONTEXT_HEADROOM_BYTES)
                               / role.gpu_memory_bytes * 100) / 100
            problems.append(Problem(
                field=util_field, value=role.gpu_memory_utilization,
                message=f"gives vLLM {format_bytes(role.vllm_share_bytes)} of each {label} GPU, and the "
                        f"{format_bytes(p.pd_buffer_bytes)} PD buffer (kv_cache.pd_buffer_size, per rank, outside "
                        f"vLLM's share) does not fit beside it in {format_bytes(role.gpu_memory_bytes)}; LMCache "
                        "runs out of GPU memory at start",
                fix=(f"set {util_field} to at most {limit:.2f}, or lower kv_cache.pd_buffer_size" if limit > 0
                     else "lower kv_cache.pd_buffer_size")))
        elif role.headroom_bytes < assumptions.CUDA_CONTEXT_HEADROOM_BYTES:
            warnings.append(SpecWarning(
                code="LowGpuHeadroom", field=util_field,
                message=f"vLLM's share and the PD buffer leave {format_bytes(role.headroom_bytes)} of each "
                        f"{label} GPU for the CUDA context, NCCL and NIXL registrations (about "
                        f"{format_bytes(assumptions.CUDA_CONTEXT_HEADROOM_BYTES)} is needed); lower {util_field}"))
    for role_name, role_spec in spec.roles():
        role = p.prefill if role_name == "prefill" else p.decode
        if spec.max_model_len <= role.kv_cache_tokens and role.max_length_sequences < role.max_num_seqs:
            util_field = (f"{role_name}.gpu_memory_utilization" if role_spec.gpu_memory_utilization is not None
                          else "gpu_memory_utilization")
            warnings.append(SpecWarning(
                code="KvCacheBelowMaxNumSeqs", field=f"{role_name}.max_num_seqs",
                message=f"each {role_name} GPU's KV cache (about {format_bytes(role.kv_cache_bytes_per_gpu)}) holds "
                        f"{role.max_length_sequences} sequences of max_model_len {spec.max_model_len}, fewer than "
                        f"max_num_seqs {role.max_num_seqs}; long requests will queue or be preempted: lower "
                        f"{role_name}.max_num_seqs to {role.max_length_sequences}, lower max_model_len, or raise "
                        f"{util_field}"))
    return problems, warnings


def _raise_buffer(spec: DpdSpec, p: Plan, needed_bytes: int) -> str:
    """``raise kv_cache.pd_buffer_size to 16Gi``, and the utilization that makes room for it when needed."""
    size = suggest_size(needed_bytes)
    text = f"raise kv_cache.pd_buffer_size to {size}"
    size_bytes = int(size.removesuffix("Gi")) * 2**30
    role = p.decode
    if role.vllm_share_bytes + size_bytes + assumptions.CUDA_CONTEXT_HEADROOM_BYTES > role.gpu_memory_bytes:
        limit = math.floor((role.gpu_memory_bytes - size_bytes - assumptions.CUDA_CONTEXT_HEADROOM_BYTES)
                           / role.gpu_memory_bytes * 100) / 100
        util_field = ("decode.gpu_memory_utilization" if spec.decode.gpu_memory_utilization is not None
                      else "gpu_memory_utilization")
        text += (f" and lower {util_field} to at most {limit:.2f} to make room for it" if limit > 0
                 else f", which does not fit a {format_bytes(role.gpu_memory_bytes)} GPU: raise tensor_parallel_size")
    return text


def _buffer_findings(spec: DpdSpec, p: Plan) -> tuple[list[Problem], list[SpecWarning]]:
    problems: list[Problem] = []
    warnings: list[SpecWarning] = []
    chunk_bytes = p.kv_bytes_per_chunk_per_rank
    longest = p.at_max_model_len
    buffer_text = (f"holds {p.pd_buffer_chunks} chunks of {p.chunk_tokens} tokens per rank "
                   f"({format_bytes(p.pd_buffer_aligned_bytes)} after aligning down to whole "
                   f"{format_bytes(chunk_bytes)} chunks)")
    if p.pd_buffer_chunks < longest.chunks:
        shorter = p.pd_buffer_chunks * p.chunk_tokens
        problems.append(Problem(
            field="kv_cache.pd_buffer_size", value=str(spec.kv_cache.pd_buffer_size),
            message=f"{buffer_text}, but one {spec.max_model_len}-token request needs {longest.chunks} chunks "
                    f"({format_bytes(longest.kv_bytes_per_rank)}) per rank; such a request never gets buffer space "
                    "and the decoder logs 'Failed to allocate memory object, retrying...' forever",
            fix=_raise_buffer(spec, p, longest.kv_bytes_per_rank)
                + (f" or lower max_model_len to {shorter}" if shorter >= max(1, spec.routing.threshold) else "")))
        return problems, warnings
    seqs = p.decode.max_num_seqs
    at_threshold = p.at_threshold
    reaches_prefiller = spec.routing.threshold <= spec.max_model_len  # else nothing is ever transferred
    if reaches_prefiller and at_threshold.pd_buffer_transfers < seqs:
        needed = seqs * at_threshold.chunks * chunk_bytes
        warnings.append(SpecWarning(
            code="PdBufferBelowMaxNumSeqs", field="kv_cache.pd_buffer_size",
            message=f"{spec.kv_cache.pd_buffer_size} {buffer_text}: {at_threshold.pd_buffer_transfers} transfers of "
                    f"{at_threshold.tokens} tokens (the routing threshold) at once, fewer than the decoder's "
                    f"max_num_seqs {seqs}; under load it fills and the decoder logs 'Failed to allocate memory "
                    f"object, retrying...': {_raise_buffer(spec, p, needed)}"))
    return problems, warnings


def _advice(spec: DpdSpec, p: Plan) -> list[SpecWarning]:
    warnings: list[SpecWarning] = []
    arch = p.architecture
    active = arch.active_parameters
    if active < assumptions.SMALL_MODEL_PARAMETERS:
        kind = f"{active / 1e9:.1f}B active parameters" if arch.is_moe else f"{active / 1e9:.1f}B parameters"
        warnings.append(SpecWarning(
            code="SmallModel", field="model.architecture",
            message=f"{arch.name} has {kind}; its prefill is short enough that DPD gains little over a colocated "
                    "endpoint on the same GPUs (the operator documents gains for 70B+ dense models)"))
    threshold = spec.routing.threshold
    if threshold < assumptions.SHORT_PROMPT_TOKENS:
        what = ("0 sends every prompt, even one token long, through the prefiller and a KV transfer" if threshold == 0
                else f"{threshold} sends prompts whose prefill takes about "
                     f"{human_seconds(p.at_threshold.prefill_compute_seconds)} through the prefiller")
        warnings.append(SpecWarning(
            code="ShortRoutingThreshold", field="routing.threshold",
            message=f"{what}; the router hop, the transfer and a second scheduling can cost more than they save. "
                    "DPD helps from about 4,000 input tokens; the operator's default threshold is 4096"))
    ratio = p.at_threshold.transfer_seconds_at_line_rate / max(p.at_threshold.prefill_compute_seconds, 1e-12)
    if ratio > assumptions.TRANSFER_TO_PREFILL_WARN_RATIO:
        warnings.append(SpecWarning(
            code="TransferCostsPrefill", field="routing.threshold",
            message=f"a {p.at_threshold.tokens}-token transfer takes at least "
                    f"{human_seconds(p.at_threshold.transfer_seconds_at_line_rate)} at line rate, {ratio:.0%} of its "
                    f"estimated {human_seconds(p.at_threshold.prefill_compute_seconds)} prefill"))
    if p.tensor_parallel_size > arch.num_kv_heads:
        warnings.append(SpecWarning(
            code="KvHeadsReplicated", field="tensor_parallel_size",
            message=f"tensor_parallel_size {p.tensor_parallel_size} exceeds the {arch.num_kv_heads} KV heads of "
                    f"{arch.name}: vLLM replicates them, so every rank stores and transfers a full head "
                    f"({p.tensor_parallel_size // arch.num_kv_heads}x the model's KV bytes in all)"))
    return warnings


def findings(spec: DpdSpec, p: Plan) -> tuple[list[Problem], list[SpecWarning]]:
    """Problems (errors) and warnings for a computed plan, in a stable order."""
    memory_problems, memory_warnings = _memory_findings(spec, p)
    buffer_problems, buffer_warnings = _buffer_findings(spec, p)
    return [*memory_problems, *buffer_problems], [*memory_warnings, *buffer_warnings, *_advice(spec, p)]

