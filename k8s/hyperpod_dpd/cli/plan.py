"""``hyperpod-dpd plan [SPEC] [--model-config PATH_OR_S3_URI] [--prompt-tokens N] [--trace FILE] [--json]``.

Prints the nodes the stack creates (per role) and what they cost per hour first, then the sizing plan as a
table; with ``--json`` one JSON object on stdout, the cost under ``"cost"``. A plan with
sizing errors is still printed (so the figures explain the errors); the errors then go to stderr
and the exit status is 2, as for every user-fixable failure. ``--trace FILE`` adds the replicas each role
needs over that traffic and the SLO autoscaling it would compile
(:func:`~hyperpod_dpd.advisor.trace_advice.size_trace`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hyperpod_dpd.cli import _common
from hyperpod_dpd.cli._argtypes import path, tokens
from hyperpod_dpd.cli._common import add_spec_argument, load_spec_argument_leniently
from hyperpod_dpd.cli.advise_trace import add_trace_source, load_trace, render_sizing
from hyperpod_dpd.contracts.prices import node_cost, user_price
from hyperpod_dpd.errors import Problem, SpecError, UsageError
from hyperpod_dpd.scaling import CompiledScaling, compile_all
from hyperpod_dpd.scaling.report import describe, to_json
from hyperpod_dpd.scaling.shape import scaled_roles
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.traces import DEFAULT_WINDOW_S

if TYPE_CHECKING:  # the advisor is imported only for a trace
    from hyperpod_dpd.advisor.trace_advice import TraceSizing


def usd(text: str) -> float:
    """``--price-per-node-hour``: a positive number of US dollars."""
    try:
        return user_price(float(text)).usd_per_node_hour
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of US dollars") from None


def add_price_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--price-per-node-hour", type=usd, metavar="USD",
                        help="your rate per node-hour for the cost line; replaces the shipped price table, whose "
                             "figures are labelled SageMaker ml.* rate, or derived from EC2's at the published "
                             "SageMaker ratio")


def _cannot_plan(err: SpecError) -> str:
    return "cannot plan this spec:\n" + "\n".join(f"  - {problem.render()}" for problem in err.problems)


def _compiled_scaling(spec: DpdSpec, traffic: TraceSizing | None = None) -> tuple[dict[str, CompiledScaling],
                                                                                 list[Problem]]:
    """Each SLO-scaled role compiled as synth compiles it (capacities from the advisor when not pinned; a trace's
    sizing has compiled them already)."""
    if not scaled_roles(spec):
        return {}, []
    if traffic is not None:
        return {role: traffic.needs[role].compiled for role in scaled_roles(spec)}, []
    from hyperpod_dpd.advisor.capacity import capacities  # noqa: PLC0415 - the advisor only for SLO scaling

    try:
        return compile_all(spec, capacities=capacities(spec)), []
    except SpecError as err:
        return {}, list(err.problems)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "plan", help="size the KV transfer, PD buffer and GPU memory of a spec",
        description="Size the KV transfer, PD buffer and GPU memory of a spec from the model's architecture.",
        epilog="examples:\n  hyperpod-dpd plan my-spec.yaml\n"
               "  hyperpod-dpd plan my-spec.yaml --model-config ./Llama-3.3-70B-Instruct/config.json\n"
               "  hyperpod-dpd plan my-spec.yaml --trace day.jsonl --json | jq .trace.roles",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    parser.add_argument("--model-config", metavar="PATH_OR_S3_URI", type=path,
                        help="the model's config.json (a file, its folder, or s3://bucket/prefix) or a preset "
                             "name; overrides the spec's architecture")
    parser.add_argument("--prompt-tokens", type=tokens, metavar="N",
                        help="prompt length for the per-request figures (default: the routing threshold)")
    add_price_argument(parser)
    add_trace_source(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(handler=run)


def _trace_sizing(args: argparse.Namespace, spec: DpdSpec) -> TraceSizing | None:
    """With ``--trace``: the replicas each role needs over it and the compiled autoscaling (the advisor's capacity
    unless the spec pins it)."""
    if args.trace is None:
        for flag, value in (("--trace-format", args.trace_format), ("--window", args.window)):
            if value is not None:
                raise UsageError(f"{flag} needs --trace FILE: it applies to a trace")
        return None
    trace = load_trace(args)
    from hyperpod_dpd.advisor.trace_advice import size_trace  # noqa: PLC0415 - the advisor only for a trace

    try:
        return size_trace(spec, trace, window_s=args.window or DEFAULT_WINDOW_S,
                          price_per_node_hour=args.price_per_node_hour)
    except SpecError as err:
        raise UsageError(f"cannot size {args.spec or 'the embedded default spec'} for {args.trace}:\n" + "\n".join(
            f"  - {problem.render()}" for problem in err.problems)) from None


def run(args: argparse.Namespace) -> int:
    spec, refused = load_spec_argument_leniently(args.spec)
    from hyperpod_dpd.clients.aws import read_model_config  # noqa: PLC0415 - keeps --help fast
    from hyperpod_dpd.planner import load_architecture, plan, render_table  # noqa: PLC0415

    try:
        architecture = load_architecture(args.model_config, read_s3=read_model_config) if args.model_config else None
        sized = plan(spec, architecture=architecture, prompt_tokens=args.prompt_tokens)
    except SpecError as err:
        raise UsageError(_cannot_plan(err)) from None
    cost = node_cost(spec.node_usage(), override=args.price_per_node_hour)
    traffic = None if refused else _trace_sizing(args, spec)
    scaled, scaling_problems = ({}, []) if refused else _compiled_scaling(spec, traffic)
    if args.json:
        autoscaling = {"autoscaling": {role: to_json(c) for role, c in scaled.items()}} if scaled else {}
        found = {} if traffic is None else {"trace": {**traffic.to_json(), "autoscaling": {
            role: to_json(need.compiled) for role, need in traffic.needs.items()}}}
        _common.print_json({"cost": cost.to_json(), **sized.to_json(), **autoscaling, **found})
    else:
        print("\n".join(cost.lines()) + "\n")
        print(render_table(sized), end="")
        if scaled:
            print("\nSLO autoscaling (as synth renders it):")
            print("\n".join(line for compiled in scaled.values() for line in describe(compiled)))
        if traffic is not None:
            print("\n" + "\n".join(render_sizing(traffic)))
            print("\nSLO autoscaling for this traffic (each role as autoscaling: {slo: ...} compiles; the spec's own "
                  "options where it has them):")
            print("\n".join(line for need in traffic.needs.values() for line in describe(need.compiled)))
    problems = [*refused, *(p for p in sized.problems if p not in refused), *scaling_problems]
    if problems:
        raise UsageError(str(SpecError(problems, source=args.spec or "the embedded default spec")))
    return 0
