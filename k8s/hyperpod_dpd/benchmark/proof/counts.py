"""Whether the servers saw the level the client describes: its prompts' length and its number of requests.

The client sizes each prompt at ``--isl`` tokens with its own tokenizer; the engines count the prompts they
prefilled with the served model's (``vllm:prompt_tokens_total`` over the requests they finished or the router
routed). A chat template adds a few tokens (34 for Llama 3), so the engine's count may exceed ``--isl`` by
:data:`TEMPLATE_TOKENS` and :data:`LENGTH_TOLERANCE` of it; beyond that (another tokenizer in ``--tokenizer-s3``)
the level measured longer prompts than its label ``D(isl,osl)`` says (``prompt-length``). Shorter prompts are
the routing checks' (a prompt the router keeps local is ``not-disaggregated``); one shorter still but clear of
the threshold is not flagged: the test suite's stub counts words, fewer than its clients' word-level tokens.
The counters are the first witness; without them the server's own count as the client recorded it from each
answer's ``usage`` (aiperf's ``usage_prompt_tokens``) is used.

Every request the client got an answer for was routed by the router and finished by an engine, so a server count
below the client's answered requests means the counters missed part of the level (a scrape that lagged the quiet
window, a pod not read): the routing, KV and server throughput figures are then short (``server-count-short``).
:mod:`traffic` flags the other direction, other clients' requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.proof.traffic import counted
from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult
from hyperpod_dpd.load_point import Load

TEMPLATE_TOKENS = 64  # a chat template's own tokens the engine counts beyond --isl (Llama 3's: 34)
LENGTH_TOLERANCE = 0.05  # and 5% of --isl: a prompt sized by another tokenizer is longer by more


def server_prompt_tokens(level: LevelResult, seen: LevelDisaggregation | None) -> tuple[float, str] | None:
    """The server's mean prompt tokens per request and what counted it, or None when nothing did."""
    if seen is not None and seen.prompt_tokens is not None:
        requests = seen.finished_requests or seen.routed
        if requests:
            return seen.prompt_tokens / requests, "the engines' vllm:prompt_tokens_total"
    if level.mean_input_tokens is not None and level.client == Client.AIPERF.value:
        return level.mean_input_tokens, "the server's usage.prompt_tokens in its answers"
    return None


def prompt_length_warnings(levels: Sequence[LevelResult], counters: Mapping[Load, LevelDisaggregation], *,
                           isl: int) -> list[TrustWarning]:
    """``prompt-length`` for every level whose server counted prompts longer than ``--isl`` and a template."""
    found = []
    for level in levels:
        server = server_prompt_tokens(level, counters.get(level.load))
        if server is None or not isl:
            continue
        mean, witness = server
        if mean <= isl * (1 + LENGTH_TOLERANCE) + TEMPLATE_TOKENS:
            continue
        found.append(TrustWarning(code=Trust.PROMPT_LENGTH, load=level.load, message=(
            f"the server counted {mean:,.0f} prompt tokens per request ({witness}), {mean / isl - 1:+.0%} against "
            f"--isl {isl} (a chat template adds at most {TEMPLATE_TOKENS}): the level measured {mean:,.0f}-token "
            f"prompts, not the {level.scenario} it is labelled. The client's tokenizer is not the served model's. "
            "Fix: point --tokenizer-s3 at the model's own files (the default)")))
    return found


def short_count_warnings(levels: Sequence[LevelResult],
                         counters: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    """``server-count-short`` for every level where a server counted fewer requests than the client got answers."""
    found = []
    for level in levels:
        seen = counters.get(level.load)
        answered = len(level.answered)
        if seen is None or not answered:
            continue
        short = {who: count for who, count in counted(seen).items() if count < answered}
        if short:
            servers = " and ".join(f"{who} {count}" for who, count in short.items())
            found.append(TrustWarning(code=Trust.SERVER_COUNT_SHORT, load=level.load, message=(
                f"the servers counted fewer requests than were answered: {servers}, but the client got {answered} "
                "answers. Their counters missed part of the level (they updated after the quiet window, or a pod was "
                "not read), so its routing, KV and server throughput figures are short. Run it again")))
    return found


SIBLING_RATIO = 1.5  # a decoder 1.5x slower per token than its fastest sibling serves another population


def sibling_warnings(levels: Sequence[LevelResult],
                     counters: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    """``pod-outlier`` for every level where one decoder's own time per output token is :data:`SIBLING_RATIO` or more
    times its fastest sibling's: the client's percentiles then mix two populations, and a p50 between them is a
    value no request had (audit B13: pods at 10 and 30 ms, p50 20.2 ms)."""
    found = []
    for level in levels:
        seen = counters.get(level.load)
        pods = dict(seen.pod_tpot_s) if seen is not None else {}
        if len(pods) < 2 or min(pods.values()) <= 0:
            continue
        fastest = min(pods.values())
        slow = {pod: tpot for pod, tpot in pods.items() if tpot >= SIBLING_RATIO * fastest}
        if not slow:
            continue
        each = ", ".join(f"{pod} {tpot * 1e3:.1f} ms" for pod, tpot in pods.items())
        p50 = "-" if level.tpot.p50 is None else f"{level.tpot.p50 * 1e3:.1f} ms"
        found.append(TrustWarning(code=Trust.POD_OUTLIER, load=level.load, message=(
            f"the decoders' own time per output token differs: {each} (vllm:inter_token_latency_seconds), "
            f"{max(slow.values()) / fastest:.1f}x between the slowest and the fastest. The client's TPOT p50 {p50} "
            "mixes their requests, so it may be a value no request had; the level measured a sick pod beside "
            "healthy ones, not the endpoint. Check the slow pod (kubectl describe pod, its GPU) and run again")))
    return found
