"""A trace as the emulator's steps see it: per step, the arrivals and the tokens each role must process.

Routing is the router's own rule (:func:`hyperpod_dpd.contracts.router.disaggregates` on the prompt's
token count): a prompt at or above ``routing.threshold`` goes through a prefiller, a shorter one straight
to the decoder. Prefix reuse, when the trace has block hashes: a routed prompt's leading blocks already
seen in an earlier request are cache hits (an unbounded cache: LMCache's CPU tier is not modelled as
evicting), so its prefill work is its length less ``hits x block_tokens`` (at least one token).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from hyperpod_dpd.contracts.router import disaggregates
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.traces.model import Trace


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Per-step arrivals of one trace, and its mean request shape.

    :param arrivals: requests arriving in each step.
    :param routed: of which reach a prefiller (the rest prefill on a decoder).
    :param prompt_tokens: prompt tokens reaching the prefillers in each step, cache hits included (what
        ``vllm:prompt_tokens_total`` counts).
    :param prefill_tokens: prompt tokens the prefillers must compute in each step (cache hits removed).
    :param output_tokens: tokens the decoders generate for each step's arrivals.
    :param isl: mean prompt of the routed requests (of all, when none is routed).
    :param prefill_isl: mean prompt tokens a prefiller computes per routed request (``isl`` less hits).
    :param osl: mean output tokens.
    :param routed_share: requests that reach a prefiller.
    :param cached_share: routed prompt tokens served from the prefix cache.
    :param prefill_cv: the coefficient of variation of the routed requests' computed prompt tokens.
    """

    step_s: float
    arrivals: tuple[int, ...]
    routed: tuple[int, ...]
    prompt_tokens: tuple[float, ...]
    prefill_tokens: tuple[float, ...]
    output_tokens: tuple[float, ...]
    isl: int
    prefill_isl: int
    osl: int
    routed_share: float
    cached_share: float
    prefill_cv: float = 0.0


# Steps one emulation may take: a day at 1 s steps, or 17 days at the HPA's 15 s (cost is linear in steps).
MAX_STEPS = 100_000


def _check(trace: Trace, step_s: float) -> None:
    """A trace the steps can hold: arrivals finite, from 0, in order, and not more steps than :data:`MAX_STEPS`."""
    if not trace.requests:
        raise SpecError([Problem(field="trace", value=trace.source, message="has no requests",
                                 fix="give a trace with at least one request")], source="the trace")
    times = [request.at_s for request in trace.requests]
    try:  # the fast path: a NaN fails every comparison, and in order with a finite last every one is finite
        ordered = times[0] >= 0 and math.isfinite(times[-1]) and all(map(operator.le, times, times[1:]))
    except TypeError:  # not a number: the loop below names it
        ordered = False
    last = 0.0
    for index, at in enumerate([] if ordered else times):
        if not (isinstance(at, int | float) and math.isfinite(at) and at >= last):
            raise SpecError([Problem(
                field=f"trace.requests[{index}].at_s", value=at,
                message="must be a finite number of seconds, at least 0 and at least the previous arrival's",
                fix="sort the trace by arrival, measured from its first request")], source="the trace")
        last = at
    steps = math.floor(trace.duration_s / step_s) + 1
    if steps > MAX_STEPS:
        raise SpecError([Problem(field="step_s", value=step_s,
                                 message=f"cuts the trace's {trace.duration_s:g} s into {steps:,} steps, more than "
                                 f"{MAX_STEPS:,}", fix=f"give a step of at least {trace.duration_s / MAX_STEPS:.3g} s"
                                 " or a shorter trace")], source="the emulation")


def workload(trace: Trace, *, threshold: int, step_s: float) -> Workload:
    """Bucket ``trace`` into ``step_s`` steps; an empty, unordered or too long trace is a :class:`SpecError`."""
    _check(trace, step_s)
    steps = math.floor(trace.duration_s / step_s) + 1
    arrivals = [0] * steps
    routed_at = [0] * steps
    prompts = [0.0] * steps
    prefill = [0.0] * steps
    output = [0.0] * steps
    seen: dict[tuple[int, int], int] = {}
    routed = routed_tokens = computed = squares = 0
    block = trace.block_tokens or 0
    for request in trace.requests:
        k = min(steps - 1, int(request.at_s // step_s))
        arrivals[k] += 1
        output[k] += request.output_tokens
        if not disaggregates(request.input_tokens, threshold):
            continue
        hits = 0
        if block:
            node = 0  # the prefix so far, as a node of a trie of every prefix seen: one look-up per block
            for depth, block_hash in enumerate(request.prefix_blocks, start=1):
                child = seen.get((node, block_hash))
                if child is None:
                    child = seen[(node, block_hash)] = len(seen) + 1
                elif hits == depth - 1:
                    hits = depth
                node = child
        work = max(1, request.input_tokens - hits * block)
        prefill[k] += work
        prompts[k] += request.input_tokens
        routed_at[k] += 1
        routed += 1
        routed_tokens += request.input_tokens
        computed += work
        squares += work * work
    count = len(trace.requests)
    isl = round(routed_tokens / routed) if routed else round(sum(r.input_tokens for r in trace.requests) / count)
    mean = computed / routed if routed else 0.0
    cv = math.sqrt(max(0.0, squares / routed - mean * mean)) / mean if routed else 0.0
    return Workload(step_s=step_s, arrivals=tuple(arrivals), routed=tuple(routed_at), prompt_tokens=tuple(prompts),
                    prefill_tokens=tuple(prefill), output_tokens=tuple(output),
                    isl=isl, prefill_isl=round(computed / routed) if routed else isl,
                    osl=max(1, round(sum(r.output_tokens for r in trace.requests) / count)),
                    routed_share=routed / count, cached_share=1 - computed / routed_tokens if routed_tokens else 0.0,
                    prefill_cv=cv)
