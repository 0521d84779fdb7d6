"""Run every rule over a spec and raise one :class:`SpecError` with all the problems."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from hyperpod_dpd.errors import Problem, SpecError, SpecWarning
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import PRESETS, ModelArchitecture, preset_for_model_name

Finding = Problem | SpecWarning
Rule = Callable[["RuleContext"], Iterable[Finding]]

_RULES: list[Rule] = []


@dataclass(frozen=True)
class RuleContext:
    """What a rule sees: the type-checked spec and the architecture, when one is known."""

    spec: DpdSpec
    architecture: ModelArchitecture | None


@dataclass(frozen=True)
class CheckedSpec:
    """A spec that passed every rule, with the warnings it raised and the architecture used."""

    spec: DpdSpec
    warnings: tuple[SpecWarning, ...]
    architecture: ModelArchitecture | None


def register_rule(rule: Rule) -> Rule:
    """Add a rule to every future :func:`check` (used as a decorator by the rule modules)."""
    if rule not in _RULES:
        _RULES.append(rule)
    return rule


def resolve_architecture(spec: DpdSpec) -> ModelArchitecture | None:
    chosen = spec.model.architecture
    if isinstance(chosen, ModelArchitecture):
        return chosen
    if isinstance(chosen, str):
        return PRESETS.get(chosen)
    return preset_for_model_name(spec.model.name)


def check(spec: DpdSpec, *, architecture: ModelArchitecture | None = None, source: str | None = None) -> CheckedSpec:
    """Check ``spec``; raise :class:`SpecError` listing every problem, else return it with its warnings.

    Types are checked by a round trip through the file loader, so a spec built in Python with a
    wrong type gets the same message as a file would; the rules then see a well-typed spec.
    """
    from hyperpod_dpd.spec.loading import spec_to_mapping  # noqa: PLC0415 - import cycle

    return check_data(spec_to_mapping(spec), architecture=architecture, source=source)


def check_data(data: object, *, architecture: ModelArchitecture | None = None,
               source: str | None = None) -> CheckedSpec:
    """Parse and check plain data (a loaded YAML or JSON file), reporting type and rule problems together."""
    from hyperpod_dpd.spec.loading import parse_spec  # noqa: PLC0415 - import cycle
    from hyperpod_dpd.validation import (  # noqa: F401, PLC0415 - registers the rules
        dpd_breakers,
        observability_rules,
        rules,
        security,
        sizing,
    )

    typed, problems = parse_spec(data)
    if typed is None:
        raise SpecError(problems, source=source)
    context = RuleContext(spec=typed, architecture=architecture or resolve_architecture(typed))
    warnings: list[SpecWarning] = []
    parsed_cleanly = not problems
    for rule in _RULES:
        try:
            findings = list(rule(context))
        except (AttributeError, TypeError):
            # A field the loader could not read holds a placeholder; its problem is already listed,
            # and a rule that reaches it has nothing sound to add.
            if parsed_cleanly:
                raise
            continue
        for finding in findings:
            if isinstance(finding, Problem):
                problems.append(finding)
            else:
                warnings.append(finding)
    if problems:
        raise SpecError(problems, source=source)
    return CheckedSpec(spec=typed, warnings=tuple(warnings), architecture=context.architecture)


def load_checked_spec(path: str | Path) -> CheckedSpec:
    """Read a spec file and check it: the one path every command and the CDK app take from a file."""
    from hyperpod_dpd.spec.loading import read_spec_data  # noqa: PLC0415 - import cycle

    return check_data(read_spec_data(path), source=str(path))
