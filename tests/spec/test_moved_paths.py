"""The module paths of the old layout still import, warn once with the new home, and hand out the same objects.

The public functions renamed to one verb per meaning still answer to their old names, with a warning.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import hyperpod_dpd
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


@pytest.mark.parametrize(("old", "new"), [("spec_from_mapping", "parse_spec"), ("spec_to_mapping", "dump_spec"),
                                          ("spec_to_yaml", "dump_spec_yaml")])
def test_a_renamed_public_function_still_works_and_names_its_new_name(old: str, new: str) -> None:
    spec = hyperpod_dpd.default_spec()
    argument = hyperpod_dpd.dump_spec(spec) if old == "spec_from_mapping" else spec
    with pytest.warns(DeprecationWarning, match=f"{old} is renamed {new}"):
        result = getattr(hyperpod_dpd, old)(argument)
    assert result == getattr(hyperpod_dpd, new)(argument)
    assert old in hyperpod_dpd.__all__ and new in hyperpod_dpd.__all__
