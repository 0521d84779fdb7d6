"""What the subcommands share: loading the spec argument and turning errors into messages."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hyperpod_dpd.errors import Problem, SpecError, Warning
from hyperpod_dpd.loading import load_spec
from hyperpod_dpd.spec import DpdSpec, S3Source
from hyperpod_dpd.validation import CheckedSpec, check, load_checked_spec

if TYPE_CHECKING:
    from hyperpod_dpd.deployed import DeployedStack
    from hyperpod_dpd.ops.aws import AwsClients


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


def read_spec_with_problems(path: str | None) -> tuple[DpdSpec, tuple[Problem, ...]]:
    """The spec and the problems :func:`read_checked_spec` would raise, for a command that still reports on it.

    ``plan`` prints the sizing that explains a refused spec before exiting 2 with the same problems;
    a file that does not parse is still an error at once.
    """
    if path is None:
        return read_checked_spec(path).spec, ()
    try:
        return load_checked_spec(path).spec, ()
    except SpecError as err:
        refused = err
    try:
        spec = load_spec(path)  # the rules refused it, but it parses: report on it, then refuse
    except SpecError:
        raise UserFacingError(str(refused)) from None
    return spec, refused.problems


def problems_error(head: str, err: SpecError) -> UserFacingError:
    """``head`` and one ``  - field: ...`` line per problem, as every command prints them."""
    return UserFacingError("\n".join([head, *(f"  - {p.render()}" for p in err.problems)]))


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


def add_deployed_arguments(parser: argparse.ArgumentParser) -> None:
    """``--stack`` and ``--outputs-file``: read what the stack deployed instead of deriving it from the spec."""
    parser.add_argument("--stack", metavar="NAME",
                        help="read the deployed names from this CloudFormation stack's outputs (DescribeStacks, "
                             "in --region or the profile's region); with --outputs-file, which stack of the file")
    parser.add_argument("--outputs-file", metavar="FILE",
                        help="read them from the JSON `cdk deploy --outputs-file FILE` wrote (works offline)")


def read_deployed(args: argparse.Namespace, clients: Callable[..., AwsClients]) -> DeployedStack | None:
    """The stack named by ``--outputs-file``/``--stack``, or ``None`` when neither was given.

    :param clients: ``clients(region, profile)``, the commands' AWS seam (only called for ``--stack``).
    """
    from hyperpod_dpd.deployed import describe_stack, read_outputs_file  # noqa: PLC0415
    from hyperpod_dpd.ops.aws import AwsUnavailable  # noqa: PLC0415

    try:
        if args.outputs_file:
            return read_outputs_file(args.outputs_file, stack=args.stack)
        if args.stack:
            return describe_stack(clients(args.region, getattr(args, "profile", None)), args.stack)
    except SpecError as err:
        raise problems_error("cannot read the deployed stack:", err) from None
    except AwsUnavailable as err:
        raise UserFacingError(f"--stack {args.stack}: {err}") from None
    return None
