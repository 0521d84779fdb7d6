"""Sizing rules: the planner's findings on every check, when the model's architecture is known.

Errors: weights that do not fit a role's GPU share, a KV cache that cannot hold one sequence, vLLM's
share plus the PD buffer exceeding a GPU, a PD buffer smaller than one ``max_model_len`` request per
rank. Warnings: the planner's advice (see :mod:`hyperpod_dpd.planner.findings`). With no known
architecture the rules stay silent: ``hyperpod-dpd plan --model-config`` sizes such a model.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.planner.planning import plan
from hyperpod_dpd.planner.sizing import input_problems
from hyperpod_dpd.validation.check import Finding, RuleContext, register_rule


@register_rule
def sizing(ctx: RuleContext) -> Iterator[Finding]:
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
