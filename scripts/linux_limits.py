#!/usr/bin/env python3
"""Re-read the Linux limits ``hyperpod_dpd.contracts.linux`` ships from a kernel's UAPI headers.

``python scripts/linux_limits.py [INCLUDE_DIR]`` (default ``/usr/include``, the headers of
linux-libc-dev) prints each limit as the header defines it and as the package ships it, and exits 1
when one differs. ``MAX_ARG_STRLEN`` is defined as ``PAGE_SIZE * 32``; the page size is the package's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hyperpod_dpd.contracts import linux


def header_limits(include: Path) -> dict[str, int]:
    """``NAME_MAX``, ``PATH_MAX`` and ``MAX_ARG_STRLEN`` as ``linux/limits.h`` and ``linux/binfmts.h`` define them."""
    limits = (include / "linux" / "limits.h").read_text(encoding="utf-8")
    binfmts = (include / "linux" / "binfmts.h").read_text(encoding="utf-8")
    found = {name: int(re.search(rf"#define\s+{name}\s+(\d+)", limits).group(1))  # type: ignore[union-attr]
             for name in ("NAME_MAX", "PATH_MAX")}
    pages = re.search(r"#define\s+MAX_ARG_STRLEN\s+\(PAGE_SIZE\s*\*\s*(\d+)\)", binfmts)
    if pages is None:
        raise SystemExit("linux/binfmts.h no longer defines MAX_ARG_STRLEN as (PAGE_SIZE * N)")
    found["MAX_ARG_STRLEN"] = linux.PAGE_SIZE * int(pages.group(1))
    return found


def main(argv: list[str]) -> int:
    include = Path(argv[0]) if argv else Path("/usr/include")
    differ = 0
    for name, value in header_limits(include).items():
        shipped = getattr(linux, name)
        print(f"{name}: headers {value}, shipped {shipped}")
        differ += value != shipped
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
