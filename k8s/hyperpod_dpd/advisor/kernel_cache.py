"""A disk cache of AIConfigurator's static step times: a repeated ``advise`` skips its kernel look-ups.

Each look-up (one prefill or one decode step of one model on one system at one TP and quantization) costs
about a tenth of a second of AIConfigurator's own Python, and the default comparison makes 33 of them. Their
results depend only on the installed AIConfigurator (its bundled kernel database ships in
``aiconfigurator-core``), so the file is named by both versions and an upgrade starts a new one. The cache
lives in ``$HYPERPOD_DPD_CACHE_DIR`` (``off`` turns it off), else ``$XDG_CACHE_HOME/hyperpod-dpd``, else
``~/.cache/hyperpod-dpd``. A file that cannot be read or written is ignored: the look-up is then made again.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

CACHE_ENV = "HYPERPOD_DPD_CACHE_DIR"
OFF = "off"
# The figures of AIConfigurator's static estimate the advisor reads (steps.StepTimes).
STEP_KEYS = ("context_latency", "tpot")


def cache_dir() -> Path | None:
    """Where the cache lives, or ``None`` when it is turned off."""
    given = os.environ.get(CACHE_ENV)
    if given is not None:
        return None if given.strip().lower() == OFF or not given.strip() else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hyperpod-dpd"


def _versions() -> str:
    found = []
    for package in ("aiconfigurator", "aiconfigurator-core"):
        try:
            found.append(metadata.version(package))
        except metadata.PackageNotFoundError:
            found.append("none")
    return "-".join(found)


class KernelCache:
    """Step-time figures by look-up key, read once from the file and written back on each new entry."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, float]] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                self.entries = {key: {k: float(v) for k, v in value.items() if isinstance(v, int | float)}
                                for key, value in loaded.items() if isinstance(value, dict)}

    def get(self, key: str) -> dict[str, float] | None:
        return self.entries.get(key)

    def put(self, key: str, figures: Mapping[str, float]) -> None:
        self.entries[key] = dict(figures)
        # Written whole to a temporary file and renamed: a reader never sees half a file.
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".aic-", suffix=".json")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(self.entries, out, sort_keys=True)
            os.replace(temporary, self.path)


_OPEN: dict[Path, KernelCache] = {}


def shared() -> KernelCache | None:
    """The process's cache for the installed AIConfigurator, or ``None`` when turned off."""
    where = cache_dir()
    if where is None:
        return None
    path = where / f"aic-steps-{_versions()}.json"
    if path not in _OPEN:
        _OPEN[path] = KernelCache(path)
    return _OPEN[path]


def key(*parts: object, **options: object) -> str:
    """One look-up's key: its target and TP (``parts``) and AIConfigurator's options, in a stable order."""
    return json.dumps([[str(p) for p in parts], sorted((k, str(v)) for k, v in options.items())])
