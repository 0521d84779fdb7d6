"""``hyperpod-dpd observe [SPEC] [--output-dir DIR]``: the alert rules and Grafana dashboard of a spec, without CDK."""

from __future__ import annotations

import argparse
from pathlib import Path

from hyperpod_dpd.cli._common import (
    add_output_dir_argument,
    add_spec_argument,
    load_spec_argument,
    print_warnings,
)
from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.spec.loading import DASH

DEFAULT_OUT = "dist/observability"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "observe", help="write a spec's Prometheus alert rules and Grafana dashboard (for your own Prometheus)",
        description="Write <namespace>-<name>.rules.yaml (a Prometheus rule file) and <namespace>-<name>."
                    "dashboard.json (Grafana) for a spec. `cdk synth` writes the same to cdk.out/observability/ "
                    "and deploys them to Amazon Managed Prometheus.",
        epilog="example:\n  hyperpod-dpd observe my-spec.yaml -o dist/observability",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    add_output_dir_argument(parser, default=DEFAULT_OUT, what="the rule file and the dashboard",
                            deprecated=("--out",), stdout=False)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.output_dir == DASH:
        raise UsageError("observe writes two files of two formats (YAML rules, a JSON dashboard), which "
                              "do not share one stream. Fix: pass a folder, e.g. --output-dir dist/observability")
    checked = load_spec_argument(args.spec)
    from hyperpod_dpd.observability.dashboard import MissingExtra  # noqa: PLC0415 - keeps --help fast
    from hyperpod_dpd.observability.writing import write_observability  # noqa: PLC0415

    try:
        written = write_observability([checked.spec], Path(args.output_dir))
    except MissingExtra as err:
        raise UsageError(str(err)) from None
    except OSError as err:
        raise UsageError(f"cannot write to {args.output_dir}: {err.strerror or err}") from None
    print_warnings(checked.warnings)
    for path in written:
        print(path)
    return 0
