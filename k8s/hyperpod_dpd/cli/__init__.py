"""The ``hyperpod-dpd`` command line: one module per subcommand, each with ``register(subparsers)``.

Every failure the user can fix is printed as a plain message with exit status 2; nothing reaches the
terminal as a Python, jsii or Node stack trace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hyperpod_dpd.cli import _common, example, synth, validate

EXIT_USAGE = 2
SUBCOMMANDS = [synth, validate, example]


def _optional_subcommands() -> list[object]:
    """Subcommands with heavier imports (boto3, the Kubernetes client) register only when importable."""
    found: list[object] = []
    for name in ("plan", "preflight", "verify", "advise", "bench", "observe"):
        try:
            module = __import__(f"hyperpod_dpd.cli.{name}", fromlist=["register"])
        except ModuleNotFoundError as err:
            if err.name != f"hyperpod_dpd.cli.{name}":
                raise
            continue
        found.append(module)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperpod-dpd",
        description="Typed Disaggregated Prefill and Decode endpoints for SageMaker HyperPod.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in [*SUBCOMMANDS, *_optional_subcommands()]:
        module.register(subparsers)  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except _common.UserFacingError as err:
        print(f"hyperpod-dpd: {err}", file=sys.stderr)
        return EXIT_USAGE
    return code

