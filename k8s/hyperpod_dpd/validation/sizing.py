"""Sizing: the planner's findings on every check, and the model's context window, when the architecture is
known.

See ``docs/checks.md`` and ``docs/sizing.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.planner.planning import plan
from hyperpod_dpd.planner.sizing import input_problems
from hyperpod_dpd.validation.context import Finding, RuleContext
from hyperpod_dpd.validation.engine import all_args


def sizing(ctx: RuleContext) -> Iterator[Finding]:
    """The planner's problems and advice (:mod:`hyperpod_dpd.planner.findings`).

    Errors: weights that do not fit a role's GPU share, a KV cache that cannot hold one sequence, vLLM's
    share plus the PD buffer exceeding a GPU, a PD buffer smaller than one ``max_model_len`` request per
    rank. With no known architecture it stays silent: ``hyperpod-dpd plan --model-config`` sizes such a model.
    """
    arch = ctx.architecture
    if arch is None:
        return
    blocking = input_problems(ctx.spec, arch)
    if blocking:
        # Other rules report the spec's own out-of-range values; only the architecture's are ours.
        yield from (p for p in blocking if p.field == "model.architecture")
        return
    try:
        sized = plan(ctx.spec, architecture=arch)
    except SpecError as err:  # pragma: no cover - input_problems() covers what plan() refuses
        yield from err.problems
        return
    yield from sized.problems
    yield from sized.warnings


# vLLM's human-readable integers: 1k = 1000, 1K = 1024 (vllm/engine/arg_utils.py, human_readable_int).
_HUMAN_INT = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>[kKmMgG]?)$")
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}


def _length(value: str | None) -> int | None:
    """``--max-model-len``'s value as vLLM reads it; None for ``auto``/-1 or what vLLM itself refuses."""
    found = _HUMAN_INT.match((value or "").strip())
    if found is None:
        return None
    return int(float(found["number"]) * _UNITS[found["unit"]])


def context_window(ctx: RuleContext) -> Iterator[Finding]:
    """A length above the model's context window: vLLM refuses to start and the pods crash-loop.

    vLLM 0.19.0 (``vllm/config/model.py``) stops the engine at start for a ``--max-model-len`` above the
    model's context window (``max_position_embeddings`` with rope scaling).
    """
    arch = ctx.architecture
    limit = arch.max_context_length if arch is not None else None
    if arch is None or limit is None:
        return
    lengths: list[tuple[str, int]] = [("max_model_len", ctx.spec.max_model_len)]
    for field, flags in all_args(ctx):
        value = _length(flags.get("--max-model-len")) if "--max-model-len" in flags else None
        if value is not None:
            lengths.append((field, value))
    for field, length in lengths:
        if length > limit:
            shown = length if field == "max_model_len" else f"--max-model-len {length}"
            yield Problem(field=field, value=shown,
                          message=f"is above {arch.name}'s context window of {limit} tokens, so vLLM refuses to "
                                  "start and the pods would crash-loop; the limit is "
                                  f"{arch.context_source or 'from its config.json'}",
                          fix=f"set max_model_len to {limit} or less"
                              + ("" if field == "max_model_len" else " and remove --max-model-len from the args"))
