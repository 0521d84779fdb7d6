"""The traffic a benchmark sends: fixed input and output lengths, closed-loop concurrency levels, and a bound.

Defaults follow the AWS launch blog's measurement of DPD (256 tokens out, concurrency 8, 16 and 32,
one genai-bench run per level), except the input length, which ``bench`` chooses above the spec's
routing threshold (:mod:`hyperpod_dpd.benchmark.route`): the blog's 4,096 sits on the default
threshold. Each level's first :data:`WARMUP_RATIO` of requests is left out of the statistics, and
its users start over :data:`STAGGER_SECONDS` rather than all at once, so equal-length requests do
not move in lock-step waves.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from hyperpod_dpd.benchmark.route import default_isl
from hyperpod_dpd.errors import Problem, raise_if_any
from hyperpod_dpd.spec.routing import DEFAULT_ROUTING_THRESHOLD

DEFAULT_ISL = default_isl(DEFAULT_ROUTING_THRESHOLD)  # 4352: clears the default threshold of 4096
DEFAULT_OSL = 256
DEFAULT_CONCURRENCY = (8, 16, 32)
REQUESTS_PER_USER = 10  # the default bound: ten requests per concurrent user of the highest level
DEFAULT_MAX_SECONDS = 1800
MAX_CONCURRENCY = 1024
WARMUP_RATIO = 0.1  # genai-bench --warmup-ratio: the first 10% of a level's requests are not measured
STAGGER_SECONDS = 5  # users of a level start over about this many seconds (genai-bench --spawn-rate)
P90_SAMPLE = 139  # measured requests for p90 to lie between the 85th and 95th percentile at 95% confidence


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One benchmark's traffic.

    :param isl: input tokens per request (user content, counted with the model's tokenizer). :default: 4352
    :param osl: output tokens per request (``max_tokens`` with ``ignore_eos``). :default: 256
    :param concurrency: closed-loop users per level, one run each. :default: (8, 16, 32)
    :param requests: requests per level. :default: - 10 x the highest concurrency, at least 155
    :param max_seconds: time bound per level, a multiple of 60 (genai-bench counts minutes). :default: 1800
    """

    isl: int = DEFAULT_ISL
    osl: int = DEFAULT_OSL
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    requests: int | None = None
    max_seconds: int = DEFAULT_MAX_SECONDS

    def __post_init__(self) -> None:
        raise_if_any(scenario_problems(self))

    @property
    def requests_per_level(self) -> int:
        """``requests``, or ten per user of the highest level and at least enough for :data:`P90_SAMPLE`."""
        if self.requests is not None:
            return self.requests
        return max(REQUESTS_PER_USER * max(self.concurrency), math.ceil(P90_SAMPLE / (1 - WARMUP_RATIO)))

    def spawn_rate(self, level: int) -> int:
        """Users started per second at ``level``: all of them within :data:`STAGGER_SECONDS`."""
        return max(1, math.ceil(level / STAGGER_SECONDS))

    def level_plan(self) -> str:
        """``LEVEL:SPAWN_RATE`` per level, space-separated, for the pod's loop (one genai-bench run per level)."""
        return " ".join(f"{level}:{self.spawn_rate(level)}" for level in self.concurrency)

    @property
    def max_minutes(self) -> int:
        return self.max_seconds // 60

    @property
    def traffic(self) -> str:
        """genai-bench's deterministic scenario, e.g. ``D(4096,256)``."""
        return f"D({self.isl},{self.osl})"

    @property
    def file_stem(self) -> str:
        """How genai-bench names the scenario in its result files (``/`` and ``,`` to ``_``, no brackets)."""
        return f"D{self.isl}_{self.osl}"

    def genai_bench_args(self) -> list[str]:
        """The load-shape flags of ``genai-bench benchmark`` shared by every level (the pod adds
        ``--num-concurrency`` and ``--spawn-rate`` per level, from :meth:`level_plan`)."""
        return ["--task", "text-to-text", "--traffic-scenario", self.traffic,
                "--max-requests-per-run", str(self.requests_per_level), "--max-time-per-run", str(self.max_minutes),
                "--warmup-ratio", str(WARMUP_RATIO)]


def scenario_problems(s: Scenario) -> Iterator[Problem]:
    for name, value in (("isl", s.isl), ("osl", s.osl)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            yield Problem(field=name, value=value, message="must be a positive number of tokens",
                          fix=f"use e.g. {DEFAULT_ISL if name == 'isl' else DEFAULT_OSL}, the blog's value")
    if s.osl == 1:
        yield Problem(field="osl", value=s.osl, message="must be at least 2: time per output token needs two tokens",
                      fix=f"use e.g. {DEFAULT_OSL}")
    if not s.concurrency:
        yield Problem(field="concurrency", value=list(s.concurrency), message="is empty",
                      fix="give one or more levels, e.g. 8,16,32")
    for level in s.concurrency:
        if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= MAX_CONCURRENCY:
            yield Problem(field="concurrency", value=level, message=f"each level must be 1-{MAX_CONCURRENCY}",
                          fix="give levels such as 8,16,32")
    if len(set(s.concurrency)) != len(s.concurrency):
        yield Problem(field="concurrency", value=list(s.concurrency), message="repeats a level",
                      fix="give each level once")
    if s.requests is not None and (not isinstance(s.requests, int) or s.requests < 1):
        yield Problem(field="requests", value=s.requests, message="must be at least 1", fix="use e.g. 320")
    if s.requests is not None and s.concurrency and isinstance(s.requests, int) and s.requests < max(s.concurrency):
        yield Problem(field="requests", value=s.requests,
                      message=f"is fewer than the highest concurrency {max(s.concurrency)}: some users would send "
                              "nothing", fix=f"use at least {max(s.concurrency)}, or leave it out for "
                      f"{REQUESTS_PER_USER * max(s.concurrency)}")
    if not isinstance(s.max_seconds, int) or s.max_seconds < 60 or s.max_seconds % 60:
        yield Problem(field="max_seconds", value=s.max_seconds,
                      message="must be a whole number of minutes in seconds (genai-bench bounds runs in minutes)",
                      fix="use a multiple of 60, e.g. 600")


def parse_levels(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` as levels; a bad item is a :class:`SpecError` naming it."""
    levels: list[int] = []
    problems: list[Problem] = []
    for item in (part.strip() for part in text.split(",")):
        try:
            levels.append(int(item))
        except ValueError:
            problems.append(Problem(field="concurrency", value=item, message="is not a whole number",
                                    fix="give levels such as 8,16,32"))
    raise_if_any(problems)
    return tuple(levels)


def levels_text(levels: Sequence[int]) -> str:
    return ",".join(str(level) for level in levels)
