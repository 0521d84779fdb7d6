"""The series a PromQL expression reads, taken from its syntax tree (``promql-parser``).

The alert rules and the dashboard are the only list of what the stack reads: :func:`selectors`
takes the vector selectors out of an expression, so nothing keeps a second, hand-written list
that could drift from the rules.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.errors import install_extra

# promql-parser's MatchOp names, as PromQL writes them.
_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
# Nodes whose children are expressions, and the attributes that hold them.
_CHILDREN = ("lhs", "rhs", "expr", "param", "vector_selector")
_ABSENCE = frozenset({"absent", "absent_over_time"})


def parser() -> Any:
    """The PromQL parser (``promql-parser``, in the 'observability' extra), or None without it."""
    try:
        return importlib.import_module("promql_parser")
    except ImportError:
        return None


@dataclass(frozen=True, order=True)
class Matcher:
    label: str
    op: str
    value: str

    def promql(self) -> str:
        return f"{self.label}{self.op}{json.dumps(self.value)}"


@dataclass(frozen=True, order=True)
class Selector:
    """One vector selector: the series name and its label matchers (sorted, so equal selectors compare equal)."""

    name: str
    matchers: tuple[Matcher, ...]

    def promql(self) -> str:
        return f"{self.name}{{{', '.join(m.promql() for m in self.matchers)}}}"

    def labels(self) -> tuple[str, ...]:
        """The labels the selector matches on, in order."""
        return tuple(dict.fromkeys(m.label for m in self.matchers))


def selectors(expr: str) -> tuple[Selector, ...]:
    """Every vector selector of ``expr``, in the order they appear, each once.

    Raises ``ValueError`` when ``expr`` is not PromQL and ``ImportError`` without ``promql-parser``.
    """
    return tuple(dict.fromkeys(selector for selector, _ in _parsed(expr)))


def absence_selectors(expr: str) -> tuple[Selector, ...]:
    """The selectors ``expr`` reads only inside ``absent()``/``absent_over_time()``: it fires when they are missing."""
    found: dict[Selector, bool] = {}
    for selector, absent in _parsed(expr):
        found[selector] = found.get(selector, True) and absent
    return tuple(selector for selector, absent in found.items() if absent)


def _parsed(expr: str) -> Iterator[tuple[Selector, bool]]:
    module = parser()
    if module is None:
        raise ImportError(f"promql-parser is not installed: {install_extra('observability')}")
    yield from _walk(module.parse(expr), absent=False)


def _walk(node: Any, *, absent: bool) -> Iterator[tuple[Selector, bool]]:
    if node is None:
        return
    if type(node).__name__ == "VectorSelector":
        matchers = [Matcher(m.name, _OPS[str(m.op).rpartition(".")[2]], m.value) for m in node.matchers.matchers]
        name = node.name or next((m.value for m in matchers if m.label == "__name__" and m.op == "="), "")
        yield Selector(name=name, matchers=tuple(sorted(m for m in matchers if m.label != "__name__"))), absent
        return
    if type(node).__name__ == "Call" and node.func.name in _ABSENCE:
        absent = True
    for attribute in _CHILDREN:
        yield from _walk(getattr(node, attribute, None), absent=absent)
    for arg in getattr(node, "args", None) or ():
        yield from _walk(arg, absent=absent)
