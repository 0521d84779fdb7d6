"""``hyperpod-dpd example``: the embedded default spec, every field with its value or what leaving it unset means."""

from __future__ import annotations

import argparse

from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.example import example_text


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "example", help="print an annotated spec to start from: every field, unset optional ones commented",
        description="Print the embedded Llama 3.3 70B spec with every field: its value, or, commented out, "
                    "what leaving it unset means. The output validates as it is.",
        epilog="example:\n  hyperpod-dpd example > my-spec.yaml\n  hyperpod-dpd schema > dpd-spec.schema.json"
               "\n  hyperpod-dpd validate my-spec.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print(example_text(default_spec()), end="")
    return 0
