"""The benchmark clients ``bench`` can run in its pod."""

from __future__ import annotations

from enum import Enum


class Client(Enum):
    """The benchmark client a scenario runs (its value is its PyPI and command name).

    aiperf is the default for both kinds of load: it pre-generates its prompts, reuses pooled
    connections and sends from worker processes, so at 64 streams it added a twelfth of genai-bench's
    TTFT at p50 (``bench/client_overhead.py`` measures the two beside a minimal asyncio client;
    ``docs/bench.md`` has the numbers).
    genai-bench, the AWS blog's client, stays as an option for closed loop only: it blocks inside
    one event loop and adds TTFT as the concurrency grows, and genai-bench 0.0.5 has no open-loop mode.
    """

    AIPERF = "aiperf"  # closed loop (--concurrency) and open loop (Poisson arrivals at a request rate)
    GENAI_BENCH = "genai-bench"  # closed loop only, the AWS blog's tool

    @property
    def module(self) -> str:
        """Its Python package, and the stem of its data files (``data/<module>_lock.json`` and
        ``data/<module>_prompt_length.json``)."""
        return self.value.replace("-", "_")


DEFAULT_CLIENT = Client.AIPERF
