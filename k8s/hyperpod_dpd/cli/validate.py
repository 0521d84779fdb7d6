"""``hyperpod-dpd validate SPEC``: check a spec, and the manifest it renders against the operator's CRD."""

from __future__ import annotations

import argparse

from hyperpod_dpd.cli._common import UserFacingError, add_spec_argument, print_warnings, read_checked_spec
from hyperpod_dpd.errors import SpecError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("validate", help="check a spec and print every problem")
    add_spec_argument(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    checked = read_checked_spec(args.spec)
    from hyperpod_dpd.charts.render import check_against_crd  # noqa: PLC0415 - loads jsii only when needed

    try:
        check_against_crd(checked)
    except SpecError as err:
        source = args.spec or "the embedded default spec"
        raise UserFacingError(str(SpecError(err.problems, source=source))) from None
    print_warnings(checked.warnings)
    print(f"{args.spec or 'the embedded default spec'}: valid ({len(checked.warnings)} warnings)")
    return 0
