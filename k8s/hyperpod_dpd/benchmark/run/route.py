"""Which path the router gives a benchmark's prompts: disaggregated (prefill -> decode) or the decoder alone.

The router's length rule and the margin are :mod:`hyperpod_dpd.contracts.router`'s, shared with
``verify --smoke``. genai-bench's ``D(isl, osl)`` prompt is not ``isl`` tokens: it joins sonnet
lines tokenized one by one, so re-tokenized it is shorter, and its characters / 4 is longer. The
bounds were measured with the Llama 3 tokenizer (128,256 tokens) on 40 genai-bench 0.0.5 prompts of
``D(4096,256)``: 4,004-4,026 tokens, 16,466-16,581 characters (``data/genai_bench_prompt_length.json``).
aiperf decodes its prompt to exactly ``isl`` tokens, but its Shakespeare corpus runs to more
characters per token: 16,706-19,067 characters for 4,096 tokens (``data/aiperf_prompt_length.json``),
so the direct path's longest input is shorter with aiperf than with genai-bench.
"""

from __future__ import annotations

import math
from enum import Enum

from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.contracts.router import MARGIN, PromptLength, clears, client_length
from hyperpod_dpd.errors import Problem

__all__ = ["MARGIN", "ROUND_TO", "PromptLength", "RoutePath", "default_isl", "isl_for_model", "largest_direct_isl",
           "path_problems", "prompt_length", "route_problems"]

ROUND_TO = 256  # default input lengths are a multiple of this, so they read as chosen, not computed


class RoutePath(Enum):
    """The path a benchmark means to measure."""

    DPD = "dpd"  # prompts at or above the threshold: prefiller, KV transfer, decoder
    DIRECT = "direct"  # prompts below it: the decoder alone, as short prompts are served


def prompt_length(client: Client = Client.GENAI_BENCH) -> PromptLength:
    """The router's estimate per asked token of the client's prompt of ``isl`` tokens."""
    return client_length(client.module)


def default_isl(threshold: int, path: RoutePath = RoutePath.DPD, client: Client = Client.GENAI_BENCH) -> int:
    """For DPD, the smallest round input length whose every estimate clears ``threshold`` by
    :data:`MARGIN`; for the direct path, the largest round one that stays below it (or the largest
    that does, under :data:`ROUND_TO`; 0 when none can)."""
    if path is RoutePath.DIRECT:
        limit = largest_direct_isl(threshold, client)
        return limit // ROUND_TO * ROUND_TO or limit
    needed = prompt_length(client).units_to_clear(threshold)
    return max(ROUND_TO, -(-needed // ROUND_TO) * ROUND_TO)


def isl_for_model(*, isl: int, prompt_tokens: float | None, threshold: int) -> int | None:
    """The input length the model's own tokenizer needs to clear ``threshold`` by :data:`MARGIN`.

    The shipped lengths were measured with the Llama 3 tokenizer; the server counts each prompt with
    the model's (``usage.prompt_tokens``, chat template included). Scaled from what it counted for
    ``isl``, rounded up to :data:`ROUND_TO`; None when the counted prompts already clear the threshold
    (or it is 0, or nothing was counted)."""
    target = threshold * (1 + MARGIN)
    if threshold <= 0 or not prompt_tokens or prompt_tokens >= target:
        return None
    return math.ceil(isl * target / prompt_tokens / ROUND_TO) * ROUND_TO


def largest_direct_isl(threshold: int, client: Client = Client.GENAI_BENCH) -> int:
    """The largest input length whose every estimate stays below ``threshold`` by :data:`MARGIN` (0: none)."""
    return prompt_length(client).most_units_below(threshold)


def route_problems(*, isl: int, osl: int, path: RoutePath, threshold: int, max_model_len: int,
                   client: Client = Client.GENAI_BENCH) -> list[Problem]:
    """Why ``isl`` would not measure ``path`` against this threshold, or not fit the model's context."""
    problems = path_problems(isl=isl, path=path, threshold=threshold, client=client)
    if isl + osl > max_model_len:
        problems.append(Problem(field="--isl", value=isl, message=(
            f"plus --osl {osl} is {isl + osl} tokens, above the spec's max_model_len {max_model_len}: vLLM would "
            "answer HTTP 400 to every request"),
            fix=f"keep --isl + --osl at most {max_model_len}, or raise max_model_len in the spec"))
    return problems


def path_problems(*, isl: int, path: RoutePath, threshold: int,
                  client: Client = Client.GENAI_BENCH) -> list[Problem]:
    """Why the router would not send the client's prompts of ``isl`` tokens down ``path`` at this threshold."""
    problems = []
    low, high = prompt_length(client).estimates(isl)
    if path is RoutePath.DPD and not clears(low, threshold):
        problems.append(Problem(
            field="--isl", value=isl, message=(
                f"is too close to or below the routing threshold {threshold}: the router estimates such a prompt at "
                f"{low}-{high} tokens, so some or all requests would skip the prefiller and the numbers would not "
                "be DPD's"),
            fix=f"use --isl {default_isl(threshold, client=client)} or more, or pass --path direct to measure "
                "short prompts"))
    if path is RoutePath.DIRECT:
        limit = largest_direct_isl(threshold, client)
        if threshold == 0:
            problems.append(Problem(field="--path", value=path.value, message=(
                "cannot be measured: routing.threshold is 0, so the router disaggregates every request"),
                fix="drop --path direct"))
        elif isl > limit:
            problems.append(Problem(field="--isl", value=isl, message=(
                f"would reach the routing threshold {threshold} (the router estimates it at {low}-{high} tokens), "
                "so --path direct would measure some disaggregated requests"),
                fix=f"use --isl {limit} or less with --path direct"))
    return problems
