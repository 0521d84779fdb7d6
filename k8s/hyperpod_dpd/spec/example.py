"""The annotated example spec: every field with its value or default, unset optional ones commented out.

Like ``helm show values``, it is the way to learn the options. It is derived from the spec types and
their docstrings, so a new field shows up without an edit here; it loads back to the spec it was
made from.
"""

from __future__ import annotations

import textwrap
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

import yaml

from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.fields import SpecField, is_record, record_kinds, spec_fields, union_options, without_none
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.loading import to_plain
from hyperpod_dpd.spec.schema import FILE_NAME
from hyperpod_dpd.spec.units import ByteSize

WIDTH = 100
_INDENT = "  "


def example_text(spec: DpdSpec) -> str:
    """``spec`` as an annotated YAML file that ``parse_spec_text`` reads back to ``spec``."""
    header = [
        f"# yaml-language-server: $schema={FILE_NAME}",
        f"# (write the schema beside this file with: hyperpod-dpd schema > {FILE_NAME})",
        "#",
        "# A hyperpod-dpd spec: every field with its value; a commented line is an optional field left unset,",
        "# with what leaving it unset means. Check your edits with: hyperpod-dpd validate THIS_FILE",
    ]
    return "\n".join([*header, *_record_lines(type(spec), spec, "")]) + "\n"


def _record_lines(cls: type, value: Any, indent: str, *, template: bool = False) -> list[str]:
    """A record's fields. In a ``template`` (a block the caller comments out) unset fields are shown
    with placeholders rather than commented a second time."""
    lines: list[str] = []
    for item in spec_fields(cls):
        if item.refused:
            continue
        current = getattr(value, item.name) if value is not None else _placeholder_value(item)
        lines += _comment_lines(item, indent, unset=current is None)
        lines += _field_lines(item.name, item.hint, current, indent, template=template)
    return lines


def _field_lines(name: str, hint: Any, current: Any, indent: str, *, template: bool) -> list[str]:
    inner, _ = without_none(hint)
    if current is None:
        lines = _template_lines(name, inner, indent)
        return lines if template else _commented(lines, indent)
    options = union_options(inner)
    kinds = record_kinds(options) if options else None
    if kinds is not None:
        lines = [f"{indent}{name}:", f"{indent}{_INDENT}{current.KIND}:"]
        lines += _record_lines(type(current), current, indent + _INDENT * 2, template=template)
        for kind, cls in kinds.items():
            if cls is not type(current):
                other = [f"{indent}{_INDENT}{kind}:", *_record_lines(cls, None, indent + _INDENT * 2, template=True)]
                lines += other if template else _commented(other, indent + _INDENT)
        return lines
    if is_record(inner):
        body = _record_lines(type(current), current, indent + _INDENT, template=template)
        if all(line.lstrip().startswith("#") for line in body):  # nothing set: YAML needs an empty mapping
            return [f"{indent}{name}: {{}}  # to set a field, drop the {{}} and uncomment it", *body]
        return [f"{indent}{name}:", *body]
    item_kinds = _item_kinds(inner)
    if item_kinds and not current:  # an empty list of records: show one item of each kind to copy
        items: list[str] = []
        for kind, cls in item_kinds.items():
            items += [f"{indent}{_INDENT}- {kind}:", *_record_lines(cls, None, indent + _INDENT * 3, template=True)]
        if template:
            return [f"{indent}{name}:", *items]
        return [f"{indent}{name}: []", *_commented(items, indent + _INDENT)]
    return [f"{indent}{name}: {_flow(to_plain(current))}"]


def _template_lines(name: str, hint: Any, indent: str) -> list[str]:
    """An unset optional field, written as its shape so that uncommenting it gives a start."""
    options = union_options(hint)
    kinds = record_kinds(options) if options else None
    if kinds is not None:
        lines = [f"{indent}{name}:"]
        for kind, cls in kinds.items():
            lines += [f"{indent}{_INDENT}{kind}:", *_record_lines(cls, None, indent + _INDENT * 2, template=True)]
        return lines
    if options:  # e.g. a preset name or an explicit record: the string form, then the record
        lines = [f"{indent}{name}: {_placeholder(o)}" for o in options if not is_record(o)]
        for cls in (o for o in options if is_record(o)):
            lines += [f"{indent}# or:", f"{indent}{name}:", *_record_lines(cls, None, indent + _INDENT, template=True)]
        return lines
    if is_record(hint):
        return [f"{indent}{name}:", *_record_lines(hint, _defaults_or_none(hint), indent + _INDENT, template=True)]
    return [f"{indent}{name}: {_placeholder(hint)}"]


def _placeholder_value(item: SpecField) -> Any:
    """What a field shows inside a commented-out record: its default, else a placeholder."""
    if item.required:
        return _Placeholder(item.hint)
    return item.default


class _Placeholder:
    """A required field's value in a template, written as ``<type>``."""

    def __init__(self, hint: Any) -> None:
        self.text = _placeholder(hint)


def _defaults_or_none(cls: type) -> Any:
    try:
        return cls()
    except TypeError:  # a record with required fields: placeholders instead
        return None


def _placeholder(hint: Any) -> str:
    hint, _ = without_none(hint)
    if hint is ByteSize:
        return "<size, e.g. 16Gi>"
    if hint is InstanceType:
        return "<instance type, e.g. ml.p5.48xlarge>"
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "<" + " | ".join(str(m.value) for m in hint) + ">"
    origin = typing.get_origin(hint)
    if origin is tuple:
        return "[]"
    if origin in (Mapping, dict):
        return "{}"
    names = {bool: "true | false", int: "integer", float: "number", str: "string"}
    return f"<{names.get(hint, getattr(hint, '__name__', 'value'))}>"


def _item_kinds(hint: Any) -> dict[str, type] | None:
    if typing.get_origin(hint) is tuple:
        options = union_options(typing.get_args(hint)[0])
        return record_kinds(options) if options else None
    return None


def _flow(value: Any) -> str:
    if isinstance(value, _Placeholder):
        return value.text
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=False)
    return text.removesuffix("\n...\n").rstrip("\n")


def _comment_lines(item: SpecField, indent: str, *, unset: bool) -> list[str]:
    text = item.description
    if unset and item.default_text:
        text = f"{text} Unset: {item.default_text.removeprefix('- ')}." if text else \
            f"Unset: {item.default_text.removeprefix('- ')}."
    if not text:
        return []
    return textwrap.wrap(text, WIDTH, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ")


def _commented(lines: list[str], indent: str) -> list[str]:
    """Comment out a block at ``indent``, so that removing one ``# `` per line restores its YAML."""
    return [f"{indent}# {line[len(indent):]}" for line in lines]
