#!/usr/bin/env python3
"""Derive the value rules vLLM's config classes enforce at start, from an installed vLLM, into package data.

``scripts/vllm_flags.py`` reads flag names, arity, types and choices from vLLM's source; what pydantic then
checks when vLLM builds its configs (``Field(ge=1)`` bounds, the types and enums of every key of a JSON config
flag, the names vLLM's registries accept) lives in the classes themselves. This script imports them from the
engine venv (``make engine``) and writes ``k8s/hyperpod_dpd/data/vllm-<version>-value-rules.json``:

- ``bounds``: for each long flag that is a field of a config class, its ``ge``/``gt``/``le``/``lt``;
- ``config_schemas``: for each JSON config flag, the JSON schema pydantic validates its value with
  (``TypeAdapter(<class>).json_schema()``), keys one level down and their values;
- ``registries``: the reasoning parsers, tool parsers, attention backends and speculative methods by name.

Usage: ``.venv-engine/bin/python scripts/vllm_value_rules.py`` (no GPU, no network; the oracle's fake node).
The differential tests (``tests/oracle``) check our rules against vLLM's own verdicts, which is what keeps this
data honest.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "k8s" / "hyperpod_dpd" / "oracle"))

import vllm_checks  # noqa: E402 - found through the path above: the engine venv does not hold hyperpod_dpd

BOUND_KEYS = {"ge": "ge", "gt": "gt", "le": "le", "lt": "lt"}


def _bounds(info: Any) -> dict[str, float]:
    found: dict[str, float] = {}
    for item in getattr(info, "metadata", ()):
        for key in BOUND_KEYS:
            value = getattr(item, key, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found[key] = value
    return found


def _names_too(schema: dict[str, Any]) -> dict[str, Any]:
    """Enums vLLM also takes by member name (``"cudagraph_mode": "FULL_AND_PIECEWISE"``: its validators map
    names to members), so a name is no refusal; pydantic's schema lists only the values."""
    import enum  # noqa: PLC0415
    import importlib  # noqa: PLC0415
    import pkgutil  # noqa: PLC0415

    import vllm.config  # noqa: PLC0415

    classes: dict[str, type[enum.Enum]] = {}
    for module_info in pkgutil.iter_modules(vllm.config.__path__):
        module = importlib.import_module(f"vllm.config.{module_info.name}")
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, enum.Enum):
                classes.setdefault(name, value)
    for title, definition in schema.get("$defs", {}).items():
        if "enum" in definition and title in classes:
            definition["enum"] = [*definition["enum"], *(member.name for member in classes[title])]
            definition.pop("type", None)
    return schema


