"""The library's error types, rooted in :class:`DpdError`, and the problems and warnings they carry.

Every check reports *all* its problems at once, each naming the field, the bad value and the fix,
so a user fixes a spec in one pass instead of one deploy per mistake.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The start of the one line an exception that no check turned into a problem prints: it is a bug, not bad input.
INTERNAL_ERROR = "internal error (a bug in hyperpod-dpd, not a problem with your input)"
REPORT_TO = "the hyperpod-dpd issue tracker"
EXIT_INTERNAL = 70  # the exit status of a bug, in every command and the CDK app: EX_SOFTWARE of BSD's sysexits.h
_PACKAGES = ("hyperpod_dpd", "hyperpod_dpd_cdk")


def install_extra(extra: str) -> str:
    """How to add an optional extra: from the checkout, since hyperpod-dpd is not published on PyPI."""
    return (f"pip install '.[{extra}]' in the hyperpod-dpd checkout (it is not on PyPI; `make test` installs "
            "every extra)")


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One thing wrong with a spec: where, what was given, why it is wrong and how to fix it."""

    field: str
    value: Any
    message: str
    fix: str

    def render(self) -> str:
        shown = _show(self.value)
        return f"{self.field}: {self.message} (got {shown}). Fix: {self.fix}"

    def to_json(self) -> dict[str, Any]:
        """``{"field", "value", "message", "fix"}``; a value that is not plain JSON is shown as text."""
        plain = isinstance(self.value, str | int | float | bool) or self.value is None
        return {"field": self.field, "value": self.value if plain else _show(self.value), "message": self.message,
                "fix": self.fix}


def warning_count(count: int) -> str:
    """``1 warning``, ``0 warnings``: the summary line every command prints after its warnings."""
    return f"{count} warning" if count == 1 else f"{count} warnings"


@dataclass(frozen=True, kw_only=True)
class SpecWarning:
    """Something that deploys but is risky or wasteful; reported, never fatal."""

    code: str
    field: str
    message: str

    def render(self) -> str:
        return f"[{self.code}] {self.field}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "field": self.field, "message": self.message}


class DpdError(Exception):
    """The root of every error the library raises on purpose: ``except DpdError`` catches them all.

    Each error keeps its older base as a second one (``SpecError`` is still a ``ValueError``), so code that
    caught that base keeps working. Anything else escaping the library is a bug (:data:`INTERNAL_ERROR`).
    """


class SpecError(DpdError, ValueError):
    """A spec that the operator, vLLM or the cluster would reject, with every problem found."""

    def __init__(self, problems: Iterable[Problem], *, source: str | None = None, what: str = "DPD spec") -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.source = source
        self.what = what
        super().__init__(self._text())

    def _text(self) -> str:
        where = f" in {self.source}" if self.source else ""
        count = len(self.problems)
        noun = "problem" if count == 1 else "problems"
        lines = [f"invalid {self.what}{where} ({count} {noun}):"]
        lines += [f"  - {p.render()}" for p in self.problems]
        return "\n".join(lines)


class UsageError(DpdError):
    """A refusal whose message is the whole story (a bad option, a missing extra): printed as-is, exit status 2.

    Library modules raise it too; the command line prints it without a traceback.
    """


def problems_error(head: str, err: SpecError) -> UsageError:
    """``head`` and one ``  - field: ...`` line per problem, as every command prints them."""
    return UsageError("\n".join([head, *(f"  - {p.render()}" for p in err.problems)]))


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, float | int | bool) or value is None:
        return repr(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def raise_if_any(problems: Iterable[Problem], *, source: str | None = None) -> None:
    """Raise one :class:`SpecError` carrying every problem, if there is any."""
    found = tuple(problems)
    if found:
        raise SpecError(found, source=source)


def internal_error_line(err: BaseException) -> str:
    """One line for a bug: the exception, the line of this package that raised or called into it, where to report it.

    One line and not a traceback: the user can act on neither, and a maintainer needs only the place.
    """
    where = "an unknown place"
    for frame in traceback.extract_tb(err.__traceback__):
        parts = frame.filename.replace("\\", "/").split("/")
        inside = [i for i, part in enumerate(parts) if part in _PACKAGES]
        if inside:
            where = f"{'/'.join(parts[inside[-1]:])}:{frame.lineno}"
    text = " ".join(str(err).split())
    text = f": {text[:200]}{'...' if len(text) > 200 else ''}" if text else ""
    return (f"{INTERNAL_ERROR}: {type(err).__name__}{text} at {where}. Please report this line, the command and "
            f"`hyperpod-dpd --version` to {REPORT_TO}")


# The name before 0.2; it shadows the builtin, so new code says SpecWarning.
Warning = SpecWarning
