"""The traffic a benchmark sends: fixed input and output lengths, load levels, and a bound.

Defaults follow the AWS launch blog's measurement of DPD (256 tokens out, concurrency 8, 16 and 32,
one genai-bench run per level), except the input length, which ``bench`` chooses above the spec's
routing threshold (:mod:`hyperpod_dpd.benchmark.run.route`): the blog's 4,096 sits on the default
threshold. Each level's first :data:`WARMUP_RATIO` of requests is left out of the statistics, and
its users start over :data:`STAGGER_SECONDS` rather than all at once, so equal-length requests do
not move in lock-step waves.

Both kinds of load run NVIDIA's aiperf by default (:mod:`hyperpod_dpd.benchmark.run.client` says why):
one ``aiperf profile`` per level, ``--concurrency`` for closed-loop levels and ``--request-rate``
(Poisson arrivals per second) for open-loop ones, each with a seed of its own (fresh prompts: aiperf
builds its prompts from the seed alone), its warm-up requests sent at the same load and left out,
and, open loop, at least :data:`OPEN_LOOP_SECONDS` of arrivals per rate so the queue reaches its
steady state. genai-bench, the blog's client, runs closed-loop levels when asked for
(``client=Client.GENAI_BENCH``). ``prefix_share`` makes that fraction of every prompt one shared
prefix (aiperf's prefix pool of one), the RAG and agent traffic a prefix cache serves.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from hyperpod_dpd.benchmark.run.client import DEFAULT_CLIENT, Client
from hyperpod_dpd.benchmark.run.route import default_isl
from hyperpod_dpd.errors import Problem, raise_if_any
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.routing import DEFAULT_ROUTING_THRESHOLD

T = TypeVar("T")

DEFAULT_ISL = default_isl(DEFAULT_ROUTING_THRESHOLD)  # 4352: clears the default threshold of 4096
DEFAULT_OSL = 256
DEFAULT_CONCURRENCY = (8, 16, 32)
REQUESTS_PER_USER = 10  # the default bound: ten requests per concurrent user of the highest level
DEFAULT_MAX_SECONDS = 1800
DEFAULT_POLL = 15  # seconds between bench's polls of a running Job (the pod's quiet windows last two)
MAX_CONCURRENCY = 1024
GRACE_SECONDS = 60  # aiperf --benchmark-grace-period: requests in flight at the bound may still finish
WARMUP_RATIO = 0.1  # genai-bench --warmup-ratio: the first 10% of a level's requests are not measured
STAGGER_SECONDS = 5  # users of a level start over about this many seconds (genai-bench --spawn-rate)
P90_SAMPLE = 139  # measured requests for p90 to lie between the 85th and 95th percentile at 95% confidence
OPEN_LOOP_SECONDS = 120  # arrivals per rate, by default: long enough for a queue to settle
SEEDS_PER_RUN = 1024  # aiperf --random-seed values per run, one per level (a run has far fewer levels)
MIN_REQUEST_RATE, MAX_REQUEST_RATE = 0.01, 1000.0


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One benchmark's traffic.

    :param isl: input tokens per request (user content, counted with the model's tokenizer). :default: 4352
    :param osl: output tokens per request (``max_tokens`` with ``ignore_eos``). :default: 256
    :param concurrency: closed-loop users per level, one genai-bench run each. :default: (8, 16, 32)
    :param request_rates: open-loop Poisson arrivals per second per level, one aiperf run each, instead
        of ``concurrency``. :default: () - closed loop
    :param requests: requests per level. :default: - 10 x the highest concurrency, or
        :data:`OPEN_LOOP_SECONDS` of arrivals at each rate; at least 155 either way
    :param max_seconds: time bound per level, a multiple of 60 (genai-bench counts minutes). :default: 1800
    :param client: the client the pod runs; genai-bench sends closed-loop levels only. :default: aiperf
    :param prefix_share: the fraction of each prompt's ``isl`` tokens that is one prefix shared by every
        prompt of a level (aiperf only). :default: 0 - no shared prefix
    """

    isl: int = DEFAULT_ISL
    osl: int = DEFAULT_OSL
    concurrency: tuple[int, ...] = DEFAULT_CONCURRENCY
    request_rates: tuple[float, ...] = ()
    requests: int | None = None
    max_seconds: int = DEFAULT_MAX_SECONDS
    client: Client = DEFAULT_CLIENT
    prefix_share: float = 0.0

    def __post_init__(self) -> None:
        if self.request_rates and self.concurrency == DEFAULT_CONCURRENCY:
            object.__setattr__(self, "concurrency", ())  # the default levels give way to the rates asked for
        raise_if_any(scenario_problems(self))

    @property
    def prefix_tokens(self) -> int:
        """Tokens of the shared prefix at the head of each prompt (``prefix_share`` of ``isl``, rounded)."""
        return round(self.prefix_share * self.isl)

    @property
    def loads(self) -> tuple[Load, ...]:
        """The levels in run order."""
        if self.request_rates:
            return tuple(Load(rate=float(rate)) for rate in self.request_rates)
        return tuple(Load(concurrency=level) for level in self.concurrency)

    def levels_dict(self) -> dict[str, list[float] | list[int]]:
        """``{"concurrency": [...]}`` or ``{"request_rate": [...]}``, for JSON documents."""
        if self.request_rates:
            return {"request_rate": [float(rate) for rate in self.request_rates]}
        return {"concurrency": list(self.concurrency)}

    def levels_text(self) -> str:
        """``concurrency 8,16,32`` or ``request rate 1,2,4/s``."""
        if self.request_rates:
            return f"request rate {','.join(f'{rate:g}' for rate in self.request_rates)}/s"
        return f"concurrency {levels_text(self.concurrency)}"

    def requests_at(self, load: Load) -> int:
        """``requests``, else ten per user of the highest concurrency, or :data:`OPEN_LOOP_SECONDS` of
        arrivals at ``load``'s rate; at least enough for :data:`P90_SAMPLE` after the warm-up."""
        if self.requests is not None:
            return self.requests
        floor = math.ceil(P90_SAMPLE / (1 - WARMUP_RATIO))
        if load.rate is not None:
            return max(floor, math.ceil(OPEN_LOOP_SECONDS * load.rate))
        return max(REQUESTS_PER_USER * max(self.concurrency), floor)

    @property
    def requests_per_level(self) -> list[int]:
        """:meth:`requests_at` for each level, in run order."""
        return [self.requests_at(load) for load in self.loads]

    def warmup_at(self, load: Load) -> int:
        """Requests sent before the measured ones at ``load`` (aiperf; genai-bench takes :data:`WARMUP_RATIO`)."""
        return max(1, math.ceil(WARMUP_RATIO * self.requests_at(load)))

    def spawn_rate(self, level: int) -> int:
        """Users started per second at ``level``: all of them within :data:`STAGGER_SECONDS`."""
        return max(1, math.ceil(level / STAGGER_SECONDS))

    def level_plan(self, run_id: str = "") -> str:
        """Space-separated, for the pod's loop: ``LEVEL:SPAWN_RATE`` per genai-bench level, or
        ``LOAD:REQUESTS:WARMUP:SEED`` per aiperf level (a rate or a concurrency), with :func:`arrival_seed` of
        ``run_id`` and the level."""
        if self.client is Client.AIPERF:
            return " ".join(f"{load.value:g}:{self.requests_at(load)}:{self.warmup_at(load)}:{arrival_seed(run_id, i)}"
                            for i, load in enumerate(self.loads))
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
                "--max-requests-per-run", str(self.requests_per_level[0]), "--max-time-per-run",
                str(self.max_minutes), "--warmup-ratio", str(WARMUP_RATIO)]

    def aiperf_args(self) -> list[str]:
        """The load-shape flags of ``aiperf profile`` shared by every level (the pod adds ``--request-rate`` or
        ``--concurrency``, ``--request-count``, ``--warmup-request-count`` and ``--random-seed`` per level, from
        :meth:`level_plan`): fixed lengths, ``ignore_eos`` so every answer is ``osl`` tokens, Poisson arrivals
        (open loop) or warm-up users started over :data:`STAGGER_SECONDS` (closed loop, so equal requests do not
        move in lock-step), and the level's time bound (requests still in flight get :data:`GRACE_SECONDS`).

        A shared prefix is aiperf 0.13's prefix pool of one (``--num-prefix-prompts 1 --prefix-prompt-length P``):
        it joins the prefix's tokens and the body's at the token level, so a prompt is ``P + --isl`` tokens
        (aiperf/dataset/generator/prompt.py, ``PromptGenerator.generate_prompt``; composer/synthetic.py, the
        ``with_prefix`` turn), and ``--isl`` here is the body's ``isl - P``."""
        prefix = self.prefix_tokens
        shape = ["--arrival-pattern", "poisson"] if self.request_rates else [
            "--warmup-concurrency-ramp-duration", str(STAGGER_SECONDS)]
        shared = ["--num-prefix-prompts", "1", "--prefix-prompt-length", str(prefix)] if prefix else []
        return ["--isl", str(self.isl - prefix), "--isl-stddev", "0", *shared, "--osl", str(self.osl),
                "--osl-stddev", "0", "--extra-inputs", "ignore_eos:true", *shape,
                "--benchmark-duration", str(self.max_seconds),
                "--benchmark-grace-period", str(GRACE_SECONDS)]


