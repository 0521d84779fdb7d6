"""``hyperpod-dpd observe [SPEC] --out DIR``: the alert rules and Grafana dashboard of a spec, without CDK."""

from __future__ import annotations

import argparse
from pathlib import Path

from hyperpod_dpd.cli._common import UserFacingError, add_spec_argument, print_warnings, read_checked_spec

DEFAULT_OUT = "dist/observability"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "observe", help="write a spec's Prometheus alert rules and Grafana dashboard (for your own Prometheus)")
    add_spec_argument(parser)
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help=f"output folder (default: {DEFAULT_OUT})")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    checked = read_checked_spec(args.spec)
    from hyperpod_dpd.observability.dashboard import MissingExtra  # noqa: PLC0415 - keeps --help fast
    from hyperpod_dpd.observability.writing import write_observability  # noqa: PLC0415

    try:
        written = write_observability([checked.spec], Path(args.out))
    except MissingExtra as err:
        raise UserFacingError(str(err)) from None
    except OSError as err:
        raise UserFacingError(f"cannot write to {args.out}: {err.strerror or err}") from None
    print_warnings(checked.warnings)
    for path in written:
        print(path)
    return 0
