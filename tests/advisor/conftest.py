"""Shared, session-cached advisor results: AIConfigurator loads its database once per test session."""

from __future__ import annotations

import pytest

from hyperpod_dpd.advisor import Advice, Traffic, advise
from hyperpod_dpd.defaults import default_spec

# The AWS blog's benchmark: genai-bench, 4,096 input and 256 output tokens, concurrency 8, 16 and 32.
BLOG_TRAFFIC = Traffic(isl=4096, osl=256, concurrency=(8, 16, 32))


@pytest.fixture(scope="session")
def blog_advice() -> Advice:
    """The default spec against one aggregated node, as the blog compared them."""
    return advise(default_spec(), BLOG_TRAFFIC, baseline_nodes=1)


@pytest.fixture(scope="session")
def equal_cost_advice() -> Advice:
    """The default spec against as many aggregated nodes as it uses (two)."""
    return advise(default_spec(), BLOG_TRAFFIC)
