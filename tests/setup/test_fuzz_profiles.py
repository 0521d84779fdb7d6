"""The Hypothesis profiles: fast and repeatable by default, HYPERPOD_DPD_FUZZ=deep for a long randomized search."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from support import DEEP_FACTOR, FUZZ_ENV, fuzz_examples, fuzz_profile


def test_both_profiles_are_registered_and_fast_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, deep = settings.get_profile("fast"), settings.get_profile("deep")
    assert (fast.derandomize, fast.database, fast.max_examples) == (True, None, 100)
    assert (deep.derandomize, deep.database, deep.max_examples) == (False, None, 100 * DEEP_FACTOR)
    assert fuzz_profile({}) == fuzz_profile({FUZZ_ENV: ""}) == "fast"
    assert fuzz_profile({FUZZ_ENV: "deep"}) == "deep"
    monkeypatch.setenv(FUZZ_ENV, "deep")
    assert fuzz_examples(60) == 60 * DEEP_FACTOR
    monkeypatch.delenv(FUZZ_ENV)
    assert fuzz_examples(60) == 60


def test_an_unknown_profile_is_a_usage_error_that_names_the_choices() -> None:
    with pytest.raises(pytest.UsageError, match=r"^HYPERPOD_DPD_FUZZ: 'dep' is not a fuzz profile\. Fix: set it to "
                                                r"one of fast, deep, or unset it for fast$"):
        fuzz_profile({FUZZ_ENV: "dep"})


def test_conftest_loaded_the_profile_the_environment_names() -> None:
    """Every fuzz test's settings inherit what the loaded profile says (derandomize, database, deadline)."""
    loaded = settings.get_profile(fuzz_profile(os.environ))
    assert (settings.default.derandomize, settings.default.max_examples) == (loaded.derandomize, loaded.max_examples)
    assert settings().database is None and settings().deadline is None
