"""Run every rule over a spec and raise one :class:`SpecError` with all the problems."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hyperpod_dpd.contracts.linux import path_error
from hyperpod_dpd.errors import Problem, SpecError, SpecWarning
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.architecture import CONFIG_JSON, PRESETS, ModelArchitecture, preset_for_model_name
from hyperpod_dpd.spec.loading import dump_spec, load_spec_data, parse_spec, parse_spec_leniently
from hyperpod_dpd.validation import (
    autoscaling,
    engine,
    hardware,
    model_source,
    naming,
    observability,
    routing,
    security,
    sizing,
    slo_scaling,
)
from hyperpod_dpd.validation.context import Rule, RuleContext

# Every rule, in the order their problems and warnings are reported. The order is part of the output
# (messages list problems in it), so a new rule goes where its findings should read, not by module.
RULES: tuple[Rule, ...] = (
    engine.engine_flags,
    engine.environment,
    engine.exec_limits,
    observability.ports,
    autoscaling.autoscaling_signals,
    sizing.context_window,
    observability.slo_targets,
    observability.scrape_interval,
    observability.alert_thresholds,
    naming.names,
    model_source.model_source,
    hardware.hardware,
    hardware.roles,
    engine.engine,
    routing.routing,
    routing.kv_cache,
    observability.observability,
    security.tls,
    hardware.idle_node_gpus,
    hardware.topology,
    autoscaling.autoscaling,
    slo_scaling.slo_scaling,
    security.front_doors,
    security.audit_trail,
    sizing.sizing,
)


@dataclass(frozen=True)
class CheckedSpec:
    """A spec that passed every rule, with the warnings it raised and the architecture used."""

    spec: DpdSpec
    warnings: tuple[SpecWarning, ...]
    architecture: ModelArchitecture | None


def known_architecture(spec: DpdSpec) -> ModelArchitecture | None:
    """The spec's architecture (given, a preset's name, or the preset its model name implies), else None.

    None leaves the rules that need it silent, where the planner's ``resolve_architecture`` raises.
    """
    chosen = spec.model.architecture
    if isinstance(chosen, ModelArchitecture):
        return chosen
    if isinstance(chosen, str):
        return PRESETS.get(chosen)
    return preset_for_model_name(spec.model.name)


def _read_config_json(data: object, source: str | None) -> tuple[object, list[Problem]]:
    """``model.architecture: {config_json: PATH}`` replaced by the fields read from that config.json.

    A relative PATH is taken from the spec file's folder (the working directory for stdin or data).
    A file that is missing, not JSON, or not a sizable decoder config is a problem at
    ``model.architecture.config_json``; the architecture is then left unset.
    """
    if not isinstance(data, Mapping) or not isinstance(model := data.get("model"), Mapping):
        return data, []
    chosen = model.get("architecture")
    if not isinstance(chosen, Mapping) or CONFIG_JSON not in chosen:
        return data, []
    field = f"model.architecture.{CONFIG_JSON}"
    path_text = chosen[CONFIG_JSON]
    found: list[Problem] = []
    extra = sorted(str(key) for key in chosen if key != CONFIG_JSON)
    if extra:
        found.append(Problem(field="model.architecture", value=extra,
                             message=f"mixes {CONFIG_JSON} with explicit fields ({', '.join(extra)})",
                             fix=f"give either {{{CONFIG_JSON}: PATH}} or the explicit fields, not both"))
    arch: ModelArchitecture | None = None
    if not isinstance(path_text, str) or not path_text.strip():
        found.append(Problem(field=field, value=path_text, message="must be the path of the model's config.json",
                             fix=f"write {CONFIG_JSON}: path/to/config.json (relative to the spec file)"))
    elif path_error(path_text):
        found.append(Problem(field=field, value=path_text, message=f"cannot be a path: it {path_error(path_text)}",
                             fix=f"write {CONFIG_JSON}: path/to/config.json (relative to the spec file)"))
    else:
        path = Path(path_text).expanduser()
        spec_file = Path(source) if source and not path_error(source) else None
        if not path.is_absolute() and spec_file is not None and spec_file.is_file():
            path = spec_file.parent / path
        if path_error(str(path)) or not path.exists():
            found.append(Problem(field=field, value=path_text, message=f"does not exist ({path})",
                                 fix="give the path of the model's config.json from Hugging Face, relative to "
                                     "the spec file or absolute"))
        else:
            from hyperpod_dpd.planner.sources import load_architecture  # noqa: PLC0415 - only for this form

            try:
                arch = load_architecture(str(path))
            except SpecError as err:
                found.extend(Problem(field=field, value=path_text, message=p.message, fix=p.fix)
                             for p in err.problems)
    fields = ({key: value for key, value in dataclasses.asdict(arch).items() if value is not None}
              if arch is not None and not found else None)
    return {**data, "model": {**model, "architecture": fields}}, found


def check(spec: DpdSpec, *, architecture: ModelArchitecture | None = None, source: str | None = None) -> CheckedSpec:
    """Check ``spec``; raise :class:`SpecError` listing every problem, else return it with its warnings.

    Types are checked by a round trip through the file loader, so a spec built in Python with a
    wrong type gets the same message as a file would; the rules then see a well-typed spec.
    """
    return check_data(dump_spec(spec), architecture=architecture, source=source)


def check_data(data: object, *, architecture: ModelArchitecture | None = None,
               source: str | None = None) -> CheckedSpec:
    """Parse and check plain data (a loaded YAML or JSON file), reporting type and rule problems together."""
    data, read_problems = _read_config_json(data, source)
    typed, problems = parse_spec_leniently(data)
    problems = [*read_problems, *problems]
    if typed is None:
        raise SpecError(problems, source=source)
    context = RuleContext(spec=typed, architecture=architecture or known_architecture(typed))
    warnings: list[SpecWarning] = []
    parsed_cleanly = not problems
    for rule in RULES:
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
    return check_data(load_spec_data(path), source=str(path))


def load_spec(path: str | Path) -> DpdSpec:
    """Read a spec file as the CLI and the CDK app read it, ``model.architecture: {config_json: PATH}`` included
    (the fields read from that config.json, relative to the file); the rules are not run (``check`` runs them).
    Every failure is a :class:`SpecError`."""
    data, problems = _read_config_json(load_spec_data(path), str(path))
    if problems:
        raise SpecError(problems, source=str(path))
    return parse_spec(data, source=str(path))
