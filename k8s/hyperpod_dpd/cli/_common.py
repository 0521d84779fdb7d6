"""What the subcommands share: reading the spec argument, the output folder, warnings, errors as messages."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.cli._argtypes import path, region
from hyperpod_dpd.errors import Problem, SpecError, SpecWarning, UsageError
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.loading import DASH, load_spec_data, parse_spec
from hyperpod_dpd.validation import CheckedSpec, check, check_data

if TYPE_CHECKING:
    from hyperpod_dpd.clients.aws import AwsClients
    from hyperpod_dpd.contracts.stack_outputs import DeployedSource, DeployedStack

DEFAULT_SOURCE = "the embedded default spec"
# "Write files here", the same flag on every command that writes files (``-``: standard output).
OUTPUT_DIR = "--output-dir"

_shown: set[str] = set()


def reset_run() -> None:
    """Start a new run: warnings already shown may be shown again (one ``main()`` call is one run)."""
    _shown.clear()
    _json_printed.clear()


_json_printed: list[bool] = []


def print_json(document: Any) -> None:
    """Print the command's one ``--json`` document; a refusal raised after it then prints no second one."""
    print(json.dumps(document, indent=2))
    _json_printed.append(True)


def json_printed() -> bool:
    """Whether this run already printed its ``--json`` document."""
    return bool(_json_printed)


def source_name(path: str | None) -> str:
    """How a spec argument is named in messages."""
    if path is None:
        return DEFAULT_SOURCE
    return "<stdin>" if path == DASH else path


def load_spec_argument(path: str | None, *, refuse: bool = True) -> CheckedSpec:
    """The spec at ``path`` (``-``: standard input), or the embedded default, after every check.

    Every command reads its spec here, and the CDK app through the same :func:`load_checked_spec`, so
    one file gets the same problems from each of them: wrong types and broken rules together.

    :param refuse: a bad spec is a :class:`UsageError` (printed, exit status 2); ``False`` raises the
        :class:`SpecError` itself, for a command that reports its problems (``validate --json``).
    """
    from hyperpod_dpd.spec.defaults import default_spec  # noqa: PLC0415 - keeps --help fast

    try:
        if path is None:
            return check(default_spec(), source=DEFAULT_SOURCE)
        return check_data(load_spec_data(path), source=source_name(path))
    except SpecError as err:
        if refuse:
            raise UsageError(str(_named(err, path))) from None
        raise _named(err, path) from None


def _named(err: SpecError, path: str | None) -> SpecError:
    return err if path != DASH else SpecError(err.problems, source=source_name(path))


def load_spec_argument_leniently(path: str | None) -> tuple[DpdSpec, tuple[Problem, ...]]:
    """The spec and the problems :func:`load_spec_argument` would refuse, for a command that still reports on it.

    ``plan`` prints the sizing that explains a refused spec before exiting 2 with the same problems;
    a file that does not parse is still an error at once. The file is read once (standard input too).
    """
    if path is None:
        return load_spec_argument(path).spec, ()
    try:
        data = load_spec_data(path)
    except SpecError as err:
        raise UsageError(str(_named(err, path))) from None
    try:
        return check_data(data, source=source_name(path)).spec, ()
    except SpecError as err:
        refused = err
    try:
        spec = parse_spec(data)  # the rules refused it, but it parses: report on it, then refuse
    except SpecError:
        raise UsageError(str(refused)) from None
    return spec, refused.problems


def print_warnings(warnings: Iterable[SpecWarning]) -> None:
    """Each warning once per run, however many steps of the command find it."""
    for warning in warnings:
        warn(warning.render())


def warn(text: str) -> None:
    """``warning: text`` on standard error, unless this run printed it already."""
    if text in _shown:
        return
    _shown.add(text)
    print(f"warning: {text}", file=sys.stderr)


