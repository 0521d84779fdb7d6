"""Each log pattern catches the LMCache line of its failure and ignores the healthy lines around it.

The lines are built from LMCache 0.4.3's format strings (v1/cache_engine.py, pd_backend.py) with a
typical logger prefix.
"""

from __future__ import annotations

import pytest

from hyperpod_dpd.observability.log_patterns import (
    KV_NOT_RETRIEVED,
    KV_TRANSFER_BELOW_1_GBPS,
    LOG_PATTERNS,
    PD_BUFFER_FULL,
    LogPattern,
)

PREFIX = "[2026-11-30 10:00:00,000] LMCache WARNING: "
BUFFER_FULL = PREFIX + "Failed to allocate memory object, retrying..."
RETRIEVED_NONE = PREFIX + ("[req_id=cmpl-1] Retrieved 0 out of 6035 required tokens (from 6035 total tokens). "
                           "size: 0.0000 gb, cost 0.1200 ms, throughput: 0.0000 GB/s;")
RETRIEVED_ALL = PREFIX + ("[req_id=cmpl-2] Retrieved 6035 out of 6035 required tokens (from 6035 total tokens). "
                          "size: 0.2344 gb, cost 1.3300 ms, throughput: 176.2000 GB/s;")
RETRIEVED_EMPTY = PREFIX + ("[req_id=cmpl-3] Retrieved 0 out of 0 required tokens (from 12 total tokens). "
                            "size: 0.0000 gb, cost 0.0100 ms, throughput: 0.0000 GB/s;")
STORED_SLOW = PREFIX + ("[req_id=cmpl-4] Stored 6035 out of total 6035 tokens. size: 0.2344 GB, cost 290.1000 ms, "
                        "throughput: 0.8080 GB/s; offload_time: 2.0000 ms, put_time: 288.1000 ms")
STORED_FAST = PREFIX + ("[req_id=cmpl-5] Stored 6035 out of total 6035 tokens. size: 0.2344 GB, cost 9.1000 ms, "
                        "throughput: 25.7582 GB/s; offload_time: 2.0000 ms, put_time: 7.1000 ms")
STORED_NOTHING = PREFIX + ("[req_id=cmpl-6] Stored 0 out of total 6035 tokens. size: 0.0000 GB, cost 0.1000 ms, "
                           "throughput: 0.0000 GB/s; offload_time: 0.0000 ms, put_time: 0.0000 ms")
ALL_LINES = [BUFFER_FULL, RETRIEVED_NONE, RETRIEVED_ALL, RETRIEVED_EMPTY, STORED_SLOW, STORED_FAST, STORED_NOTHING]


@pytest.mark.parametrize(("pattern", "caught"), [
    (PD_BUFFER_FULL, [BUFFER_FULL]),
    (KV_NOT_RETRIEVED, [RETRIEVED_NONE]),
    (KV_TRANSFER_BELOW_1_GBPS, [STORED_SLOW]),
])
def test_pattern_catches_exactly_its_failure(pattern: LogPattern, caught: list[str]) -> None:
    assert [line for line in ALL_LINES if pattern.matches(line)] == caught


def test_filter_patterns_use_quoted_terms_only() -> None:
    assert KV_NOT_RETRIEVED.filter_pattern == '"Retrieved 0 out of" -"out of 0 required"'
    for pattern in LOG_PATTERNS:
        assert "%" not in pattern.filter_pattern  # no regex: CloudWatch allows only five per log group
        assert len(pattern.filter_pattern) <= 1024
        assert pattern.datapoints <= pattern.periods


def test_names_are_unique() -> None:
    assert len({p.metric_name for p in LOG_PATTERNS}) == len(LOG_PATTERNS)


def test_kv_not_retrieved_does_not_claim_the_hash_mismatch_it_cannot_see() -> None:
    """Audit O3: a lookup miss (hash seed, pd_role) never calls retrieve(), so no 'Retrieved' line is logged;
    the alarm points at the metric alert that does see it."""
    assert "hash_seed" not in KV_NOT_RETRIEVED.fix and "DpdKvNotTransferred" in KV_NOT_RETRIEVED.fix
    assert "lookup hit" in KV_NOT_RETRIEVED.source
