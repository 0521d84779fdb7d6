"""A trace as the emulator's steps see it: per step, the arrivals and the tokens each role must process.

Routing is the router's own rule (:func:`hyperpod_dpd.contracts.router.disaggregates` on the prompt's
token count): a prompt at or above ``routing.threshold`` goes through a prefiller, a shorter one straight
to the decoder. Prefix reuse, when the trace has block hashes: a routed prompt's leading blocks already
seen in an earlier request are cache hits (an unbounded cache: LMCache's CPU tier is not modelled as
evicting), so its prefill work is its length less ``hits x block_tokens`` (at least one token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hyperpod_dpd.contracts.router import disaggregates
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.traces.model import Trace


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Per-step arrivals of one trace, and its mean request shape.

    :param arrivals: requests arriving in each step.
    :param prefill_tokens: prompt tokens the prefillers must compute in each step (cache hits removed).
    :param output_tokens: tokens the decoders generate for each step's arrivals.
    :param isl: mean prompt of the routed requests (of all, when none is routed).
    :param prefill_isl: mean prompt tokens a prefiller computes per routed request (``isl`` less hits).
    :param osl: mean output tokens.
    :param routed_share: requests that reach a prefiller.
    :param cached_share: routed prompt tokens served from the prefix cache.
    """

    step_s: float
    arrivals: tuple[int, ...]
    prefill_tokens: tuple[float, ...]
    output_tokens: tuple[float, ...]
    isl: int
    prefill_isl: int
    osl: int
    routed_share: float
    cached_share: float


def workload(trace: Trace, *, threshold: int, step_s: float) -> Workload:
    """Bucket ``trace`` into ``step_s`` steps; a trace with no requests is a :class:`SpecError`."""
    if not trace.requests:
        raise SpecError([Problem(field="trace", value=trace.source, message="has no requests",
                                 fix="give a trace with at least one request")], source="the trace")
    steps = math.floor(trace.duration_s / step_s) + 1
    arrivals = [0] * steps
    prefill = [0.0] * steps
    output = [0.0] * steps
    seen: dict[tuple[int, int], int] = {}
    routed = routed_tokens = computed = 0
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
        routed += 1
        routed_tokens += request.input_tokens
        computed += work
    count = len(trace.requests)
    isl = round(routed_tokens / routed) if routed else round(sum(r.input_tokens for r in trace.requests) / count)
    return Workload(step_s=step_s, arrivals=tuple(arrivals), prefill_tokens=tuple(prefill), output_tokens=tuple(output),
                    isl=isl, prefill_isl=round(computed / routed) if routed else isl,
                    osl=max(1, round(sum(r.output_tokens for r in trace.requests) / count)),
                    routed_share=routed / count, cached_share=1 - computed / routed_tokens if routed_tokens else 0.0)