def add_output_dir_argument(parser: Any, *, default: str | None, what: str, deprecated: Sequence[str] = (),
                            dest: str = "output_dir", stdout: bool = True) -> None:
    """``--output-dir DIR`` (``-o``), with the command's former flag names kept as deprecated aliases."""
    shown = f" (default: {default})" if default else ""
    dash = "; - prints them to standard output" if stdout else ""
    parser.add_argument("-o", OUTPUT_DIR, dest=dest, default=default, metavar="DIR", type=path,
                        help=f"write {what} to DIR{shown}{dash}")
    for flag in deprecated:
        parser.add_argument(flag, dest=dest, metavar="DIR", type=path, action=_Deprecated, help=argparse.SUPPRESS)


class _Deprecated(argparse.Action):
    """A former flag name: still works, and says once which name replaces it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        warn(f"{option_string} is deprecated; use {OUTPUT_DIR} (it does the same)")
        setattr(namespace, self.dest, values)


def emit_documents(documents: Mapping[str, str], output_dir: str) -> list[str]:
    """Write YAML files into ``output_dir``, or with ``-`` print them as one multi-document stream.

    Returns the paths written (none for standard output), to be listed for the user.
    """
    if output_dir == DASH:
        sys.stdout.write("---\n".join(text if text.endswith("\n") else text + "\n" for text in documents.values()))
        return []
    out = Path(output_dir)
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in documents.items():
            (out / name).write_text(text, encoding="utf-8")
            written.append(str(out / name))
    except OSError as err:
        raise UsageError(f"cannot write to {output_dir}: {err.strerror or err}") from None
    return written


def add_aws_arguments(parser: argparse.ArgumentParser) -> None:
    """``--region`` and ``--profile``, the same for every command that calls AWS."""
    parser.add_argument("--region", type=region, help="AWS region (default: the profile's or AWS_REGION, else the "
                                         "model bucket's region from the spec)")
    parser.add_argument("--profile", help="AWS named profile (default: the default credential chain)")


def add_spec_argument(parser: object) -> None:
    parser.add_argument("spec", nargs="?", metavar="SPEC", type=path,  # type: ignore[attr-defined]
                        help="a spec file (YAML or JSON; - reads standard input); "
                             "default: the embedded Llama 3.3 70B example")


def add_json_argument(parser: Any, *, shape: str) -> None:
    """``--json``: one JSON object on standard output instead of text; ``shape`` documents its keys."""
    parser.add_argument("--json", action="store_true", help=f"print one JSON object instead of text: {shape}")


def add_deployed_arguments(parser: argparse.ArgumentParser) -> None:
    """``--stack`` and ``--outputs-file``: read what the stack deployed instead of deriving it from the spec."""
    parser.add_argument("--stack", metavar="NAME",
                        help="read the deployed names from this CloudFormation stack's outputs (DescribeStacks, "
                             "in --region or the profile's region); with --outputs-file, which stack of the file")
    parser.add_argument("--outputs-file", metavar="FILE", type=path,
                        help="read them from the JSON `cdk deploy --outputs-file FILE` wrote (works offline)")


def deployed_source(args: argparse.Namespace) -> DeployedSource:
    """``--outputs-file``, ``--stack``, ``--region`` and ``--profile`` as the value that names the deployed stack."""
    from hyperpod_dpd.contracts.stack_outputs import DeployedSource  # noqa: PLC0415

    return DeployedSource(outputs_file=args.outputs_file, stack=args.stack, region=args.region,
                          profile=getattr(args, "profile", None))


def read_deployed(args: argparse.Namespace, clients: Callable[..., AwsClients]) -> DeployedStack | None:
    """The stack named by ``--outputs-file``/``--stack``, or ``None`` when neither was given.

    :param clients: ``clients(region, profile)``, the commands' AWS seam (only called for ``--stack``).
    """
    from hyperpod_dpd.clients.aws import read_stack  # noqa: PLC0415

    return read_stack(deployed_source(args), clients)
