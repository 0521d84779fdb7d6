"""The sizing planner: KV transfer, PD buffer and GPU memory from a model's architecture.

``plan(spec)`` computes the figures and the findings, and ``render_table(plan)`` prints them.
``load_architecture`` reads an architecture from a preset name, a local ``config.json`` or an S3
model prefix. :mod:`hyperpod_dpd.validation` runs the same findings on every
:func:`hyperpod_dpd.check`, so sizing errors fail at synth time.
"""

from hyperpod_dpd.planner.planning import plan
from hyperpod_dpd.planner.sizing import (
    Plan,
    RequestSizing,
    RoleMemory,
    chunks_for,
    kv_bytes_per_token,
    kv_bytes_per_token_per_rank,
    prefill_flops,
    resolve_architecture,
)
from hyperpod_dpd.planner.sources import load_architecture
from hyperpod_dpd.planner.table import render_table

__all__ = [
    "Plan",
    "RequestSizing",
    "RoleMemory",
    "chunks_for",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_rank",
    "load_architecture",
    "plan",
    "prefill_flops",
    "render_table",
    "resolve_architecture",
]
