"""The ``hyperpod-dpd`` command line: one module per subcommand, each with ``register(subparsers)``.

Every failure the user can fix is printed as a plain message with exit status 2; nothing reaches the
terminal as a Python, jsii or Node stack trace.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING

from hyperpod_dpd.cli import _common
from hyperpod_dpd.errors import EXIT_INTERNAL, UsageError, internal_error_line

if TYPE_CHECKING:
    from hyperpod_dpd.clients.seams import Seams

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool whose reader left
EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a tool stopped with Ctrl-C
# The subcommands in the order they are used: write a spec, check and size it, render, deploy checks.
# Those with heavier imports (boto3, the Kubernetes client, the advisor) register only when importable.
SUBCOMMANDS = ("example", "schema", "validate", "plan", "advise", "trace", "synth", "observe", "preflight", "verify",
               "bench")
REQUIRED = frozenset({"example", "schema", "validate", "trace", "synth"})
# The subcommands that reach AWS or Kubernetes: each is handed the one Seams value of the run (clients/seams.py).
LIVE = frozenset({"preflight", "verify", "bench"})
EXIT_CODES = """exit status (every command):
  0  done; every check passed (warnings do not fail)
  1  something was checked and is not right: a preflight or verify check failed or could not
     run (verify reports a missing kubeconfig or AWS credentials this way), an SLA was missed
     (advise), a benchmark cannot be trusted (bench)
  2  the command could not run as asked: a bad spec, option or file; no AWS credentials
     (preflight) or kubeconfig (bench); an optional extra that is not installed
  70  an internal error, a bug in hyperpod-dpd: one line names the place in the code and
      where to report it
  130  interrupted (Ctrl-C): stopped with one line, not a traceback
  141  the reader of standard output went away (`| head`): stopped quietly, as git does"""


def _subcommand_modules() -> list[object]:
    found: list[object] = []
    for name in SUBCOMMANDS:
        try:
            module = __import__(f"hyperpod_dpd.cli.{name}", fromlist=["register"])
        except ModuleNotFoundError as err:
            if name in REQUIRED or err.name != f"hyperpod_dpd.cli.{name}":
                raise
            continue
        found.append(module)
    return found


def version() -> str:
    try:
        return metadata.version("hyperpod-dpd")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hyperpod-dpd",
        description="Typed Disaggregated Prefill and Decode endpoints for SageMaker HyperPod: write a spec, "
                    "check and size it, render its manifests, check the account before a deploy and the "
                    "endpoint after.",
        epilog="start with:\n  hyperpod-dpd example > my-spec.yaml\n  hyperpod-dpd validate my-spec.yaml\n\n"
               f"{EXIT_CODES}\n\n`hyperpod-dpd COMMAND --help` describes each command; docs/commands.md has them all.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"hyperpod-dpd {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _subcommand_modules():
        module.register(subparsers)  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None, *, seams: Seams | None = None) -> int:
    """Run one command line and return its exit status.

    :param seams: the live systems (AWS, the cluster, the clock, the advisor, the planner) for the command to use
        instead of the real ones; the commands in ``LIVE`` take them. :default: - the real ones
    """
    parser = build_parser()
    unknown = _unknown_command(parser, sys.argv[1:] if argv is None else argv)
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `hyperpod-dpd` shows the help, as kubectl and helm do
        parser.print_help()
        return 0
    _common.reset_run()
    try:
        code: int = args.handler(args, seams=_live(seams)) if args.command in LIVE else args.handler(args)
        sys.stdout.flush()  # inside the try: a reader that left (`| head`) is noticed here, not at exit
    except UsageError as err:
        print(f"hyperpod-dpd: {err}", file=sys.stderr)
        _refusal_json(args, str(err), EXIT_USAGE)
        return EXIT_USAGE
    except BrokenPipeError:
        return _reader_left()
    except KeyboardInterrupt:  # a long wait (verify, bench) stopped by the user is no bug
        print("hyperpod-dpd: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # any exception no check turned into a problem is a bug
        print(f"hyperpod-dpd: {internal_error_line(err)}", file=sys.stderr)
        _refusal_json(args, internal_error_line(err), EXIT_INTERNAL)
        return EXIT_INTERNAL
    return code


def _unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """``unknown command 'valdate'; did you mean 'validate'?`` (git's and kubectl's answer to a typo), or ``None``.

    The first word that is not an option is the command: the top level takes no other positional argument.
    """
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None or any(a in ("-h", "--help", "--version") for a in argv[:list(argv).index(word)]):
        return None
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    known = list(subparsers.choices)
    if word in known:
        return None
    close = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}?" if close else f"the commands: {', '.join(known)}"
    return (f"hyperpod-dpd: unknown command {word!r}; {hint}\n"
            "Fix: run `hyperpod-dpd --help` to list the commands")


def _refusal_json(args: argparse.Namespace, message: str, status: int) -> None:
    """With ``--json``, a refusal is a JSON object on standard output too: a script reading it gets a document."""
    if getattr(args, "json", False) and not _common.json_printed():  # a plan with problems already printed its one
        print(json.dumps({"command": args.command, "error": message, "exit_status": status}, indent=2))


def _live(seams: Seams | None) -> Seams:
    from hyperpod_dpd.clients.seams import REAL  # noqa: PLC0415 - boto3: loaded by the commands that use it

    return seams or REAL


def _reader_left() -> int:
    """Stop quietly when the reader of standard output went away, as a shell tool stopped by SIGPIPE does.

    Python's own advice (the ``signal`` module's docs, "Note on SIGPIPE"): point standard output at
    /dev/null so the interpreter's last flush cannot raise again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE
