"""Helpers the test folders share. The root conftest registers this module as ``support``.

Test folders are not packages and ``--import-mode=importlib`` keeps them off ``sys.path``, so a
folder's own helper modules, the scripts and ``app.py`` are loaded by path with :func:`load_module`.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from hyperpod_dpd import spec_to_mapping
from hyperpod_dpd.spec.defaults import default_spec, default_spec_text


def load_module(name: str, path: Path) -> ModuleType:
    """The Python file ``path`` (a test helper, a script, ``app.py``) as module ``name``, once; later
    imports of ``name`` get the same module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    spec.loader.exec_module(module)
    return module


class FakeClock:
    """``clock()`` and ``sleep()`` that only move time forward when slept."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def write_spec(tmp_path: Path, *replacements: tuple[str, str]) -> str:
    """The embedded default spec with each ``(old, new)`` text replaced, as a file; returns its path."""
    text = default_spec_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


def default_mapping() -> dict[str, Any]:
    """The embedded default spec as the plain data a spec file holds."""
    return spec_to_mapping(default_spec())


def with_value(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``data`` with the dotted ``path`` set to ``value`` (missing parents made)."""
    changed = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = changed
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return changed
