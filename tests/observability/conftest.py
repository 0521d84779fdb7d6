"""Specs the observability tests share: the embedded default, and one with SLOs and overridden thresholds."""

from __future__ import annotations

import dataclasses

import pytest

from hyperpod_dpd import AlertThresholds, DpdSpec, SloSpec
from hyperpod_dpd.spec.defaults import default_spec


@pytest.fixture
def spec() -> DpdSpec:
    return default_spec()


@pytest.fixture
def slo_spec() -> DpdSpec:
    """SLOs on (adds the TTFT and TPOT rules) and two thresholds overridden."""
    return dataclasses.replace(default_spec(), slo=SloSpec(ttft_ms=2000, tpot_ms=50),
                               alerts=AlertThresholds(prefill_queue=5, decode_kv_cache_usage=0.8))
