#!/usr/bin/env python3
"""What each install level and optional extra of hyperpod-dpd costs on disk, from the installed packages.

Run inside the project's venv after ``make test`` (``make venv-size``). For the base package and each
extra it follows the requirement closure through the installed distributions' metadata and adds up
their files, so the figures are what ``pip install 'hyperpod-dpd[extra]'`` would put in a fresh venv.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PACKAGE = "hyperpod-dpd"


def closure(roots: list[Requirement]) -> set[str]:
    """Canonical names of every installed distribution the requirements pull in."""
    seen: set[str] = set()
    pending = [(r, frozenset(r.extras)) for r in roots]
    while pending:
        requirement, extras = pending.pop()
        name = canonicalize_name(requirement.name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an environment marker left it out here
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for text in dist.requires or []:
            child = Requirement(text)
            if child.marker is None or any(child.marker.evaluate({**default_environment(), "extra": e})
                                           for e in ("", *extras)):
                pending.append((child, frozenset(child.extras)))
    return {key.split("[")[0] for key in seen}


def size_of(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            total += path.stat().st_size
    return total


def requirements(extra: str | None) -> list[Requirement]:
    own = metadata.distribution(PACKAGE)
    env = {**default_environment(), "extra": extra or ""}
    found = []
    for text in own.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(env):
            found.append(requirement)
    return found


def main() -> int:
    extras = metadata.distribution(PACKAGE).metadata.get_all("Provides-Extra") or []
    base = closure(requirements(None))
    base_size = sum(size_of(n) for n in base)
    print(f"{'install':<32} {'packages':>8} {'MB':>8}")
    print(f"{'base (pip install .)':<32} {len(base):>8} {base_size / 1e6:>8.0f}")
    everything = set(base)
    for extra in extras:
        names = closure(requirements(extra)) | base
        everything |= names
        added = names - base
        print(f"{'+ [' + extra + ']':<32} {len(added):>8} {sum(size_of(n) for n in added) / 1e6:>8.0f}")
    print(f"{'all extras':<32} {len(everything):>8} {sum(size_of(n) for n in everything) / 1e6:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
