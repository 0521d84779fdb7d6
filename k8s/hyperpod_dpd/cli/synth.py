"""``hyperpod-dpd synth [SPEC] --out DIR``: write the endpoint's manifests."""

from __future__ import annotations

import argparse
from pathlib import Path

from hyperpod_dpd.cli._common import UserFacingError, add_spec_argument, print_warnings, read_checked_spec
from hyperpod_dpd.errors import SpecError

DEFAULT_OUT = "dist/manifests"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("synth", help="write the InferenceEndpointConfig manifest of a spec")
    add_spec_argument(parser)
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"output folder (default: {DEFAULT_OUT})")
    parser.add_argument("--region", help="the model bucket's region, when the spec leaves it out")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    checked = read_checked_spec(args.spec)
    from hyperpod_dpd.charts.render import synth_to_directory  # noqa: PLC0415 - loads jsii only when needed

    try:
        written, warnings = synth_to_directory([checked], Path(args.out), region=args.region)
    except SpecError as err:
        source = args.spec or "the embedded default spec"
        raise UserFacingError(str(SpecError(err.problems, source=source))) from None
    except OSError as err:
        raise UserFacingError(f"cannot write to {args.out}: {err.strerror or err}") from None
    print_warnings(warnings)
    for path in written:
        print(path)
    return 0
