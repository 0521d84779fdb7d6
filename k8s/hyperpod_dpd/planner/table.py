"""A plan as a plain-text table for the terminal."""

from __future__ import annotations

from hyperpod_dpd.planner import assumptions
from hyperpod_dpd.planner.sizing import Plan, RequestSizing, RoleMemory, human_seconds
from hyperpod_dpd.spec.architecture import ModelArchitecture
from hyperpod_dpd.spec.units import format_bytes

LABEL = 42


def _row(label: str, *cells: str) -> str:
    return f"  {label:<{LABEL}}" + "".join(f"{cell:>16}" for cell in cells).rstrip()


def _requests(p: Plan) -> list[tuple[str, RequestSizing]]:
    columns = [(f"prompt {p.request.tokens}", p.request)]
    if p.at_threshold.tokens != p.request.tokens:
        columns.append((f"threshold {p.at_threshold.tokens}", p.at_threshold))
    if p.at_max_model_len.tokens != p.request.tokens:
        columns.append((f"max len {p.at_max_model_len.tokens}", p.at_max_model_len))
    if p.request.tokens == p.at_threshold.tokens:
        columns[0] = (f"threshold {p.request.tokens}", p.request)
    return columns


# Bytes per weight of a quantized checkpoint, as the plan header names them.
_WEIGHT_LABELS = {1.0: "fp8", 0.5: "4-bit", 2.0: "16-bit", 4.0: "float32"}


def _dtypes(arch: ModelArchitecture) -> str:
    """The KV dtype alone when the weights share it; else both (``weights fp8, KV bfloat16``): a quantized
    checkpoint's weights are sized at their own bytes per parameter, its KV cache at ``dtype``."""
    per_weight = arch.weight_bytes_per_parameter
    if per_weight is None or per_weight == arch.dtype_bytes:
        return arch.dtype
    label = _WEIGHT_LABELS.get(float(per_weight), f"{per_weight:g} bytes")
    return f"weights {label}, KV {arch.dtype}"


def render_table(p: Plan) -> str:
    arch = p.architecture
    params = f"{arch.num_parameters / 1e9:.1f}B params" + (
        f", {arch.active_parameters / 1e9:.1f}B active" if arch.is_moe else "")
    gbps = p.network_bytes_per_second * 8 / 1e9
    lines = [
        f"DPD sizing plan: {p.model_name} ({arch.name}, {params}, {_dtypes(arch)})",
        f"on {p.instance_type} ({p.gpu_model}), tensor_parallel_size {p.tensor_parallel_size}, "
        f"max_model_len {p.max_model_len}, routing threshold {p.routing_threshold}",
        f"nodes: {p.nodes.breakdown()}; {p.nodes.summary()}",
        "",
        "KV cache",
        _row("KV bytes per token (model)", f"{p.kv_bytes_per_token:,} B"),
        _row(f"KV bytes per token per rank ({p.kv_heads_per_rank} KV head{'s' * (p.kv_heads_per_rank > 1)})",
             f"{p.kv_bytes_per_token_per_rank:,} B"),
        _row(f"LMCache chunk ({p.chunk_tokens} tokens) per rank", format_bytes(p.kv_bytes_per_chunk_per_rank)),
        _row("PD buffer per rank (whole chunks)", f"{format_bytes(p.pd_buffer_bytes)} = {p.pd_buffer_chunks} chunks"),
        "",
    ]
    columns = _requests(p)
    lines.append(_row("Per request", *(name for name, _ in columns)))
    rows: list[tuple[str, list[str]]] = [
        ("chunks", [str(r.chunks) for _, r in columns]),
        ("KV per request per rank (whole chunks)", [format_bytes(r.kv_bytes_per_rank) for _, r in columns]),
        ("KV moved per request, all ranks", [format_bytes(r.kv_bytes_all_ranks) for _, r in columns]),
        ("transfers the PD buffer holds", [str(r.pd_buffer_transfers) for _, r in columns]),
        (f"transfer at line rate ({gbps:,.0f} Gbps)", [human_seconds(r.transfer_seconds_at_line_rate)
                                                         for _, r in columns]),
        (f"prefill compute (est., MFU {assumptions.PREFILL_MFU:g})", [human_seconds(r.prefill_compute_seconds)
                                                                      for _, r in columns]),
        ("transfer / prefill compute", [f"{r.transfer_seconds_at_line_rate / r.prefill_compute_seconds:.1%}"
                                        for _, r in columns]),
    ]
    lines += [_row(label, *cells) for label, cells in rows]
    roles: list[RoleMemory] = [p.prefill, p.decode]
    lines += [
        "",
        _row("GPU memory, per GPU", "prefill", "decode"),
        _row("GPU memory", *(format_bytes(r.gpu_memory_bytes) for r in roles)),
        _row("vLLM share (gpu_memory_utilization)",
             *(f"{format_bytes(r.vllm_share_bytes)} ({r.gpu_memory_utilization:g})" for r in roles)),
        _row(f"weights ({format_bytes(p.weights_bytes)} / TP)",
             *(format_bytes(r.weights_bytes_per_gpu) for r in roles)),
        _row("activation reserve (est.)", *(format_bytes(r.reserve_bytes) for r in roles)),
        _row("KV cache", *(format_bytes(r.kv_cache_bytes_per_gpu) for r in roles)),
        _row("max-length sequences / max_num_seqs", *(f"{r.max_length_sequences} / {r.max_num_seqs}" for r in roles)),
        _row("PD buffer (outside the share)", *(format_bytes(r.pd_buffer_bytes) for r in roles)),
        _row("left for CUDA context, NCCL, NIXL", *(format_bytes(r.headroom_bytes) for r in roles)),
    ]
    if p.problems:
        lines += ["", f"Errors ({len(p.problems)}):"] + [f"  - {problem.render()}" for problem in p.problems]
    if p.warnings:
        lines += ["", f"Warnings ({len(p.warnings)}):"] + [f"  - {warning.render()}" for warning in p.warnings]
    if not p.problems and not p.warnings:
        lines += ["", "No sizing problems found."]
    reserve = format_bytes(assumptions.ACTIVATION_RESERVE_BYTES)
    lines += ["", f"Assumptions: peak dense BF16 {p.peak_tflops_per_gpu:,.0f} TFLOP/s per {p.gpu_model} at MFU "
                  f"{assumptions.PREFILL_MFU:g}; {reserve} activation reserve per GPU inside vLLM's share; "
                  "line rate = the node's aggregate EFA bandwidth."]
    return "\n".join(lines) + "\n"
