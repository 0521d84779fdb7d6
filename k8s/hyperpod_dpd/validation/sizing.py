"""Sizing: the planner's findings on every check, and the model's context window, when the architecture is
known.

See ``docs/checks.md`` and ``docs/sizing.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.planner.planning import plan
from hyperpod_dpd.planner.sizing import input_problems
from hyperpod_dpd.spec.architecture import ModelArchitecture, context_length_from_config
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


def _overridden_limit(arch: ModelArchitecture, limit: int, text: str | None) -> tuple[int, str]:
    """The context window once ``--hf-overrides`` is applied, with where the number comes from.

    vLLM applies ``--hf-overrides`` to the model's config before ``_get_and_verify_max_len``
    (``vllm/config/model.py`` in 0.19.0), so an override's ``rope_scaling`` (or ``rope_parameters``) or
    ``max_position_embeddings`` sets the window the way :func:`context_length_from_config` derives it: the
    rope ``factor`` times the length (``original_max_position_embeddings`` for YaRN), except for rope types
    already counted (su, longrope, llama3). The base length is the model's window without the override.
    """
    source = arch.context_source or "from its config.json"
    if not text:
        return limit, source
    try:
        overrides = json.loads(text)
    except ValueError:
        return limit, source
    if not isinstance(overrides, Mapping):
        return limit, source
    keys = [key for key in ("rope_scaling", "rope_parameters", "max_position_embeddings") if key in overrides]
    if not keys:
        return limit, source
    config: dict[str, Any] = {"max_position_embeddings": limit}
    config.update({key: overrides[key] for key in keys})
    scaled = context_length_from_config(config)
    if scaled is None:
        return limit, source
    return scaled, (f"{limit} from {source}, with --hf-overrides {', '.join(keys)} applied as vLLM does "
                    "(the rope factor times the length; YaRN from original_max_position_embeddings)")


def context_window(ctx: RuleContext) -> Iterator[Finding]:
    """A length above the model's context window: vLLM refuses to start and the pods crash-loop.

    vLLM 0.19.0 (``vllm/config/model.py``) stops the engine at start for a ``--max-model-len`` above the
    model's context window (``max_position_embeddings`` with rope scaling, after ``--hf-overrides``).
    """
    arch = ctx.architecture
    base = arch.max_context_length if arch is not None else None
    if arch is None or base is None:
        return
    flags_by_field = dict(all_args(ctx))
    shared = flags_by_field.get("args", {}).get("--hf-overrides")
    role_fields = [field for field in flags_by_field if field != "args"]
    # max_model_len reaches every role: its window is the smallest any role's overrides give it.
    role_limits = [_overridden_limit(arch, base, flags_by_field[field].get("--hf-overrides") or shared)
                   for field in role_fields]
    lengths: list[tuple[str, int, tuple[int, str]]] = [
        ("max_model_len", ctx.spec.max_model_len,
         min(role_limits, key=lambda pair: pair[0]) if role_limits else _overridden_limit(arch, base, shared))]
    for field, flags in flags_by_field.items():
        value = _length(flags.get("--max-model-len")) if "--max-model-len" in flags else None
        if value is not None:
            window = _overridden_limit(arch, base, flags.get("--hf-overrides") or shared)
            lengths.append((field, value, window))
    for field, length, (limit, source) in lengths:
        if length > limit:
            shown = length if field == "max_model_len" else f"--max-model-len {length}"
            yield Problem(field=field, value=shown,
                          message=f"is above {arch.name}'s context window of {limit} tokens, so vLLM refuses to "
                                  f"start and the pods would crash-loop; the limit is {source}",
                          fix=f"set max_model_len to {limit} or less"
                              + ("" if field == "max_model_len" else " and remove --max-model-len from the args"))
