"""Measure how long genai-bench's ``D(isl, osl)`` prompts really are, for ``hyperpod_dpd/data``.

genai-bench samples sonnet lines tokenized one by one and joins them without separators, so the
prompt it sends is not ``isl`` tokens when tokenized again, and the router may count characters / 4
instead. This prints the JSON that ``hyperpod_dpd.benchmark.route`` reads:

    python scripts/genai_bench_prompt_length.py TOKENIZER_DIR [--isl 4096] [--samples 40] \
        > k8s/hyperpod_dpd/data/genai_bench_prompt_length.json

TOKENIZER_DIR holds the model's ``tokenizer.json`` and ``tokenizer_config.json`` (needs the bench extra).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from importlib import metadata
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tokenizer", type=Path)
    parser.add_argument("--isl", type=int, default=4096)
    parser.add_argument("--osl", type=int, default=256)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--source", default="", help="where the tokenizer came from, for the provenance note")
    args = parser.parse_args()
    from genai_bench.data.config import DatasetConfig  # noqa: PLC0415 - heavy, and patches threading
    from genai_bench.sampling.text import TextSampler  # noqa: PLC0415
    from genai_bench.scenarios.base import Scenario  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer))
    sonnet = Path(DatasetConfig.from_cli_args().source.path).read_text(encoding="utf-8").splitlines()
    sampler = TextSampler(tokenizer=tokenizer, model="m", output_modality="text", data=sonnet,
                          additional_request_params={})
    scenario = Scenario.from_string(f"D({args.isl},{args.osl})")
    prompts = [sampler.sample(scenario).prompt for _ in range(args.samples)]
    tokens = [len(tokenizer.encode(p, add_special_tokens=False)) for p in prompts]
    chars = [len(p) for p in prompts]
    version = metadata.version("genai-bench")
    json.dump({
        "source": (f"genai-bench {version} TextSampler, traffic scenario D({args.isl},{args.osl}), {args.samples} "
                   f"prompts, re-tokenized with {args.source or args.tokenizer.name} (vocabulary "
                   f"{len(tokenizer)}). Re-derive with scripts/genai_bench_prompt_length.py TOKENIZER_DIR."),
        "genai_bench": version, "isl": args.isl, "samples": args.samples,
        "retokenized_tokens": {"min": min(tokens), "median": int(statistics.median(tokens)), "max": max(tokens)},
        "characters": {"min": min(chars), "median": int(statistics.median(chars)), "max": max(chars)},
    }, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
