"""The spec's fields as data (name, type, default, description), read from the dataclasses and their docstrings.

``hyperpod-dpd example`` and ``hyperpod-dpd schema`` are both derived from these, so a field added to a
spec type appears in both without further code.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.spec.units import ByteSize

# A spec field's metadata key: the loader reads the field (so a ported spec gets a precise error) but a
# rule refuses any value, so the example leaves it out and the schema allows it only empty.
REFUSED = "refused"
# A spec field's metadata key: a one-key mapping ``{KEY: PATH}`` the file may hold in place of the value,
# which the checked loader replaces by what it reads from PATH (so the schema must allow it too).
FILE_REFERENCE = "file_reference"

_PARAM = re.compile(r":param (\w+):(.*?)(?=:param \w+:|\Z)", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class SpecField:
    """One field of a spec record.

    :param default: the default value, or :data:`dataclasses.MISSING` when the field is required.
    :param default_text: the docstring's ``:default:`` text, which says what an unset optional field means.
    """

    name: str
    hint: Any
    default: Any
    description: str
    default_text: str
    refused: str | None
    file_reference: str | None = None

    @property
    def required(self) -> bool:
        return self.default is dataclasses.MISSING


def spec_fields(cls: type) -> tuple[SpecField, ...]:
    """The fields of one spec record, in declaration order."""
    hints = typing.get_type_hints(cls)
    docs = _param_docs(cls)
    result = []
    for item in dataclasses.fields(cls):
        if item.default is not dataclasses.MISSING:
            default = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = dataclasses.MISSING
        description, _, default_text = plain(docs.get(item.name, "")).partition(":default:")
        result.append(SpecField(name=item.name, hint=hints[item.name], default=default,
                                description=description.strip(), default_text=default_text.strip(),
                                refused=item.metadata.get(REFUSED),
                                file_reference=item.metadata.get(FILE_REFERENCE)))
    return tuple(result)


def record_summary(cls: type) -> str:
    """The first paragraph of a record's docstring, on one line."""
    doc = (cls.__doc__ or "").split("\n\n")[0]
    return " ".join(plain(doc).split())


_ROLE = re.compile(r":(?:class|data|func|meth|mod|attr|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``")


def plain(text: str) -> str:
    """A docstring's reStructuredText as the text a YAML comment or editor tooltip shows: ``x`` and :class:`x` as `x`.

    The docstrings stay in the house style (Sphinx, jsii); what a spec author reads has no double backticks.
    """
    return _LITERAL.sub(r"`\1`", _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text))


def without_none(hint: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``; ``(hint, False)`` otherwise."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        args = typing.get_args(hint)
        options = tuple(a for a in args if a is not type(None))
        if len(options) < len(args):
            return (options[0] if len(options) == 1 else typing.Union[options]), True  # noqa: UP007
    return hint, False


def union_options(hint: Any) -> tuple[Any, ...]:
    """The members of a union, or ``()`` for any other type."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return typing.get_args(hint)
    return ()


def record_kinds(options: tuple[Any, ...]) -> dict[str, type] | None:
    """``{KIND: cls}`` when every option is a record with a ``KIND`` (written as a one-key mapping)."""
    records: list[Any] = [o for o in options if is_record(o) and hasattr(o, "KIND")]
    if len(records) > 1 and len(records) == len(options):
        return {o.KIND: o for o in records}
    return None


def is_shorthand(hint: Any) -> bool:
    """A record whose optional field may be written ``true`` (all its defaults) or ``false`` (none)."""
    return is_record(hint) and bool(getattr(hint, "SHORTHAND", False))


def is_record(hint: Any) -> bool:
    """A spec record (written as a mapping); value objects such as sizes are written as strings."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint) and hint is not ByteSize


def record_types(root: type) -> Iterator[type]:
    """Every record reachable from ``root`` (itself first), each once, in the order first met."""
    seen: list[type] = []

    def visit(hint: Any) -> None:
        if is_record(hint):
            if hint in seen:
                return
            seen.append(hint)
            for item in spec_fields(hint):
                visit(item.hint)
            return
        for arg in typing.get_args(hint):
            visit(arg)

    visit(root)
    yield from seen


def _param_docs(cls: type) -> dict[str, str]:
    return {name: " ".join(text.split()) for name, text in _PARAM.findall(cls.__doc__ or "")}
