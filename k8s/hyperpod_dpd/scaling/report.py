"""Compiled SLO autoscaling as ``plan`` prints it: bounds, targets, windows and the compiler's notes."""

from __future__ import annotations

from typing import Any

from hyperpod_dpd.scaling.compiled import CompiledScaling, Signal

_WHAT = {Signal.DEMAND: "tokens/s", Signal.QUEUE: "waiting", Signal.SLO_RATIO: "(p90 over its target)"}


def describe(compiled: CompiledScaling) -> list[str]:
    """A few lines: the replica bounds and windows, each trigger's target, then the notes."""
    triggers = ", ".join(f"{t.signal.value} {t.target:,.0f} {_WHAT[t.signal]}" + (
        " per replica" if t.signal is not Signal.SLO_RATIO else "") for t in compiled.triggers)
    lines = [f"{compiled.role}: {compiled.min_replicas}..{compiled.max_replicas} replicas; {triggers}",
             f"  polling {compiled.polling_interval_s} s, scale-up window {compiled.scale_up_stabilisation_s} s, "
             f"scale-down window {compiled.scale_down_stabilisation_s} s"]
    lines += [f"  - {note}" for note in compiled.notes]
    return lines


def to_json(compiled: CompiledScaling) -> dict[str, Any]:
    return {"min_replicas": compiled.min_replicas, "max_replicas": compiled.max_replicas,
            "polling_interval_s": compiled.polling_interval_s, "cooldown_s": compiled.cooldown_s,
            "initial_cooldown_s": compiled.initial_cooldown_s,
            "scale_up_stabilisation_s": compiled.scale_up_stabilisation_s,
            "scale_down_stabilisation_s": compiled.scale_down_stabilisation_s, "start_up_s": compiled.start_up_s,
            "capacity": {"tokens_per_s": compiled.capacity.tokens_per_s, "source": compiled.capacity.source,
                         "bound": None if compiled.capacity.bound is None else compiled.capacity.bound.value},
            "triggers": [{"name": t.name, "signal": t.signal.value, "query": t.query, "target": t.target,
                          "metric_type": t.metric_type.value, "fallback": t.fallback} for t in compiled.triggers],
            "notes": list(compiled.notes)}
