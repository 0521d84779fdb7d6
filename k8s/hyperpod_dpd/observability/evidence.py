"""The DPD evidence model: per pod and per role, what the counters prove about the disaggregated path.

The alerts, ``verify`` and ``bench`` all judge the same few questions, so a failure class fixed in one is
fixed in the three. Each question is written once, against an :class:`Algebra`: :data:`NUMBERS` evaluates it
over one pod's counter growth (``verify``'s and ``bench``'s readings, ``None`` for a value that is not
there), :class:`PromQL` renders it as the expression an alert evaluates (a vector per ``pod_name``, where a
missing series drops the pod, as ``None`` does). The questions:

- :func:`arrived_share`: of the long prompts' tokens a decoder did not already hold in its own prefix cache,
  the share that arrived from a prefiller (vLLM 0.19.0's ``vllm:prompt_tokens_by_source`` with
  ``source="external_kv_transfer"``) rather than being recomputed. The decoder's own cache hits
  (``local_cache_hit``) are taken out of what it needed, never counted as received.
- :func:`kv_short`: a decoder that served enough long prompts, received less than :data:`MIN_ARRIVED_SHARE`
  of what it needed, and computed more than a partial chunk per long prompt itself.
- :func:`stalled`: a pod (either role) holding running requests and emitting no token.
- :func:`not_disaggregating`: long prompts reach the decoders while the router disaggregates none.
- :func:`served_short`: the servers counted fewer requests than were sent.
- :func:`slow_siblings`: the pods whose latency is far above their siblings'.

A long prompt's token count is a lower bound where only a histogram bucket is known (the alerts: requests
above the bound times the bound), so the share the alerts compute is at least the true one: they fire only
when the truth is surely short.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median
from typing import Generic, Protocol, TypeVar

from hyperpod_dpd.observability.selectors import PIPELINE_POD

# Of what a decoder had to get for its long prompts, at least this much must arrive: a healthy transfer moves
# all but the last, partly filled block (under 1% of a 4,096-token prompt), and the alerts' bucket bound
# understates a long prompt's length, so a tenth missing is failed transfers, not rounding.
MIN_ARRIVED_SHARE = 0.9
# At least this many long prompts on one decoder before its share is judged (one every five minutes in 15).
MIN_LONG_PROMPTS = 3
# A pod this many times slower than the median of its role's pods is sick, not unlucky.
SLOW_FACTOR = 2.0

T = TypeVar("T")
V = TypeVar("V")


class Algebra(Protocol[V]):
    """The operations the model is written in; a missing value propagates as PromQL's empty vector does."""

    def const(self, value: float) -> V: ...

    def add(self, left: V, right: V) -> V: ...

    def sub(self, left: V, right: V) -> V: ...

    def mul(self, left: V, right: V) -> V: ...

    def ratio(self, part: V, whole: V) -> V:
        """``part / whole`` where ``whole`` is above zero; nothing elsewhere."""
        ...

    def lt(self, left: V, right: V) -> V:
        """``left`` where it is below ``right`` (a filter, as PromQL's ``<``)."""
        ...

    def gt(self, left: V, right: V) -> V: ...

    def ge(self, left: V, right: V) -> V: ...

    def eq(self, left: V, right: V) -> V: ...

    def both(self, left: V, right: V) -> V:
        """``left`` where ``right`` is there too (PromQL's ``and``)."""
        ...


Number = float | None


