"""Measure how long a benchmark client's prompts of ``isl`` tokens really are, for ``hyperpod_dpd/data``.

The router estimates a prompt's length by its token count or its characters / 4, so ``bench``
needs both for the prompts each client sends. genai-bench samples sonnet lines tokenized one by one
and joins them without separators, so its prompt is not ``isl`` tokens when tokenized again; aiperf
decodes its prompt to exactly ``isl`` tokens, from a Shakespeare corpus with more characters per
token. This prints the JSON that ``hyperpod_dpd.contracts.router`` reads:

    python scripts/prompt_length.py genai-bench TOKENIZER_DIR > k8s/hyperpod_dpd/data/genai_bench_prompt_length.json
    python scripts/prompt_length.py aiperf TOKENIZER_DIR > k8s/hyperpod_dpd/data/aiperf_prompt_length.json

TOKENIZER_DIR holds the model's ``tokenizer.json`` and ``tokenizer_config.json`` (needs the bench extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

ARRIVAL_SEED = 20261201  # the seed the benchmark pod gives aiperf (hyperpod_dpd.benchmark.run.scenario)


Prompts = tuple[list[str], Callable[[str], int]]  # the prompts, and how the model's tokenizer counts a text


def genai_bench_prompts(tokenizer_dir: Path, isl: int, osl: int, samples: int) -> Prompts:
    from genai_bench.data.config import DatasetConfig  # noqa: PLC0415 - heavy, and patches threading
    from genai_bench.sampling.text import TextSampler  # noqa: PLC0415
    from genai_bench.scenarios.base import Scenario  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    sonnet = Path(DatasetConfig.from_cli_args().source.path).read_text(encoding="utf-8").splitlines()
    sampler = TextSampler(tokenizer=tokenizer, model="m", output_modality="text", data=sonnet,
                          additional_request_params={})
    scenario = Scenario.from_string(f"D({isl},{osl})")
    return ([sampler.sample(scenario).prompt for _ in range(samples)],
            lambda text: len(tokenizer.encode(text, add_special_tokens=False)))


def aiperf_prompts(tokenizer_dir: Path, isl: int, osl: int, samples: int) -> Prompts:
    from aiperf.common import random_generator  # noqa: PLC0415
    from aiperf.common.tokenizer import Tokenizer  # noqa: PLC0415
    from aiperf.dataset.generator.prompt import PromptGenerator  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    random_generator.init(ARRIVAL_SEED)
    tokenizer = Tokenizer.from_pretrained(str(tokenizer_dir))
    generator = PromptGenerator(prompts=None, prefix_prompts=None, tokenizer=tokenizer)
    check = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    return ([generator.generate(mean=isl, stddev=0) for _ in range(samples)],
            lambda text: len(check.encode(text, add_special_tokens=False)))


CLIENTS = {"genai-bench": genai_bench_prompts, "aiperf": aiperf_prompts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("client", choices=sorted(CLIENTS))
    parser.add_argument("tokenizer", type=Path)
    parser.add_argument("--isl", type=int, default=4096)
    parser.add_argument("--osl", type=int, default=256)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--source", default="", help="where the tokenizer came from, for the provenance note")
    args = parser.parse_args()
    prompts, count = CLIENTS[args.client](args.tokenizer, args.isl, args.osl, args.samples)
    tokens = [count(p) for p in prompts]
    chars = [len(p) for p in prompts]
    version = metadata.version(args.client)
    json.dump({
        "source": (f"{args.client} {version} prompts of {args.isl} tokens ({args.osl} out), {args.samples} prompts, "
                   f"re-tokenized with {args.source or args.tokenizer.name}. Re-derive with scripts/prompt_length.py "
                   f"{args.client} TOKENIZER_DIR."),
        "client": args.client, "version": version, "isl": args.isl, "samples": args.samples,
        "retokenized_tokens": {"min": min(tokens), "median": int(statistics.median(tokens)), "max": max(tokens)},
        "characters": {"min": min(chars), "median": int(statistics.median(chars)), "max": max(chars)},
    }, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
