"""What every rule shares: the context it reads, the findings it yields, and two small helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import ModelArchitecture

Finding = Problem | SpecWarning
Rule = Callable[["RuleContext"], Iterable[Finding]]


@dataclass(frozen=True)
class RuleContext:
    """What a rule sees: the type-checked spec and the architecture, when one is known."""

    spec: DpdSpec
    architecture: ModelArchitecture | None


def is_token(value: str) -> bool:
    """An unresolved CDK token (a bucket or region known only at deploy time) is not checked here."""
    return "${Token[" in value


def problem(field: str, value: object, message: str, fix: str) -> Problem:
    return Problem(field=field, value=value, message=message, fix=fix)
