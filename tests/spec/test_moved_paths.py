"""The module paths of the old layout still import, warn once with the new home, and hand out the same objects."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

from hyperpod_dpd import _moved


@pytest.mark.parametrize(("old", "new"), sorted(_moved.MOVED.items()))
def test_an_old_path_is_a_view_of_the_new_module(old: str, new: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    names = list(getattr(target, "__all__", [n for n in vars(target) if not n.startswith("_")]))
    assert names, f"{new} exports nothing"
    assert all(getattr(module, name) is getattr(target, name) for name in names)


def test_a_new_path_never_warns() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for new in sorted(set(_moved.MOVED.values())):
            importlib.import_module(new)


def test_an_unknown_old_looking_path_still_fails() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hyperpod_dpd.no_such_room")
