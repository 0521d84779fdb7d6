"""Synthetic traces for tests and demos, the same for the same seed: steady, diurnal, bursty and shared-prefix traffic.

- ``poisson``: exponential gaps at ``rate_per_s``.
- ``diurnal``: a non-homogeneous Poisson process by thinning (Lewis and Shedler): candidates at the peak rate, each
  kept with probability rate(t) / peak. rate(t) = mean * (1 + a cos(2 pi (t - peak_at_s) / period_s)) with
  a = (r - 1) / (r + 1), so the peak over the trough is r = ``peak_to_trough`` and the mean over a period is
  ``rate_per_s``.
- ``bursty``: a renewal process with gamma gaps of mean 1 / rate and coefficient of variation ``burst_cv`` > 1
  (shape k = 1 / cv^2, scale = 1 / (rate k)): clusters of near-simultaneous arrivals between long lulls, at the
  same mean rate. Gamma gaps, not a Markov-modulated process, because one number (the CV) sets the burstiness.
- ``shared-prefix``: Poisson arrivals whose prompts share prefixes (see :class:`PrefixGroups`).

Every kind takes ``prefix`` (prompt prefixes shared within groups) and the two length distributions.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.traces.model import Trace, TraceRequest
from hyperpod_dpd.traces.mooncake import BLOCK_TOKENS
from hyperpod_dpd.traces.reading import MAX_SPAN_S
from hyperpod_dpd.traces.rows import MAX_TOKENS


class ArrivalKind(Enum):
    """How requests arrive; the value is the CLI's ``KIND``."""

    POISSON = "poisson"
    DIURNAL = "diurnal"
    BURSTY = "bursty"
    SHARED_PREFIX = "shared-prefix"


MAX_GROUPS = 100_000  # a group's shared hash ids are held for the whole trace
MAX_BLOCKS = 20_000_000  # hash ids in one trace (~1 GB): more is a typo in a rate, a length or a count


class LengthShape(Enum):
    FIXED = "fixed"
    LOGNORMAL = "lognormal"


@dataclass(frozen=True, kw_only=True)
class Lengths:
    """A distribution of token counts.

    :param mean: the mean in tokens (at least 1).
    :param shape: ``fixed`` (every request ``mean``) or ``lognormal`` with that mean. :default: LengthShape.FIXED
    :param sigma: the lognormal's shape (the standard deviation of the log); 1.0 gives a long right tail as public
        traces show. :default: 1.0
    :param cap: the longest allowed (a model's context); longer draws are cut to it. :default: None - no cap
    """

    mean: int
    shape: LengthShape = LengthShape.FIXED
    sigma: float = 1.0
    cap: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.mean <= MAX_TOKENS or (self.cap is not None and self.cap > MAX_TOKENS):
            raise UsageError(f"lengths: a mean (and a cap) of 1 to {MAX_TOKENS:,} tokens is needed (got mean "
                             f"{self.mean}, cap {self.cap}); no model reads a longer prompt")
        if not (math.isfinite(self.sigma) and 0 < self.sigma <= 4):
            raise UsageError(f"lengths: a mean of at least 1 token and a lognormal sigma in (0, 4] are needed "
                             f"(got mean {self.mean}, sigma {self.sigma}); give e.g. mean 1024, sigma 1.0")
        if self.cap is not None and self.cap < self.mean:
            raise UsageError(f"lengths: the cap {self.cap} is below the mean {self.mean}; raise it or drop it")

    def sampler(self, rng: random.Random) -> Callable[[], int]:
        if self.shape is LengthShape.FIXED:
            return lambda: self.mean
        mu = math.log(self.mean) - self.sigma**2 / 2  # E[lognormal(mu, s)] = exp(mu + s^2 / 2) = mean
        cap = self.cap or min(MAX_TOKENS, 10 * self.mean * math.ceil(math.exp(self.sigma**2)))  # a tail no one serves
        gauss, exp, sigma = rng.gauss, math.exp, self.sigma  # gauss (Box-Muller, a pair per two calls): 2x faster
        return lambda: min(cap, max(1, round(exp(mu + sigma * gauss()))))  # than lognormvariate, the same law


@dataclass(frozen=True, kw_only=True)
class PrefixGroups:
    """Prompts that share a prefix: each request joins one of ``groups`` at random and its prompt starts with that
    group's first ``shared_blocks`` blocks (a system prompt, a document), then blocks of its own.

    Every later request of a group finds its shared blocks already seen, so the prefix reuse share is
    (requests - groups used) x shared / all blocks, for requests of at least ``shared_blocks`` full blocks. Only
    full blocks are shared: a shorter prompt shares its full blocks and its partial last block is its own.

    :param groups: how many prefixes (at least 1). :default: 8
    :param shared_blocks: the blocks of 512 tokens a group's prompts share. :default: 2
    """

    groups: int = 8
    shared_blocks: int = 2

    def __post_init__(self) -> None:
        if not (1 <= self.groups <= MAX_GROUPS and 1 <= self.shared_blocks <= MAX_TOKENS // BLOCK_TOKENS
                and self.groups * self.shared_blocks <= MAX_BLOCKS):
            raise UsageError(f"prefix groups: 1 to {MAX_GROUPS:,} groups of 1 to {MAX_TOKENS // BLOCK_TOKENS:,} shared "
                             f"blocks are needed (got {self.groups} groups of {self.shared_blocks}); give e.g. 8 "
                             "groups of 2 blocks")


