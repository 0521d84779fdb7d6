"""Which path the router gives a benchmark's prompts: disaggregated (prefill -> decode) or the decoder alone.

The router compares an *estimate* of the prompt's length with ``routing.threshold`` (``>=``
disaggregates, ``0`` always does). AWS's own log lines bound that estimate: a 12-token prompt
logged ``estimated_tokens=12`` (a token count) and a 27,000-character prompt ``6750`` (characters
/ 4), so a benchmark must clear the threshold under either rule. genai-bench's ``D(isl, osl)``
prompt is not ``isl`` tokens either: it joins sonnet lines tokenized one by one, so re-tokenized
it is shorter, and its characters / 4 is longer. The bounds below were measured with the Llama 3
tokenizer (128,256 tokens) on 40 genai-bench 0.0.5 prompts of ``D(4096,256)``: 4,004-4,026 tokens,
16,466-16,581 characters (see ``data/genai_bench_prompt_length.json`` for the measurement).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources
from typing import Any

from hyperpod_dpd.errors import Problem

MARGIN = 0.02  # on top of the measured spread: another Llama-family tokenizer, a chat template
ROUND_TO = 256  # default input lengths are a multiple of this, so they read as chosen, not computed


class RoutePath(Enum):
    """The path a benchmark means to measure."""

    DPD = "dpd"  # prompts at or above the threshold: prefiller, KV transfer, decoder
    DIRECT = "direct"  # prompts below it: the decoder alone, as short prompts are served


@dataclass(frozen=True, kw_only=True)
class PromptLength:
    """How the router's estimate of a genai-bench prompt relates to the ``isl`` asked for.

    :param low: the smallest estimate per asked token (re-tokenized, token-count rule).
    :param high: the largest (characters / 4 rule).
    :param source: where the numbers come from.
    """

    low: float
    high: float
    source: str

    def estimates(self, isl: int) -> tuple[int, int]:
        """The router's smallest and largest estimate for a ``D(isl, ...)`` prompt."""
        return math.floor(isl * self.low), math.ceil(isl * self.high)


@cache
def prompt_length() -> PromptLength:
    data: dict[str, Any] = json.loads(
        resources.files("hyperpod_dpd.data").joinpath("genai_bench_prompt_length.json").read_text(encoding="utf-8"))
    isl = int(data["isl"])
    tokens, characters = data["retokenized_tokens"], data["characters"]
    return PromptLength(low=min(tokens["min"], characters["min"] / 4) / isl,
                        high=max(tokens["max"], characters["max"] / 4) / isl, source=str(data["source"]))


def default_isl(threshold: int, path: RoutePath = RoutePath.DPD) -> int:
    """For DPD, the smallest round input length whose every estimate clears ``threshold`` by
    :data:`MARGIN`; for the direct path, the largest round one that stays below it (or the largest
    that does, under :data:`ROUND_TO`; 0 when none can)."""
    if path is RoutePath.DIRECT:
        limit = largest_direct_isl(threshold)
        return limit // ROUND_TO * ROUND_TO or limit
    needed = threshold * (1 + MARGIN) / prompt_length().low
    return max(ROUND_TO, math.ceil(needed / ROUND_TO) * ROUND_TO)


def largest_direct_isl(threshold: int) -> int:
    """The largest input length whose every estimate stays below ``threshold`` by :data:`MARGIN` (0: none)."""
    return max(0, math.floor(threshold * (1 - MARGIN) / prompt_length().high))


def route_problems(*, isl: int, osl: int, path: RoutePath, threshold: int, max_model_len: int) -> list[Problem]:
    """Why ``isl`` would not measure ``path`` against this threshold, or not fit the model's context."""
    problems = path_problems(isl=isl, path=path, threshold=threshold)
    if isl + osl > max_model_len:
        problems.append(Problem(field="--isl", value=isl, message=(
            f"plus --osl {osl} is {isl + osl} tokens, above the spec's max_model_len {max_model_len}: vLLM would "
            "answer HTTP 400 to every request"),
            fix=f"keep --isl + --osl at most {max_model_len}, or raise max_model_len in the spec"))
    return problems


def path_problems(*, isl: int, path: RoutePath, threshold: int) -> list[Problem]:
    """Why the router would not send ``D(isl, ...)`` prompts down ``path`` at this threshold."""
    problems = []
    low, high = prompt_length().estimates(isl)
    if path is RoutePath.DPD and threshold > 0 and low < threshold * (1 + MARGIN):
        problems.append(Problem(
            field="--isl", value=isl, message=(
                f"is too close to or below the routing threshold {threshold}: the router estimates such a prompt at "
                f"{low}-{high} tokens, so some or all requests would skip the prefiller and the numbers would not "
                "be DPD's"),
            fix=f"use --isl {default_isl(threshold)} or more, or pass --path direct to measure short prompts"))
    if path is RoutePath.DIRECT:
        limit = largest_direct_isl(threshold)
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
