"""Deep immutability for spec dataclasses: lists become tuples and dicts read-only mappings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import Any


def freeze(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


class Frozen:
    """Base for spec records: after ``__init__`` every container field is read-only."""

    def __post_init__(self) -> None:
        for spec_field in fields(self):  # type: ignore[arg-type]
            current = getattr(self, spec_field.name)
            frozen = freeze(current)
            if frozen is not current:
                object.__setattr__(self, spec_field.name, frozen)
