"""``hyperpod-dpd validate SPEC``: check a spec and print every problem."""

from __future__ import annotations

import argparse

from hyperpod_dpd.cli._common import add_spec_argument, print_warnings, read_checked_spec


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("validate", help="check a spec and print every problem")
    add_spec_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    checked = read_checked_spec(args.spec)
    print_warnings(checked.warnings)
    print(f"{args.spec or 'the embedded default spec'}: valid ({len(checked.warnings)} warnings)")
    return 0
