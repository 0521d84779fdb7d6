"""What the subcommands share: loading the spec argument and turning errors into messages."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from hyperpod_dpd.errors import SpecError, Warning
from hyperpod_dpd.spec import DpdSpec, S3Source
from hyperpod_dpd.validation import CheckedSpec, check, load_checked_spec


class UserFacingError(Exception):
    """An error whose message is the whole story: printed as-is, exit status 2."""


def read_spec(path: str | None) -> DpdSpec:
    """The spec at ``path``, or the embedded default, after every check (:func:`read_checked_spec`)."""
    return read_checked_spec(path).spec


def read_checked_spec(path: str | None) -> CheckedSpec:
    """Read and check in one pass, so wrong types and broken rules are reported together.

    Every command reads its spec here, and the CDK app through the same
    :func:`load_checked_spec`, so one file gets the same problems from each of them.
    """
    from hyperpod_dpd.defaults import default_spec  # noqa: PLC0415 - keeps --help fast

    try:
        if path is None:
            return check(default_spec(), source="the embedded default spec")
        return load_checked_spec(path)
    except SpecError as err:
        raise UserFacingError(str(err)) from None


def print_warnings(warnings: Iterable[Warning]) -> None:
    for warning in warnings:
        print(f"warning: {warning.render()}", file=sys.stderr)


def add_aws_arguments(parser: argparse.ArgumentParser) -> None:
    """``--region`` and ``--profile``, the same for every command that calls AWS."""
    parser.add_argument("--region", help="AWS region (default: the profile's or AWS_REGION, else the "
                                         "model bucket's region from the spec)")
    parser.add_argument("--profile", help="AWS named profile (default: the default credential chain)")


def bucket_region(spec: DpdSpec) -> str | None:
    """The spec's S3 bucket region, the last fallback for the AWS region."""
    source = spec.model.source
    return source.region if isinstance(source, S3Source) else None


def add_spec_argument(parser: object) -> None:
    parser.add_argument("spec", nargs="?", metavar="SPEC",  # type: ignore[attr-defined]
                        help="a spec file (YAML or JSON); default: the embedded Llama 3.3 70B example")
