"""One error root: every exception the library raises on purpose is a ``DpdError``, so a caller can catch one type."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache

import pytest

import hyperpod_dpd
from hyperpod_dpd import DpdError

# Exceptions that never leave their room, each with why: the room catches them and raises a DpdError instead.
INTERNAL = {
    "hyperpod_dpd.spec._parsing.Refused": "spec.loading turns each refusal into a SpecError with the file's position",
    "hyperpod_dpd.spec._parsing._DuplicateKey": "a signal inside the JSON reader, caught beside where it is raised",
    "hyperpod_dpd.spec._parsing._LongInteger": "a signal inside the JSON reader, caught beside where it is raised",
    "hyperpod_dpd.spec._parsing._Repeat": "a signal inside the JSON reader, caught beside where it is raised",
    "hyperpod_dpd.oracle.vllm_checks._Refused": "runs inside the engine venv's forked child, which turns it into "
                                                "a JSON verdict; it never reaches the library",
    "hyperpod_dpd.traces.rows.BadRow": "traces.reading turns a bad row into a problem naming its line",
    "hyperpod_dpd.traces.rows.Skip": "traces.reading counts a skipped row; it is not an error",
}


@cache
def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(hyperpod_dpd.__path__, "hyperpod_dpd."):
        if module.name.endswith(".__main__"):  # runs the command line when imported
            continue
        for name, value in vars(importlib.import_module(module.name)).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.name:
                found[f"{module.name}.{name}"] = value
    return found


def test_every_library_exception_derives_from_dpd_error() -> None:
    classes = _exception_classes()
    assert set(INTERNAL) <= set(classes), "an exempted class is gone: drop it from INTERNAL"
    outside = sorted(name for name, cls in classes.items() if name not in INTERNAL and not issubclass(cls, DpdError))
    assert outside == [], "derive these from hyperpod_dpd.DpdError, or say in INTERNAL why they never escape"


def _by_name(name: str) -> type[BaseException]:
    (found,) = [cls for qualified, cls in _exception_classes().items() if qualified.rsplit(".", 1)[1] == name]
    return found


@pytest.mark.parametrize("name", ["SpecError", "UsageError", "KubeError", "AwsUnavailable", "AmpError",
                                  "ResultsError", "NoLayoutMeetsSla", "UploadedUnreadable", "AdvisorUnavailable"])
def test_the_walk_finds_the_library_errors(name: str) -> None:
    assert issubclass(_by_name(name), DpdError)


@pytest.mark.parametrize(("name", "older"), [("SpecError", ValueError), ("ResultsError", ValueError),
                                             ("UnsizableArchitecture", ValueError), ("MissingExtra", ImportError)])
def test_the_older_bases_still_catch(name: str, older: type[Exception]) -> None:
    assert issubclass(_by_name(name), older)
