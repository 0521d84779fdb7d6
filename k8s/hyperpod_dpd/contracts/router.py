"""The router's length rule, and how long a prompt must be to clear ``routing.threshold`` safely.

The router compares an *estimate* of the prompt's length with ``routing.threshold`` (``>=``
disaggregates, ``0`` always does). AWS's own log lines bound that estimate: a 12-token prompt
logged ``estimated_tokens=12`` (a token count) and a 27,000-character prompt ``6750`` (characters
/ 4). Which rule applies to a given prompt is undocumented, so a prompt meant to disaggregate must
clear the threshold under both, by :data:`MARGIN`, and one meant to stay direct must stay below it
under both. ``bench`` (genai-bench's ``D(isl, osl)`` and aiperf's synthetic prompts) and ``verify --smoke`` (a repeated
sentence) size their prompts with the same functions here, from lengths measured with the Llama 3
tokenizer (``data/genai_bench_prompt_length.json``, ``data/aiperf_prompt_length.json``,
``data/smoke_sentence_length.json``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

MARGIN = 0.02  # on top of the measured spread: another Llama-family tokenizer, a chat template


def router_estimates(*, tokens: int, characters: int) -> tuple[int, int]:
    """The router's smallest and largest estimate of one prompt: its token count or characters / 4."""
    return min(tokens, characters // 4), max(tokens, math.ceil(characters / 4))


def disaggregates(estimate: float, threshold: float) -> bool:
    """The router's rule: a prompt whose estimate is at or above ``threshold`` goes through the prefiller; a
    threshold of 0 sends every prompt there."""
    return threshold <= 0 or estimate >= threshold


def clears(estimate: int, threshold: int) -> bool:
    """Does an estimate clear ``threshold`` by :data:`MARGIN` (so the router surely disaggregates)?"""
    return threshold <= 0 or disaggregates(estimate, threshold * (1 + MARGIN))


@dataclass(frozen=True, kw_only=True)
class PrefillRule:
    """:func:`disaggregates` bound to a spec's ``routing.threshold``, for a prompt whose length is known in tokens (a
    trace's): the router's estimate of it is its token count (see the module's notes on the estimate)."""

    threshold: int

    def prefills(self, prompt_tokens: int) -> bool:
        return disaggregates(prompt_tokens, self.threshold)


def stays_below(estimate: int, threshold: int) -> bool:
    """Does an estimate stay under ``threshold`` by :data:`MARGIN` (so the router surely does not)?"""
    return threshold > 0 and estimate <= threshold * (1 - MARGIN)


@dataclass(frozen=True, kw_only=True)
class PromptLength:
    """The router's estimate per unit of a prompt (an asked token for genai-bench, a sentence for smoke).

    :param low: the smallest estimate per unit (the lower of token count and characters / 4).
    :param high: the largest.
    :param source: where the numbers come from.
    """

    low: float
    high: float
    source: str

    @classmethod
    def measured(cls, *, units: int, tokens: tuple[int, int], characters: tuple[int, int],
                 source: str) -> PromptLength:
        """From prompts of ``units`` units that measured ``tokens`` and ``characters`` (min, max)."""
        return cls(low=min(tokens[0], characters[0] / 4) / units, high=max(tokens[1], characters[1] / 4) / units,
                   source=source)

    def estimates(self, units: int) -> tuple[int, int]:
        """The router's smallest and largest estimate for a prompt of ``units`` units."""
        return math.floor(units * self.low), math.ceil(units * self.high)

    def units_to_clear(self, threshold: int) -> int:
        """The fewest units whose every estimate clears ``threshold`` by :data:`MARGIN` (0 when it is 0)."""
        if threshold <= 0:
            return 0
        units = math.ceil(threshold * (1 + MARGIN) / self.low)
        while not clears(self.estimates(units)[0], threshold):
            units += 1
        return units

    def most_units_below(self, threshold: int) -> int:
        """The most units whose every estimate stays below ``threshold`` by :data:`MARGIN` (0: none)."""
        if threshold <= 0:
            return 0
        units = max(0, math.floor(threshold * (1 - MARGIN) / self.high))
        while units and not stays_below(self.estimates(units)[1], threshold):
            units -= 1
        return units


def _data(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(resources.files("hyperpod_dpd.data").joinpath(name).read_text(
        encoding="utf-8"))
    return loaded


@cache
def client_length(client: str = "genai_bench") -> PromptLength:
    """Per asked token of a benchmark client's prompt of ``isl`` tokens (40 prompts of 4,096 each), from
    ``data/<client>_prompt_length.json``."""
    data = _data(f"{client}_prompt_length.json")
    tokens, characters = data["retokenized_tokens"], data["characters"]
    return PromptLength.measured(units=int(data["isl"]), tokens=(tokens["min"], tokens["max"]),
                                 characters=(characters["min"], characters["max"]), source=str(data["source"]))


@cache
def sentence_length() -> PromptLength:
    """Per repetition of the smoke gate's sentence (``sentence`` in the data file)."""
    data = _data("smoke_sentence_length.json")
    tokens, characters = int(data["tokens_per_repetition"]), len(str(data["sentence"]))
    return PromptLength.measured(units=1, tokens=(tokens, tokens), characters=(characters, characters),
                                 source=str(data["source"]))


def smoke_sentence() -> str:
    """The sentence :func:`sentence_length` was measured on."""
    return str(_data("smoke_sentence_length.json")["sentence"])
