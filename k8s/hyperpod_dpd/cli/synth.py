"""``hyperpod-dpd synth [SPEC] [--output-dir DIR]``: write the endpoint's manifests (``-``: standard output)."""

from __future__ import annotations

import argparse

from hyperpod_dpd.cli._argtypes import region
from hyperpod_dpd.cli._common import (
    add_output_dir_argument,
    add_spec_argument,
    emit_documents,
    load_spec_argument,
    print_warnings,
    source_name,
)
from hyperpod_dpd.errors import SpecError, UsageError

DEFAULT_OUT = "dist/manifests"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "synth", help="write the InferenceEndpointConfig manifest of a spec",
        description="Render a spec's InferenceEndpointConfig (pdSpec) without CDK, for kubectl or GitOps. "
                    "`cdk synth` writes the same manifests to cdk.out/manifests/.",
        epilog="examples:\n  hyperpod-dpd synth my-spec.yaml\n"
               "  hyperpod-dpd synth my-spec.yaml -o - | kubectl apply --dry-run=client -f -",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    add_output_dir_argument(parser, default=DEFAULT_OUT, what="the manifests", deprecated=("--out",))
    parser.add_argument("--region", type=region, help="the model bucket's region, when the spec leaves it out")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    checked = load_spec_argument(args.spec)
    from hyperpod_dpd.advisor.capacity import resolve  # noqa: PLC0415 - AIConfigurator only for SLO scaling
    from hyperpod_dpd.charts.render import synth_documents  # noqa: PLC0415 - loads jsii only when needed

    try:
        resolved = resolve(checked.spec)  # one replica's capacity at the SLO, pinned before rendering
        documents, warnings = synth_documents([checked if resolved is checked.spec else resolved], region=args.region)
    except SpecError as err:
        raise UsageError(str(SpecError(err.problems, source=source_name(args.spec)))) from None
    print_warnings(warnings)
    for path in emit_documents(documents, args.output_dir):
        print(path)
    return 0
