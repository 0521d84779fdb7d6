"""docs/zero-to-endpoint.md answers every finding of the CDK stack audit once (what went wrong, what you see
now), and every finding it marks ``limit`` is stated in docs/limits.md under the same id.

The audit itself is a reference note beside the checkout; when it is there its finding ids are compared
with the ones below, so a finding added to it cannot go unanswered."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "zero-to-endpoint.md").read_text(encoding="utf-8")
LIMITS = (REPO / "docs" / "limits.md").read_text(encoding="utf-8")
AUDIT = REPO.parent / "shared" / "reference" / "audits" / "cdk-stack-audit-3.md"
# The audit's new findings (section b) and the previous review's findings it rechecked (section a).
FINDINGS = [*(f"T{i}" for i in range(1, 15)), *(f"N{i}" for i in range(1, 10))]
STATUSES = {"fixed", "limit"}


def rows() -> list[list[str]]:
    """The cells of the findings table, from its marker comment to the first line that is not a row."""
    lines = DOC[DOC.index("<!-- findings:"):].splitlines()[1:]
    table = []
    for line in lines:
        if not line.startswith("|"):
            break
        table.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return table[2:]  # header and rule


def test_every_finding_is_answered_once_in_order() -> None:
    table = rows()
    assert [row[0] for row in table] == sorted(FINDINGS, key=lambda f: (f[0] != "T", int(f[1:])))
    for row in table:
        assert len(row) == 4, row
        _, then, now, status = row
        assert status in STATUSES, row
        assert then and now and then != now, row


def test_every_limit_is_stated_in_limits_md_and_no_fixed_one_is() -> None:
    for finding, _, _, status in rows():
        stated = f"({finding})" in LIMITS
        assert stated == (status == "limit"), f"{finding} is {status} but limits.md {'has' if stated else 'lacks'} it"


def test_the_audits_finding_ids_are_the_ones_answered() -> None:
    if not AUDIT.exists():
        pytest.skip(f"the audit is read from reference notes beside the checkout ({AUDIT.name} not found)")
    text = AUDIT.read_text(encoding="utf-8")
    new = set(re.findall(r"^\| (T\d+) \|", text, flags=re.MULTILINE))
    rechecked = set(re.findall(r"^\| (N\d+) \|", text, flags=re.MULTILINE))
    assert new | rechecked == set(FINDINGS)
