"""Plain-text and JSON renderings of a list of checks."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hyperpod_dpd.clients.checks import Check

HEADERS = ("CHECK", "STATUS", "DETAIL")


def render_table(checks: Sequence[Check]) -> str:
    """Aligned columns; a multi-line detail continues under the DETAIL column."""
    name_width = max([len(HEADERS[0]), *(len(check.name) for check in checks)])
    status_width = max([len(HEADERS[1]), *(len(check.status.value) for check in checks)])
    indent = " " * (name_width + status_width + 4)
    lines = [f"{HEADERS[0]:<{name_width}}  {HEADERS[1]:<{status_width}}  {HEADERS[2]}"]
    for check in checks:
        first, *rest = check.detail.splitlines() or [""]
        lines.append(f"{check.name:<{name_width}}  {check.status.value:<{status_width}}  {first}".rstrip())
        lines += [f"{indent}{line}".rstrip() for line in rest]
    return "\n".join(lines)


def render_json(checks: Sequence[Check], **extra: object) -> str:
    rows = [{"check": c.name, "status": c.status.value, "detail": c.detail} for c in checks]
    return json.dumps({**extra, "checks": rows}, indent=2)
