"""The sizing arithmetic: KV bytes, PD buffer occupancy, transfer and prefill time, GPU memory.

The model of the world, per tensor-parallel (TP) rank, i.e. per GPU:

* KV bytes per token = 2 (K and V) x layers x KV heads x head_dim x dtype bytes. Each rank holds
  ``KV heads / TP`` heads; when TP exceeds the KV heads vLLM replicates them, one head per rank.
* LMCache moves KV in chunks of ``kv_cache.chunk_tokens`` tokens; the PD buffer
  (``PD_BUFFER_SIZE``, bytes per rank) is aligned down to whole chunks and a request occupies
  ``ceil(tokens / chunk)`` of them, the last one whole even when it is partly filled.
* The buffer is GPU memory outside vLLM's ``--gpu-memory-utilization`` share. It is set through the
  shared environment, so both roles allocate it: the decoder receives into it and the prefiller
  stages outgoing chunks in it before the NIXL write.
* vLLM's KV cache per GPU = GPU memory x utilization - weights / TP - an activation reserve
  (see :mod:`hyperpod_dpd.planner.assumptions`).
* Transfer time at line rate = the bytes of all ranks / the node's aggregate EFA bandwidth: a floor
  that protocol overhead only raises.
* Prefill compute = (2 x active parameters x tokens + 2 x layers x tokens^2 x heads x head_dim) FLOPs
  (GEMMs plus causal attention) / (TP x peak dense BF16 x MFU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.errors import Problem, SpecError, SpecWarning
from hyperpod_dpd.planner import assumptions
from hyperpod_dpd.spec import DpdSpec, NodeUsage
from hyperpod_dpd.spec.architecture import (
    PRESETS,
    ModelArchitecture,
    preset_for_model_name,
    unsizable_reason_for_model_name,
)

GIB = 2**30


# --- the formulas, one function each ------------------------------------------------------------------


def kv_bytes_per_token(arch: ModelArchitecture) -> int:
    """K and V of every layer for one token, the whole model: ``2 x layers x kv_heads x head_dim x bytes``."""
    return 2 * arch.num_layers * arch.num_kv_heads * arch.head_dim * arch.dtype_bytes


def kv_heads_per_rank(arch: ModelArchitecture, tensor_parallel_size: int) -> int:
    """KV heads each rank holds: ``kv_heads / TP``, at least one (vLLM replicates heads when TP is larger)."""
    return max(1, math.ceil(arch.num_kv_heads / tensor_parallel_size))


def kv_bytes_per_token_per_rank(arch: ModelArchitecture, tensor_parallel_size: int) -> int:
    return 2 * arch.num_layers * kv_heads_per_rank(arch, tensor_parallel_size) * arch.head_dim * arch.dtype_bytes


def chunks_for(tokens: int, chunk_tokens: int) -> int:
    """LMCache chunks a prompt of ``tokens`` occupies: ``ceil(tokens / chunk_tokens)``."""
    return -(-tokens // chunk_tokens)


def prefill_flops(arch: ModelArchitecture, tokens: int) -> float:
    """Forward FLOPs of a prefill: ``2 x active params x tokens`` plus causal attention ``2 x L x n^2 x H x d``."""
    attention = 2.0 * arch.num_layers * tokens * tokens * arch.num_attention_heads * arch.head_dim
    return 2.0 * arch.active_parameters * tokens + attention


def suggest_size(needed_bytes: int) -> str:
    """The smallest power-of-two GiB at least ``needed_bytes`` (``8Gi``, ``16Gi``, ...), as a spec value."""
    gib = 1
    while gib * GIB < needed_bytes:
        gib *= 2
    return f"{gib}Gi"


def human_seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} us"


# --- the plan -----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RequestSizing:
    """One prompt length: its footprint in the PD buffer, its transfer and its prefill."""

    tokens: int
    chunks: int
    kv_bytes_per_rank: int          # whole chunks, as the buffer allocates them
    kv_bytes_all_ranks: int         # the bytes actually moved, all ranks, exact token count
    pd_buffer_transfers: int        # how many such requests the buffer holds at once
    transfer_seconds_at_line_rate: float
    prefill_compute_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "chunks": self.chunks, "kv_bytes_per_request_per_rank": self.kv_bytes_per_rank,
                "kv_bytes_per_request": self.kv_bytes_all_ranks, "pd_buffer_transfers": self.pd_buffer_transfers,
                "transfer_seconds_at_line_rate": self.transfer_seconds_at_line_rate,
                "prefill_compute_seconds": self.prefill_compute_seconds,
                "transfer_to_prefill_ratio": self.transfer_seconds_at_line_rate / self.prefill_compute_seconds}


@dataclass(frozen=True, kw_only=True)
class RoleMemory:
    """GPU memory of one GPU of one role."""

    role: str
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    vllm_share_bytes: int
    weights_bytes_per_gpu: int
    reserve_bytes: int
    kv_cache_bytes_per_gpu: int     # what remains for vLLM's paged KV cache (0 if nothing)
    kv_cache_tokens: int
    max_length_sequences: int       # sequences of max_model_len the KV cache holds
    max_num_seqs: int
    pd_buffer_bytes: int
    headroom_bytes: int             # GPU memory - vLLM share - PD buffer (negative: does not fit)

    def to_json(self) -> dict[str, Any]:
        return {"gpu_memory_bytes": self.gpu_memory_bytes, "gpu_memory_utilization": self.gpu_memory_utilization,
                "vllm_share_bytes": self.vllm_share_bytes, "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
                "activation_reserve_bytes": self.reserve_bytes, "kv_cache_bytes_per_gpu": self.kv_cache_bytes_per_gpu,
                "kv_cache_tokens": self.kv_cache_tokens, "max_length_sequences": self.max_length_sequences,
                "max_num_seqs": self.max_num_seqs, "pd_buffer_bytes": self.pd_buffer_bytes,
                "headroom_bytes": self.headroom_bytes}


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The sizing of one spec. ``problems`` would fail at start or under load; ``warnings`` are advice."""

    model_name: str
    architecture: ModelArchitecture
    instance_type: str
    gpu_model: str
    tensor_parallel_size: int
    max_model_len: int
    routing_threshold: int
    chunk_tokens: int
    kv_heads_per_rank: int
    kv_bytes_per_token: int
    kv_bytes_per_token_per_rank: int
    kv_bytes_per_chunk_per_rank: int
    pd_buffer_bytes: int
    pd_buffer_aligned_bytes: int
    pd_buffer_chunks: int
    network_bytes_per_second: float
    peak_tflops_per_gpu: float
    weights_bytes: int
    weights_bytes_per_gpu: int
    request: RequestSizing
    at_threshold: RequestSizing
    at_max_model_len: RequestSizing
    prefill: RoleMemory
    decode: RoleMemory
    nodes: NodeUsage
    problems: tuple[Problem, ...] = field(default=())
    warnings: tuple[SpecWarning, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def prompt_tokens(self) -> int:
        return self.request.tokens

    def to_json(self) -> dict[str, Any]:
        """One JSON-able object: bytes as ints, seconds as floats; per-length and per-role detail nested."""
        arch = self.architecture
        return {
            "model": self.model_name,
            "architecture": {"name": arch.name, "num_layers": arch.num_layers, "num_kv_heads": arch.num_kv_heads,
                             "head_dim": arch.head_dim, "dtype": arch.dtype, "num_parameters": arch.num_parameters,
                             "active_parameters": arch.active_parameters},
            "instance_type": self.instance_type,
            "nodes": {"total": self.nodes.nodes, "gpus_used": self.nodes.gpus_used,
                      "gpus_provisioned": self.nodes.gpus_provisioned,
                      "roles": {r.role: {"pods": r.pods, "gpus_per_pod": r.gpus_per_pod, "nodes": r.nodes}
                                for r in self.nodes.roles}},
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "routing_threshold": self.routing_threshold,
            "chunk_tokens": self.chunk_tokens,
            "prompt_tokens": self.request.tokens,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_per_rank": self.kv_bytes_per_token_per_rank,
            "kv_bytes_per_chunk_per_rank": self.kv_bytes_per_chunk_per_rank,
            "kv_bytes_per_request_per_rank": self.request.kv_bytes_per_rank,
            "pd_buffer_bytes": self.pd_buffer_bytes,
            "pd_buffer_aligned_bytes": self.pd_buffer_aligned_bytes,
            "pd_buffer_chunks": self.pd_buffer_chunks,
            "pd_buffer_transfers": self.request.pd_buffer_transfers,
            "transfer_seconds_at_line_rate": self.request.transfer_seconds_at_line_rate,
            "prefill_compute_seconds": self.request.prefill_compute_seconds,
            "network_bytes_per_second": self.network_bytes_per_second,
            "weights_bytes": self.weights_bytes,
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
            "at_prompt": self.request.to_json(),
            "at_threshold": self.at_threshold.to_json(),
            "at_max_model_len": self.at_max_model_len.to_json(),
            "roles": {"prefill": self.prefill.to_json(), "decode": self.decode.to_json()},
            "errors": [p.render() for p in self.problems],
            "warnings": [w.render() for w in self.warnings],
            "assumptions": {"peak_dense_bf16_tflops_per_gpu": self.peak_tflops_per_gpu,
                            "prefill_mfu": assumptions.PREFILL_MFU,
                            "activation_reserve_bytes_per_gpu": assumptions.ACTIVATION_RESERVE_BYTES,
                            "line_rate": "the node's aggregate EFA bandwidth"},
        }


# --- resolving the architecture ---------------------------------------------------------------------


def _architecture_problem(spec: DpdSpec, message: str) -> Problem:
    source = spec.model.source
    hint = ""
    bucket, prefix = getattr(source, "bucket", None), getattr(source, "prefix", None)
    if bucket and prefix:
        hint = f" (the weights' config: --model-config s3://{bucket}/{prefix})"
    return Problem(field="model.architecture", value=spec.model.architecture if isinstance(
        spec.model.architecture, str) else spec.model.name, message=message,
        fix=f"give --model-config PATH_OR_S3_URI{hint}, or set model.architecture to a preset: "
            f"{', '.join(PRESETS)}")


def resolve_architecture(spec: DpdSpec) -> ModelArchitecture:
    """The spec's architecture: given, a preset by name, or the preset matching the model name."""
    chosen = spec.model.architecture
    if isinstance(chosen, ModelArchitecture):
        return chosen
    if isinstance(chosen, str):
        if chosen in PRESETS:
            return PRESETS[chosen]
        raise SpecError([_architecture_problem(spec, "is not a known preset, so the model cannot be sized")])
    found = preset_for_model_name(spec.model.name)
    reason = unsizable_reason_for_model_name(spec.model.name)
    if found is None and reason is not None:
        raise SpecError([Problem(
            field="model.architecture", value=spec.model.name,
            message=f"cannot be sized: {reason}; the planner does not guess a KV cache it cannot compute",
            fix="size this model by other means; DPD sizing covers dense (grouped-query) attention models")])
    if found is None:
        raise SpecError([_architecture_problem(
            spec, f"is not set and no preset matches model name {spec.model.name!r}, so the model cannot be "
                  "sized (layers, KV heads and head dimension are needed)")])
    return found


def input_problems(spec: DpdSpec, arch: ModelArchitecture) -> list[Problem]:
    """What makes the arithmetic meaningless (other rules report most of these with their own fixes)."""
    facts = spec.instance_type.facts
    found = [Problem(field="model.architecture", value=arch.name, message=f"cannot be sized: {text}",
                     fix="correct the architecture's numbers from the model's config.json")
             for text in arch.problems()]
    if not 1 <= spec.tensor_parallel_size <= facts.gpus:
        found.append(Problem(field="tensor_parallel_size", value=spec.tensor_parallel_size,
                             message=f"must be between 1 and the {facts.gpus} GPUs of one {facts.name}",
                             fix=f"use at most {facts.gpus}"))
    if spec.max_model_len < 1:
        found.append(Problem(field="max_model_len", value=spec.max_model_len, message="must be positive",
                             fix="set e.g. 16384"))
    if spec.kv_cache.chunk_tokens < 1:
        found.append(Problem(field="kv_cache.chunk_tokens", value=spec.kv_cache.chunk_tokens,
                             message="must be positive", fix="use LMCache's default, 256"))
    if spec.kv_cache.pd_buffer_size.bytes < 1:
        found.append(Problem(field="kv_cache.pd_buffer_size", value=str(spec.kv_cache.pd_buffer_size),
                             message="must be positive", fix="use e.g. 8Gi"))
    if spec.routing.threshold < 0:
        found.append(Problem(field="routing.threshold", value=spec.routing.threshold, message="must not be negative",
                             fix="use e.g. 4096"))
    for name, role in spec.roles():
        utilization = spec.role_gpu_memory_utilization(role)
        if not 0 < utilization <= 1:
            where = f"{name}.gpu_memory_utilization" if role.gpu_memory_utilization is not None else \
                "gpu_memory_utilization"
            found.append(Problem(field=where, value=utilization, message="must be a fraction in (0, 1]",
                                 fix="use e.g. 0.75"))
        if role.max_num_seqs is not None and role.max_num_seqs < 1:
            found.append(Problem(field=f"{name}.max_num_seqs", value=role.max_num_seqs, message="must be at least 1",
                                 fix="set 1 or more"))
    return found