def arrival_seed(run_id: str, level: int) -> int:
    """aiperf's ``--random-seed`` for the ``level``-th level of run ``run_id``: aiperf 0.13 builds its prompts from
    the seed alone, so one seed for every level would re-send the previous level's prompts (all of them: it makes
    ``--request-count`` distinct ones), timing the endpoint's prefix cache rather than its prefills. The same run
    id and level give the same seed, so a rerun under that id replays it."""
    run = zlib.crc32(run_id.encode()) % (2**31 // SEEDS_PER_RUN)
    return SEEDS_PER_RUN * run + level % SEEDS_PER_RUN


def scenario_problems(s: Scenario) -> Iterator[Problem]:
    for name, value in (("isl", s.isl), ("osl", s.osl)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            yield Problem(field=name, value=value, message="must be a positive number of tokens",
                          fix=f"use e.g. {DEFAULT_ISL if name == 'isl' else DEFAULT_OSL}, the blog's value")
    if s.osl == 1:
        yield Problem(field="osl", value=s.osl, message="must be at least 2: time per output token needs two tokens",
                      fix=f"use e.g. {DEFAULT_OSL}")
    if s.request_rates and s.concurrency:
        yield Problem(field="request_rates", value=list(s.request_rates), message=(
            f"given with concurrency {levels_text(s.concurrency)}: a run is open loop or closed loop"),
            fix="give the rates or the concurrency levels, and run bench twice for both")
    if s.client is Client.GENAI_BENCH and s.request_rates:
        yield Problem(field="client", value=s.client.value, message="has no open-loop mode (genai-bench 0.0.5 sends "
                      "closed-loop users only)", fix="leave --client out (aiperf) for --request-rate")
    if s.client is Client.GENAI_BENCH and s.prefix_share:
        yield Problem(field="prefix_share", value=s.prefix_share, message="needs aiperf's prefix prompts",
                      fix="leave --client out (aiperf) for --prefix-share")
    if not isinstance(s.prefix_share, int | float) or isinstance(s.prefix_share, bool) \
            or not 0 <= s.prefix_share < 1 or not math.isfinite(s.prefix_share):
        yield Problem(field="prefix_share", value=s.prefix_share, message="must be a fraction from 0 up to, not "
                      "including, 1 (the rest of each prompt is its own)", fix="use e.g. 0.5 for half of each prompt")
    elif s.prefix_share and isinstance(s.isl, int) and not 1 <= s.prefix_tokens < s.isl:
        yield Problem(field="prefix_share", value=s.prefix_share, message=(
            f"gives a shared prefix of {s.prefix_tokens} of {s.isl} tokens: at least one token must be shared "
            "and at least one be the prompt's own"), fix="use a share between 1/isl and 1 - 1/isl")
    if not s.concurrency and not s.request_rates:
        yield Problem(field="concurrency", value=list(s.concurrency), message="is empty",
                      fix="give one or more levels, e.g. 8,16,32")
    for rate in s.request_rates:
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not math.isfinite(rate) \
                or not MIN_REQUEST_RATE <= rate <= MAX_REQUEST_RATE:
            yield Problem(field="request_rates", value=rate, message=f"each rate must be {MIN_REQUEST_RATE:g}-"
                          f"{MAX_REQUEST_RATE:g} requests per second", fix="give rates such as 1,2,4")
    if len(set(s.request_rates)) != len(s.request_rates):
        yield Problem(field="request_rates", value=list(s.request_rates), message="repeats a rate",
                      fix="give each rate once")
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


def _parse_list(text: str, convert: Callable[[str], T], *, field: str, what: str, example: str) -> tuple[T, ...]:
    """Comma-separated items of ``text`` as values; a bad item is a :class:`SpecError` naming it."""
    values: list[T] = []
    problems: list[Problem] = []
    for item in (part.strip() for part in text.split(",")):
        try:
            values.append(convert(item))
        except ValueError:
            problems.append(Problem(field=field, value=item, message=f"is not {what}", fix=f"give {example}"))
    raise_if_any(problems)
    return tuple(values)


def parse_levels(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` as concurrency levels."""
    return _parse_list(text, int, field="concurrency", what="a whole number", example="levels such as 8,16,32")


def parse_rates(text: str) -> tuple[float, ...]:
    """``"1,2.5,4"`` as request rates."""
    return _parse_list(text, float, field="request_rate", what="a number of requests per second",
                       example="rates such as 1,2,4")


def levels_text(levels: Sequence[int]) -> str:
    return ",".join(str(level) for level in levels)
