"""The report: aligned plain-text columns, JSON, and the exit status."""

from __future__ import annotations

import json

from hyperpod_dpd.clients.checks import Check, Status, exit_status
from hyperpod_dpd.ops.table import render_json, render_table
from hyperpod_dpd.spec.units import format_bytes

ROWS = [Check("spec", Status.PASS, "valid (0 warnings)"),
        Check("model weights", Status.FAIL, "missing config.json\nfound: tokenizer.json"),
        Check("availability zone", Status.SKIP, "no AZ given")]


def test_table_aligns_columns_and_continues_multi_line_details() -> None:
    assert render_table(ROWS).splitlines() == [
        "CHECK              STATUS  DETAIL",
        "spec               PASS    valid (0 warnings)",
        "model weights      FAIL    missing config.json",
        "                           found: tokenizer.json",
        "availability zone  SKIP    no AZ given",
    ]


def test_json_report_carries_every_row_and_the_context() -> None:
    report = json.loads(render_json(ROWS, region="us-west-2"))
    assert report["region"] == "us-west-2"
    assert report["checks"][1] == {"check": "model weights", "status": "FAIL",
                                   "detail": "missing config.json\nfound: tokenizer.json"}


def test_exit_status_is_1_for_a_failure_or_an_error_only() -> None:
    assert exit_status([ROWS[0], ROWS[2]]) == 0
    assert exit_status(ROWS) == 1
    assert exit_status([Check("quota", Status.ERROR, "access denied")]) == 1


def test_byte_sizes_read_like_a_human_wrote_them() -> None:
    assert [format_bytes(n) for n in (512, 3072, 141_733_920_768, 2**41)] == [
        "512 B", "3.0 KiB", "132.0 GiB", "2.0 TiB"]