DEFAULT_INPUT = Lengths(mean=1024, shape=LengthShape.LOGNORMAL)
DEFAULT_OUTPUT = Lengths(mean=256, shape=LengthShape.LOGNORMAL)
DAY_S = 86_400.0
MAX_REQUESTS = 5_000_000  # ~1 GB of requests: a bigger trace is a typo in the rate or the duration


def generate(kind: ArrivalKind | str, *, rate_per_s: float = 2.0, duration_s: float = 3600.0, seed: int = 0,
             input_tokens: Lengths = DEFAULT_INPUT, output_tokens: Lengths = DEFAULT_OUTPUT,
             prefix: PrefixGroups | None = None, peak_to_trough: float = 3.0, period_s: float = DAY_S,
             peak_at_s: float = DAY_S / 2, burst_cv: float = 3.0) -> Trace:
    """A synthetic trace of ``kind``, the same for the same arguments.

    :param rate_per_s: the mean arrival rate (over a period, for ``diurnal``). :default: 2.0
    :param duration_s: arrivals are drawn in [0, duration_s). :default: 3600.0 (an hour)
    :param seed: the random seed. :default: 0
    :param input_tokens: the prompt lengths. :default: lognormal, mean 1,024
    :param output_tokens: the output lengths. :default: lognormal, mean 256
    :param prefix: shared prompt prefixes. :default: None - none, and no hashes (``shared-prefix``: 8 groups of 2)
    :param peak_to_trough: ``diurnal``: the peak rate over the trough rate (at least 1). :default: 3.0
    :param period_s: ``diurnal``: the period. :default: 86,400 (a day)
    :param peak_at_s: ``diurnal``: when the rate peaks. :default: 43,200 (noon of a trace started at midnight)
    :param burst_cv: ``bursty``: the gaps' coefficient of variation (above 1; Poisson's is 1). :default: 3.0
    :raises UsageError: a parameter out of range, or a trace of over MAX_REQUESTS requests.
    """
    kind = _kind(kind)
    for name, value in (("rate_per_s", rate_per_s), ("duration_s", duration_s), ("period_s", period_s)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{name}: must be a finite number above 0 (got {value:.3g}); give e.g. 2")
    if duration_s > MAX_SPAN_S:  # the reader refuses a longer trace as a unit mix-up
        raise UsageError(f"duration_s: {duration_s:.3g} s is over ten years ({MAX_SPAN_S:.3g} s), longer than any "
                         "trace is read; give e.g. 86400 (a day)")
    if not (math.isfinite(peak_to_trough) and peak_to_trough >= 1):
        raise UsageError(f"peak_to_trough: must be at least 1 (got {peak_to_trough}); give e.g. 3")
    if not (math.isfinite(burst_cv) and 1 < burst_cv <= 20):
        raise UsageError(f"burst_cv: must be above 1 (Poisson's) and at most 20 (got {burst_cv}); give e.g. 3")
    if not math.isfinite(peak_at_s):
        raise UsageError(f"peak_at_s: must be a finite time (got {peak_at_s}); give e.g. 43200")
    expected = rate_per_s * duration_s
    if expected > MAX_REQUESTS:
        raise UsageError(f"{rate_per_s:.3g} requests/s for {duration_s:.3g} s is {expected:.3g} requests, over "
                         f"{MAX_REQUESTS:,}; lower the rate or the duration")
    if kind is ArrivalKind.SHARED_PREFIX and prefix is None:
        prefix = PrefixGroups()
    if prefix and expected * (input_tokens.mean / BLOCK_TOKENS + 1) > MAX_BLOCKS:
        raise UsageError(f"{expected:.3g} requests of {input_tokens.mean:,} tokens hold over {MAX_BLOCKS:,} prefix "
                         "hashes; lower the rate, the duration or the prompt length")
    rng = random.Random(seed)
    if kind is ArrivalKind.DIURNAL:
        times: Iterator[float] = _diurnal(rng, rate_per_s, duration_s, ratio=peak_to_trough, period=period_s,
                                        peak_at=math.fmod(peak_at_s, period_s))  # one period: 1e308 keeps no phase
    elif kind is ArrivalKind.BURSTY:
        times = _gamma(rng, rate_per_s, duration_s, burst_cv)
    else:
        times = _poisson(rng, rate_per_s, duration_s)
    arrivals = list(times)
    if not arrivals:
        raise UsageError(f"{rate_per_s:.3g} requests/s for {duration_s:.3g} s drew no request (the mean is "
                         f"{expected:.3g}); raise the rate or the duration")
    return _trace(arrivals, rng, input_tokens=input_tokens, output_tokens=output_tokens, prefix=prefix,
                  source=_source(kind, rate_per_s, duration_s, seed, prefix))


def at_rate(rate: Callable[[float], float], *, peak: float, duration_s: float, seed: int = 0,
            input_tokens: Lengths = DEFAULT_INPUT, output_tokens: Lengths = DEFAULT_OUTPUT) -> Trace:
    """Poisson arrivals at ``rate(t)`` per second, for a load shape no kind names (a step, a short burst): a
    non-homogeneous Poisson process thinned from ``peak``, which ``rate`` must never exceed.

    :raises UsageError: ``peak`` or ``duration_s`` not a positive finite number, over MAX_REQUESTS requests, or no
        request drawn.
    """
    for name, value in (("peak", peak), ("duration_s", duration_s)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{name}: must be a finite number above 0 (got {value:.3g}); give e.g. 2")
    if peak * duration_s > MAX_REQUESTS:
        raise UsageError(f"{peak:.3g} requests/s for {duration_s:.3g} s may draw over {MAX_REQUESTS:,} requests; "
                         "lower the peak or the duration")
    rng = random.Random(seed)
    arrivals = list(_thinned(rng, rate, peak, duration_s))
    if not arrivals:
        raise UsageError(f"a peak of {peak:.3g} requests/s for {duration_s:.3g} s drew no request; raise the rate "
                         "or the duration")
    return _trace(arrivals, rng, input_tokens=input_tokens, output_tokens=output_tokens, prefix=None,
                  source=f"synthetic trace at a given rate (peak {peak:g} requests/s for {duration_s:g} s, "
                         f"seed {seed})")


def _trace(arrivals: list[float], rng: random.Random, *, input_tokens: Lengths, output_tokens: Lengths,
           prefix: PrefixGroups | None, source: str) -> Trace:
    """The requests at ``arrivals``, the first moved to 0 as in a trace read from a file."""
    first = arrivals[0]
    inp, out = input_tokens.sampler(rng), output_tokens.sampler(rng)
    blocks = _Blocks(rng, prefix) if prefix else None
    requests = []
    for at in arrivals:
        length = inp()
        requests.append(TraceRequest(at_s=at - first, input_tokens=length, output_tokens=out(),
                                     prefix_blocks=blocks.of(length) if blocks else ()))
    return Trace(requests=tuple(requests), source=source, block_tokens=BLOCK_TOKENS if prefix else None)


def _kind(kind: ArrivalKind | str) -> ArrivalKind:
    if isinstance(kind, ArrivalKind):
        return kind
    try:
        return ArrivalKind(kind)
    except ValueError:
        raise UsageError(f"{kind!r} is no kind of synthetic trace; give one of "
                         f"{', '.join(k.value for k in ArrivalKind)}") from None


def _source(kind: ArrivalKind, rate: float, duration: float, seed: int, prefix: PrefixGroups | None) -> str:
    shared = f", {prefix.groups} prefix groups of {prefix.shared_blocks} blocks" if prefix else ""
    return f"synthetic {kind.value} trace ({rate:g} requests/s for {duration:g} s, seed {seed}{shared})"


def _poisson(rng: random.Random, rate: float, duration: float) -> Iterator[float]:
    at = rng.expovariate(rate)
    while at < duration:
        yield at
        at += rng.expovariate(rate)


def _diurnal(rng: random.Random, mean: float, duration: float, *, ratio: float, period: float,
             peak_at: float) -> Iterator[float]:
    amplitude = (ratio - 1) / (ratio + 1)
    omega = 2 * math.pi / period
    yield from _thinned(rng, lambda at: mean * (1 + amplitude * math.cos(omega * (at - peak_at))),
                        mean * (1 + amplitude), duration)


def _thinned(rng: random.Random, rate: Callable[[float], float], peak: float, duration: float) -> Iterator[float]:
    """Arrivals at ``rate(t) <= peak``: Poisson at ``peak``, each kept with probability ``rate(t) / peak``."""
    for at in _poisson(rng, peak, duration):
        if rng.random() * peak <= rate(at):
            yield at


def _gamma(rng: random.Random, rate: float, duration: float, cv: float) -> Iterator[float]:
    shape = 1 / cv**2
    scale = 1 / (rate * shape)
    at = rng.gammavariate(shape, scale)
    while at < duration:
        yield at
        at += rng.gammavariate(shape, scale)


class _Blocks:
    """Hash ids for prompts: a group's shared leading blocks, then ids never used before."""

    def __init__(self, rng: random.Random, prefix: PrefixGroups) -> None:
        self._rng, self._prefix = rng, prefix
        self._shared = [tuple(range(g * prefix.shared_blocks, (g + 1) * prefix.shared_blocks))
                        for g in range(prefix.groups)]
        self._next = prefix.groups * prefix.shared_blocks

    def of(self, tokens: int) -> tuple[int, ...]:
        """Only full blocks are shared: aiperf gives a hash one size (prompt.py:660-669, aiperf==0.13.0), so a
        group's block is never some prompt's partial last block; a partial tail gets an id of its own."""
        count = math.ceil(tokens / BLOCK_TOKENS)
        shared = self._shared[self._rng.randrange(self._prefix.groups)][:tokens // BLOCK_TOKENS]
        own = count - len(shared)
        self._next += own
        return shared + tuple(range(self._next - own, self._next))