def derive(flags: dict[str, Any]) -> dict[str, Any]:
    import vllm  # noqa: PLC0415
    import vllm.config as configs  # noqa: PLC0415
    from pydantic import TypeAdapter  # noqa: PLC0415
    from vllm.engine.arg_utils import EngineArgs  # noqa: PLC0415

    long_flags = set(flags["flags"])
    bounds: dict[str, dict[str, float]] = {}
    enums: dict[str, list[str]] = {}
    engine_fields = {field for field in EngineArgs.__dataclass_fields__}
    for name in sorted(dir(configs)):
        cls = getattr(configs, name)
        fields = getattr(cls, "__pydantic_fields__", None)
        if not isinstance(cls, type) or not isinstance(fields, dict):
            continue
        for field, info in fields.items():
            flag = "--" + field.replace("_", "-")
            found = _bounds(info)
            if found and flag in long_flags and field in engine_fields:
                bounds.setdefault(flag, {}).update(found)
            if flag in long_flags and field in engine_fields and flag not in flags["values"]:
                listed = _enum(TypeAdapter, info.annotation)
                if listed:
                    enums[flag] = listed
    schemas: dict[str, Any] = {}
    for flag, entry in sorted(flags["config_keys"].items()):
        cls = getattr(configs, entry["class"], None)
        if cls is None:
            continue
        try:
            schemas[flag] = _names_too(TypeAdapter(cls).json_schema(mode="validation"))
        except Exception as error:
            schemas[flag] = {"unavailable": f"{type(error).__name__}: {error}"[:200]}
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS  # noqa: PLC0415
    from vllm.reasoning import ReasoningParserManager  # noqa: PLC0415
    from vllm.tool_parsers import ToolParserManager  # noqa: PLC0415
    from vllm.transformers_utils.config import _CONFIG_FORMAT_TO_CONFIG_PARSER  # noqa: PLC0415
    from vllm.v1.attention.backends.registry import AttentionBackendEnum  # noqa: PLC0415

    registries = {
        # vllm/config/model.py: "Unknown quantization method"; vllm/transformers_utils/config.py: "auto" picks one
        # of the registered config parsers, any other name must be registered.
        "quantization_methods": sorted(QUANTIZATION_METHODS),
        "config_formats": sorted(["auto", *_CONFIG_FORMAT_TO_CONFIG_PARSER]),
        "reasoning_parsers": sorted(ReasoningParserManager.list_registered()),
        "tool_parsers": sorted(ToolParserManager.list_registered()),
        "attention_backends": sorted(member.name for member in AttentionBackendEnum),
    }
    parser_choices, json_flags = _parser_rules(flags)
    return {"vllm_version": vllm.__version__,
            "provenance": {"derived_by": "scripts/vllm_value_rules.py", "from": f"vllm=={vllm.__version__} "
                           "as installed by locks/engine.txt (its pydantic config classes and registries)"},
            "bounds": bounds, "config_schemas": schemas, "registries": registries, "field_enums": enums,
            "parser_choices": parser_choices, "json_flags": json_flags}


def _enum(adapter: Any, annotation: Any) -> list[str]:
    """The values a ``Literal``/enum field takes, as the strings argparse hands it (empty when it is free)."""
    try:
        schema = adapter(annotation).json_schema()
    except Exception:
        return []
    options = [schema, *schema.get("anyOf", [])]
    if any(option.get("type") == "string" and "enum" not in option for option in options):
        return []  # a free string beside the listed names (a class's qualified name, a plugin's mode)
    values = [value for option in options for value in option.get("enum", [])]
    return [str(value) for value in values if isinstance(value, (str, int)) and not isinstance(value, bool)]


def _parser_rules(flags: dict[str, Any]) -> tuple[dict[str, list[str]], list[str]]:
    """From the ``vllm serve`` parser itself, for the flags the source-derived data has no value rule for (their
    kwargs are rewritten at run time): the choices argparse checks, and the flags whose type is ``json.loads``."""
    import argparse  # noqa: PLC0415

    from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: PLC0415

    parser = FlexibleArgumentParser(prog="vllm")
    serve = ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    choices: dict[str, list[str]] = {}
    json_flags: list[str] = []
    for action in serve._actions:
        names = [name for name in action.option_strings if name.startswith("--") and name in flags["flags"]]
        if not names or names[0] in flags["values"] or isinstance(action, argparse._StoreTrueAction):
            continue
        if action.choices:
            choices[names[0]] = sorted(str(choice) for choice in action.choices)
        elif action.type is not None:
            try:
                action.type('{"a": 1}')
                action.type("bogus-value")
            except Exception:
                json_flags.append(names[0])
    return choices, sorted(json_flags)


def main() -> int:
    stub = REPO / ".venv-engine" / "stub"
    vllm_checks.offline_environment(REPO / ".venv-engine" / "cache")
    vllm_checks.install_fake_platform(stub, {"name": "NVIDIA H100 80GB HBM3", "capability": (9, 0),
                                             "memory_gib": 80.0, "count": 8})
    version = os.environ.get("VLLM_VERSION", "0.19.0")
    data_dir = REPO / "k8s" / "hyperpod_dpd" / "data"
    flags = json.loads((data_dir / f"vllm-{version}-flags.json").read_text(encoding="utf-8"))
    derived = derive(flags)
    target = data_dir / f"vllm-{version}-value-rules.json"
    target.write_text(json.dumps(derived, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{target.relative_to(REPO)}: {len(derived['bounds'])} bounded flags, "
          f"{len(derived['config_schemas'])} config schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
