"""``hyperpod-dpd example``: print the embedded default spec with every field spelled out."""

from __future__ import annotations

import argparse

from hyperpod_dpd.defaults import default_spec
from hyperpod_dpd.loading import spec_to_yaml


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("example", help="print the default spec, every field with its value")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print(spec_to_yaml(default_spec()), end="")
    return 0
