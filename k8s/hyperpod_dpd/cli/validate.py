"""``hyperpod-dpd validate SPEC``: check a spec and print every problem."""

from __future__ import annotations

import argparse

from hyperpod_dpd.cli._common import UserFacingError, add_spec_argument, print_warnings, read_spec
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.validation import check


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("validate", help="check a spec and print every problem")
    add_spec_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    spec = read_spec(args.spec)
    try:
        checked = check(spec, source=args.spec)
    except SpecError as err:
        raise UserFacingError(str(err)) from None
    print_warnings(checked.warnings)
    print(f"{args.spec or 'the embedded default spec'}: valid ({len(checked.warnings)} warnings)")
    return 0
