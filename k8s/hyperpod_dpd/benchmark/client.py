"""The benchmark clients ``bench`` runs in its pod: one per kind of load."""

from __future__ import annotations

from enum import Enum


class Client(Enum):
    """The benchmark client a scenario runs (its value is its PyPI and command name)."""

    GENAI_BENCH = "genai-bench"  # closed-loop concurrency, the AWS blog's tool
    AIPERF = "aiperf"  # open loop: Poisson arrivals at a request rate (genai-bench 0.0.5 has no such mode)

    @property
    def module(self) -> str:
        """Its Python package, and the stem of its data files (``data/<module>_lock.json`` and
        ``data/<module>_prompt_length.json``)."""
        return self.value.replace("-", "_")