class Numbers:
    """The model over one pod's readings: ``None`` is a value that is not there."""

    def const(self, value: float) -> Number:
        return value

    @staticmethod
    def _two(left: Number, right: Number) -> tuple[float, float] | None:
        return None if left is None or right is None else (left, right)

    def add(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return None if pair is None else pair[0] + pair[1]

    def sub(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return None if pair is None else pair[0] - pair[1]

    def mul(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return None if pair is None else pair[0] * pair[1]

    def ratio(self, part: Number, whole: Number) -> Number:
        pair = self._two(part, whole)
        return None if pair is None or pair[1] <= 0 else pair[0] / pair[1]

    def lt(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return left if pair is not None and pair[0] < pair[1] else None

    def gt(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return left if pair is not None and pair[0] > pair[1] else None

    def ge(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return left if pair is not None and pair[0] >= pair[1] else None

    def eq(self, left: Number, right: Number) -> Number:
        pair = self._two(left, right)
        return left if pair is not None and pair[0] == pair[1] else None

    def both(self, left: Number, right: Number) -> Number:
        return None if right is None else left


NUMBERS = Numbers()


@dataclass(frozen=True)
class PromQL:
    """The model as PromQL over vectors labelled ``on`` (one series per pod, or one for the endpoint: ``()``).

    Vectors of the same labels match one to one; a number is a scalar literal.
    """

    on: tuple[str, ...] = (PIPELINE_POD,)

    def const(self, value: float) -> str:
        return f"{value:g}"

    def _op(self, left: str, op: str, right: str) -> str:
        scalar = is_number(left) or is_number(right)
        matching = "" if scalar else f" on({', '.join(self.on)})"
        return f"({left} {op}{matching} {right})"

    def add(self, left: str, right: str) -> str:
        return self._op(left, "+", right)

    def sub(self, left: str, right: str) -> str:
        return self._op(left, "-", right)

    def mul(self, left: str, right: str) -> str:
        return self._op(left, "*", right)

    def ratio(self, part: str, whole: str) -> str:
        return self._op(part, "/", self.gt(whole, "0"))

    def lt(self, left: str, right: str) -> str:
        return self._op(left, "<", right)

    def gt(self, left: str, right: str) -> str:
        return self._op(left, ">", right)

    def ge(self, left: str, right: str) -> str:
        return self._op(left, ">=", right)

    def eq(self, left: str, right: str) -> str:
        return self._op(left, "==", right)

    def both(self, left: str, right: str) -> str:
        return f"({left} and on({', '.join(self.on)}) {right})"


def is_number(text: str) -> bool:
    """Whether a PromQL operand is a number literal (a scalar)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, kw_only=True)
class DecoderWindow(Generic[T]):
    """One decoder's counter growth over a window (a number each, or the PromQL that computes it).

    :param long_prompts: requests it served whose prompt the router disaggregates.
    :param long_prompt_tokens: their prompt tokens, or a lower bound (requests above a bucket bound x the bound).
    :param external_tokens: prompt tokens that arrived through the KV connector (``external_kv_transfer``).
    :param cache_hit_tokens: prompt tokens its own prefix cache held (``local_cache_hit``).
    :param computed_tokens: prompt tokens it computed itself (``local_compute``).
    :param chunk_tokens: what a healthy transfer may leave to compute per prompt (a partial LMCache chunk).
    """

    long_prompts: T
    long_prompt_tokens: T
    external_tokens: T
    cache_hit_tokens: T
    computed_tokens: T
    chunk_tokens: T


def needed_tokens(a: Algebra[V], w: DecoderWindow[V]) -> V:
    """The long prompts' tokens the decoder did not hold itself: what must arrive from a prefiller."""
    return a.sub(w.long_prompt_tokens, w.cache_hit_tokens)


def arrived_share(a: Algebra[V], w: DecoderWindow[V]) -> V:
    """The share of :func:`needed_tokens` that arrived from a prefiller; nothing when nothing was needed."""
    return a.ratio(w.external_tokens, needed_tokens(a, w))


def kv_short(a: Algebra[V], w: DecoderWindow[V]) -> V:
    """The arrived share, where it is below :data:`MIN_ARRIVED_SHARE` on a decoder that served at least
    :data:`MIN_LONG_PROMPTS` long prompts and computed more than a partial chunk per long prompt itself."""
    short = a.lt(arrived_share(a, w), a.const(MIN_ARRIVED_SHARE))
    enough = a.ge(w.long_prompts, a.const(MIN_LONG_PROMPTS))
    recomputed = a.gt(w.computed_tokens, a.mul(w.long_prompts, w.chunk_tokens))
    return a.both(a.both(short, enough), recomputed)


def stalled(a: Algebra[V], *, fewest_running: V, generated_tokens: V) -> V:
    """A pod that held running requests throughout the window and emitted no token in it: a hung engine.

    A prefill request emits one token (vLLM's ``vllm:generation_tokens``), so the same test holds for both roles.
    """
    return a.both(a.gt(fewest_running, a.const(0)), a.eq(generated_tokens, a.const(0)))


def not_disaggregating(a: Algebra[V], *, long_prompts: V, disaggregated: V) -> V:
    """Long prompts reached the decoders (at least :data:`MIN_LONG_PROMPTS`) while the router disaggregated none."""
    return a.both(a.ge(long_prompts, a.const(MIN_LONG_PROMPTS)), a.eq(disaggregated, a.const(0)))


def served_short(a: Algebra[V], *, sent: V, served: V) -> V:
    """The requests the servers did not count (``sent - served``), where they counted fewer than were sent."""
    return a.gt(a.sub(sent, served), a.const(0))


def slow_siblings(latency_by_pod: Mapping[str, float], *, factor: float = SLOW_FACTOR) -> dict[str, float]:
    """The pods whose latency is more than ``factor`` x the median of all (with two pods: of the faster one),
    with that multiple; none with fewer than two pods."""
    if len(latency_by_pod) < 2:
        return {}
    values = sorted(latency_by_pod.values())
    middle = values[0] if len(values) == 2 else median(values)
    if middle <= 0:
        return {}
    return {pod: value / middle for pod, value in sorted(latency_by_pod.items()) if value > factor * middle}


def bucket_bound_below(tokens: float) -> int:
    """The largest bound of vLLM's 1-2-5 prompt-length buckets (``build_1_2_5_buckets``) at or below ``tokens``
    (1 below that): a request counted above it had a prompt at least that long."""
    bound, exponent = 1, 0
    while True:
        for mantissa in (1, 2, 5):
            candidate = mantissa * 10 ** exponent
            if candidate > tokens:
                return bound
            bound = candidate
        exponent += 1


def judged(value: Number) -> bool:
    """Whether a verdict of :data:`NUMBERS` holds (a value is there)."""
    return value is not None
