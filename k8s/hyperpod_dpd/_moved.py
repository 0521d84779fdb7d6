"""The module paths before the spec/, contracts/ and clients/ rooms, and renamed functions, kept for one release.

``from hyperpod_dpd.loading import load_spec`` keeps working, with a ``DeprecationWarning`` that names
the new home; the old module is a view of the new one, so there is one copy of every name. A renamed
function keeps its old name as an alias (:func:`renamed`) that warns when called.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

# Old dotted path -> where it lives now (docs/architecture.md).
MOVED = {
    "hyperpod_dpd.architecture": "hyperpod_dpd.spec.architecture",
    "hyperpod_dpd.crd": "hyperpod_dpd.contracts.crd",
    "hyperpod_dpd.defaults": "hyperpod_dpd.spec.defaults",
    "hyperpod_dpd.deployed": "hyperpod_dpd.contracts.stack_outputs",
    "hyperpod_dpd.deployment_defaults": "hyperpod_dpd.contracts.stack_defaults",
    "hyperpod_dpd.instances": "hyperpod_dpd.spec.instances",
    "hyperpod_dpd.load": "hyperpod_dpd.load_point",
    "hyperpod_dpd.loading": "hyperpod_dpd.spec.loading",
    "hyperpod_dpd.operator_names": "hyperpod_dpd.contracts.operator",
    "hyperpod_dpd.ops.aws": "hyperpod_dpd.clients.aws",
    "hyperpod_dpd.ops.checks": "hyperpod_dpd.clients.checks",
    "hyperpod_dpd.ops.kube": "hyperpod_dpd.clients.kube",
    "hyperpod_dpd.ops.wait": "hyperpod_dpd.clients.wait",
    "hyperpod_dpd.router_length": "hyperpod_dpd.contracts.router",
    "hyperpod_dpd.spec_example": "hyperpod_dpd.spec.example",
    "hyperpod_dpd.spec_fields": "hyperpod_dpd.spec.fields",
    "hyperpod_dpd.spec_schema": "hyperpod_dpd.spec.schema",
    "hyperpod_dpd.tokenizer_files": "hyperpod_dpd.contracts.tokenizer",
    "hyperpod_dpd.units": "hyperpod_dpd.spec.units",
    "hyperpod_dpd.vllm_args": "hyperpod_dpd.contracts.vllm",
    "hyperpod_dpd.zones": "hyperpod_dpd.contracts.zones",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path only after the real finders found nothing there (it sits last on ``sys.meta_path``)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def exec_module(self, module: ModuleType) -> None:
        new = MOVED[module.__name__]
        warnings.warn(f"{module.__name__} moved to {new}; import it from there (the old path goes in 0.3)",
                      DeprecationWarning, stacklevel=2)
        target = importlib.import_module(new)
        module.__doc__ = target.__doc__
        public = [name for name in vars(target) if not name.startswith("_")]
        module.__dict__["__all__"] = list(getattr(target, "__all__", public))
        module.__dict__["__getattr__"] = lambda name: getattr(target, name)


def install() -> None:
    """Once per process: old paths resolve after every real finder has had its turn."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.append(_OldPaths())


def renamed(new: Callable[_P, _R], old: str) -> Callable[_P, _R]:
    """``new`` under its former name ``old``: it still works, and says which name replaces it."""

    @functools.wraps(new)
    def alias(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        warnings.warn(f"{old} is renamed {new.__name__}; call that (the old name goes in 0.3)",
                      DeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated: the former name of :func:`{new.__name__}`."
    return alias
