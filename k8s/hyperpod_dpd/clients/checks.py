"""The result of one check: a name, a status and a one-line detail."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Status(Enum):
    """PASS and SKIP are fine; FAIL (it is wrong) and ERROR (it could not be checked) are not."""

    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Check:
    """One row of the report. ``settled`` is False while waiting could still change the outcome."""

    name: str
    status: Status
    detail: str
    settled: bool = True

    @property
    def ok(self) -> bool:
        return self.status in (Status.PASS, Status.SKIP)


EXIT_OK = 0
EXIT_FAILED = 1


def exit_status(checks: Iterable[Check]) -> int:
    """0 when every check passed or was skipped, 1 when any failed or could not run."""
    return EXIT_OK if all(check.ok for check in checks) else EXIT_FAILED


def passed(name: str, detail: str) -> Check:
    return Check(name, Status.PASS, detail)


def failed(name: str, detail: str, *, settled: bool = True) -> Check:
    return Check(name, Status.FAIL, detail, settled=settled)


def skipped(name: str, detail: str) -> Check:
    return Check(name, Status.SKIP, detail)


def errored(name: str, detail: str) -> Check:
    return Check(name, Status.ERROR, detail)
