"""What SLO autoscaling sizes a role for: the request shape, the latency target, the role's SLO options.

:func:`role_shape` derives them once per role, as one :class:`RoleShape`: the advisor sizes the role from it
(``advisor/capacity.py``) and the compiler renders its triggers from it (``compiler.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec import AutoscalingSpec, DpdSpec, RoleSpec, SloScaling
from hyperpod_dpd.validation.slo_scaling import SHORT_PROMPT_TOKENS, TARGET_FIELD, missing_target

ROLES = ("prefill", "decode")


def role_spec(spec: DpdSpec, role: str) -> RoleSpec:
    return dict(spec.roles())[role]


def pod_nodes(spec: DpdSpec, role: str, pods: int) -> int:
    """Whole nodes ``pods`` replicas of the role occupy, as the stack counts them (:meth:`DpdSpec.role_nodes`)."""
    if not pods:
        return 0
    sized = dataclasses.replace(role_spec(spec, role), replicas=pods, autoscaling=None)
    return spec.role_nodes(sized, at_scale_limit=False)


def slo_scaling(spec: DpdSpec, role: str) -> SloScaling | None:
    """The role's ``autoscaling.slo``, or ``None`` when the role does not scale on its SLO."""
    scaling = role_spec(spec, role).autoscaling
    return None if scaling is None else scaling.slo


def scaled_roles(spec: DpdSpec) -> tuple[str, ...]:
    """The roles with ``autoscaling.slo``, in the spec's order."""
    return tuple(role for role in ROLES if slo_scaling(spec, role) is not None)


def unpinned_roles(spec: DpdSpec) -> tuple[str, ...]:
    """The SLO-scaled roles without ``autoscaling.slo.capacity_tokens_per_s``: the advisor computes theirs."""
    return tuple(role for role in scaled_roles(spec)
                 if (slo := slo_scaling(spec, role)) is not None and slo.capacity_tokens_per_s is None)


def request_shape(spec: DpdSpec, slo: SloScaling) -> tuple[int, int]:
    """``(input, output)`` tokens per request the decode capacity is computed for.

    The input defaults to the routing threshold, the shortest prompt the router sends to a prefiller (the
    planner's headline figures use it too), kept within ``max_model_len`` with room for the output. The
    prefill capacity reads :func:`prompt_lengths` instead.
    """
    output = slo.output_tokens
    if slo.input_tokens is not None:
        return slo.input_tokens, output
    return max(1, min(spec.routing.threshold, spec.max_model_len - output)), output


def prompt_lengths(spec: DpdSpec, slo: SloScaling) -> tuple[int, ...]:
    """The prompt lengths the prefill capacity is computed at; the capacity is the lowest over them.

    ``input_tokens`` alone when given. Else both ends of what a prefiller gets: ``routing.threshold`` (but at
    least :data:`SHORT_PROMPT_TOKENS`) and the longest prompt ``max_model_len`` leaves room for with
    ``output_tokens``. One prefiller's tokens per second rise with the prompt while per-request costs (the KV
    transfer, the first decode step) dominate, and fall once attention's cost, quadratic in the prompt, does:
    so the lowest over the range is at one of its ends, and the target holds whatever lengths arrive.
    """
    if slo.input_tokens is not None:
        return (slo.input_tokens,)
    longest = max(1, spec.max_model_len - slo.output_tokens)
    shortest = min(longest, max(spec.routing.threshold, SHORT_PROMPT_TOKENS))
    return tuple(sorted({shortest, longest}))


def target_seconds(spec: DpdSpec, role: str) -> float:
    """The role's latency target in seconds (TTFT for prefill, TPOT for decode); SpecError when unset."""
    name = TARGET_FIELD[role]
    value = None if spec.slo is None else getattr(spec.slo, name)
    if value is None:
        raise SpecError([missing_target(role)])
    return float(value) / 1000


@dataclasses.dataclass(frozen=True, kw_only=True)
class RoleShape:
    """One SLO-scaled role's sizing problem: its SLO options, its latency target and the requests it is sized for."""

    role: str
    # The role's autoscaling (its bounds and windows) and its autoscaling.slo.
    scaling: AutoscalingSpec
    slo: SloScaling
    # The role's latency target in seconds: TTFT for prefill, TPOT for decode (target_seconds).
    target_s: float
    # Input and output tokens per request (request_shape); the prefill capacity reads prompt_lengths instead.
    isl: int
    osl: int
    # The prompt lengths the prefill capacity is computed at, ascending (prompt_lengths).
    prompt_lengths: tuple[int, ...]

    @property
    def given_input(self) -> bool:
        """The prompt length is the spec's ``input_tokens``, not one of the default ends."""
        return self.slo.input_tokens is not None

    def at_prompt(self, tokens: int) -> RoleShape:
        """This shape with every prompt ``tokens`` long (one of :attr:`prompt_lengths`)."""
        return dataclasses.replace(self, isl=tokens, prompt_lengths=(tokens,))


def role_shape(spec: DpdSpec, role: str) -> RoleShape:
    """The role's :class:`RoleShape`; SpecError when it has no ``autoscaling.slo`` or its SLO target is unset."""
    scaling = role_spec(spec, role).autoscaling
    slo = None if scaling is None else scaling.slo
    if scaling is None or slo is None:
        raise SpecError([Problem(field=f"{role}.autoscaling.slo", value=None, message="is not set",
                                 fix=f"add {role}: {{autoscaling: {{slo: true}}}}")])
    isl, osl = request_shape(spec, slo)
    return RoleShape(role=role, scaling=scaling, slo=slo, target_s=target_seconds(spec, role), isl=isl, osl=osl,
                     prompt_lengths=prompt_lengths(spec, slo))



def pin_capacities(spec: DpdSpec, capacities: Mapping[str, float]) -> DpdSpec:
    """``spec`` with ``autoscaling.slo.capacity_tokens_per_s`` set for each role in ``capacities``."""
    for role, tokens_per_s in capacities.items():
        cfg = role_spec(spec, role)
        scaling = cfg.autoscaling
        if scaling is None or scaling.slo is None:
            raise ValueError(f"{role} has no autoscaling.slo to pin a capacity in")
        slo = dataclasses.replace(scaling.slo, capacity_tokens_per_s=tokens_per_s)
        pinned = dataclasses.replace(cfg, autoscaling=dataclasses.replace(scaling, slo=slo))
        spec = (dataclasses.replace(spec, prefill=pinned) if role == "prefill"
                else dataclasses.replace(spec, decode=pinned))
    return spec


# What a shape-only render (the CRD check of ``validate`` and ``verify``) pins where the advisor has not: the
# triggers' form does not depend on the number, only their targets do.
STAND_IN_CAPACITY = 1000.0


def with_stand_in_capacities(spec: DpdSpec) -> DpdSpec:
    """``spec`` with :data:`STAND_IN_CAPACITY` wherever an SLO-scaled role has no capacity yet."""
    missing = dict.fromkeys(unpinned_roles(spec), STAND_IN_CAPACITY)
    return pin_capacities(spec, missing) if missing else spec
