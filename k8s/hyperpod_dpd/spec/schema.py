"""A JSON Schema of the spec *file* (sizes as strings, one-key source unions), for editors.

yaml-language-server (VS Code's YAML extension, Neovim, Helix...) completes and checks a spec file whose
first line is ``# yaml-language-server: $schema=dpd-spec.schema.json``. The schema is derived from the
spec types, as the loader is, so the two cannot drift; the loader stays the authority (it also checks
what a schema cannot say, such as whole bytes), and ``hyperpod-dpd validate`` runs every rule besides.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.fields import (
    is_record,
    is_shorthand,
    record_kinds,
    record_summary,
    record_types,
    spec_fields,
    union_options,
    without_none,
)
from hyperpod_dpd.spec.instances import InstanceType, supported_names
from hyperpod_dpd.spec.loading import to_plain
from hyperpod_dpd.spec.units import SIZE_WITH_UNIT, ByteSize

DRAFT = "http://json-schema.org/draft-07/schema#"
FILE_NAME = "dpd-spec.schema.json"


def spec_json_schema() -> dict[str, Any]:
    """The schema of a spec file: the root record inline, every nested record under ``definitions``."""
    root = _record(DpdSpec)
    definitions = {cls.__name__: _record(cls) for cls in record_types(DpdSpec) if cls is not DpdSpec}
    return {"$schema": DRAFT, "title": "hyperpod-dpd spec", **root, "definitions": definitions}


def schema_text() -> str:
    return json.dumps(spec_json_schema(), indent=2) + "\n"


def _record(cls: type) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for item in spec_fields(cls):
        if item.refused:
            prop: dict[str, Any] = {"type": "object", "maxProperties": 0, "description": f"refused: {item.refused}"}
        else:
            prop = _type(item.hint)
            if item.file_reference:
                prop = _with_file_reference(prop, item.file_reference)
            unset = _unset_sentence(item.default_text) if item.default is None else ""
            text = " ".join(part for part in (item.description, unset) if part)
            if text:
                prop = {**prop, "description": text}
            if not item.required and item.default is not None:
                prop = {**prop, "default": to_plain(item.default)}
        properties[item.name] = prop
    schema: dict[str, Any] = {"type": "object"}
    summary = record_summary(cls)
    if summary:
        schema["description"] = summary
    schema["properties"] = properties
    required = [item.name for item in spec_fields(cls) if item.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _with_file_reference(prop: dict[str, Any], key: str) -> dict[str, Any]:
    """``prop`` or ``{key: PATH}``, the one-key form the checked loader reads from a file."""
    reference = {"type": "object", "properties": {key: {"type": "string", "minLength": 1,
                                                         "description": "a path, relative to the spec file"}},
                 "required": [key], "additionalProperties": False}
    return {"anyOf": [*_options(prop), reference]}


def _options(prop: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives of a bare ``anyOf`` (nested ones flattened), or ``[prop]``."""
    if set(prop) != {"anyOf"}:
        return [prop]
    return [option for inner in prop["anyOf"] for option in _options(inner)]


def _unset_sentence(text: str) -> str:
    return f"Unset: {text.removeprefix('- ')}." if text else ""


def _type(hint: Any) -> dict[str, Any]:
    inner, optional = without_none(hint)
    if optional:
        return {"anyOf": [_type(inner), {"type": "null"}]}
    options = union_options(hint)
    if options:
        kinds = record_kinds(options)
        if kinds is None:
            return {"anyOf": [_type(option) for option in options]}
        return {"oneOf": [{"type": "object", "properties": {kind: _ref(cls)}, "required": [kind],
                           "additionalProperties": False} for kind, cls in kinds.items()]}
    origin = typing.get_origin(hint)
    if origin is tuple:
        return {"type": "array", "items": _type(typing.get_args(hint)[0])}
    if origin in (Mapping, dict):
        return {"type": "object", "additionalProperties": _type(typing.get_args(hint)[1])}
    if is_shorthand(hint):
        return {"anyOf": [_ref(hint), {"type": "boolean", "description": "true: every default; false: none"}]}
    if is_record(hint):
        return _ref(hint)
    if hint is ByteSize:
        return {"type": "string", "pattern": SIZE_WITH_UNIT,
                "description": "a size with a unit, such as 8Gi or 512Mi"}
    if hint is InstanceType:
        names = supported_names()
        return {"type": "string", "enum": [*names, *(name.removeprefix("ml.") for name in names)]}
    if isinstance(hint, type) and issubclass(hint, Enum):
        return {"enum": [member.value for member in hint]}
    scalar = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(hint)
    if scalar is None:  # pragma: no cover - a spec field of a new type; the loader raises the same way
        raise TypeError(f"no schema for {hint!r}")
    return {"type": scalar}


def _ref(cls: type) -> dict[str, Any]:
    return {"$ref": f"#/definitions/{cls.__name__}"}
