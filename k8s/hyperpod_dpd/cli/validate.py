"""``hyperpod-dpd validate [SPEC] [--json] [--engine]``: check a spec, and the manifest it renders against the
operator's CRD; with ``--engine``, also each role's command line against vLLM's own start-up checks.

A valid spec's nodes (per role) and their cost per hour come first. With ``--json`` the result is one
object on standard output, valid or not (``cost`` is ``null`` for an invalid spec)::

    {"spec": "my.yaml", "valid": false, "cost": {"nodes", "nodes_per_role", "usd_per_hour", "price"},
     "problems": [{"field", "value", "message", "fix"}, ...], "warnings": [{"code", "field", "message"}, ...]}
"""

from __future__ import annotations

import argparse
import json
import sys

from hyperpod_dpd.cli._common import (
    add_json_argument,
    add_spec_argument,
    load_spec_argument,
    print_warnings,
    source_name,
)
from hyperpod_dpd.cli.plan import add_price_argument
from hyperpod_dpd.contracts.prices import NodeCost, node_cost
from hyperpod_dpd.contracts.vllm import VLLM_VERSION
from hyperpod_dpd.errors import Problem, SpecError, SpecWarning, UsageError, warning_count
from hyperpod_dpd.spec.loading import DASH
from hyperpod_dpd.validation.run import CheckedSpec

EXIT_INVALID = 2
JSON_SHAPE = ('{"spec", "valid", "cost": {"nodes", "nodes_per_role", "usd_per_hour", "price"}, '
              '"problems": [{"field", "value", "message", "fix"}], '
              '"warnings": [{"code", "field", "message"}]}')


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "validate", help="check a spec and print every problem",
        description="Check a spec: keys and types, every rule (tensor parallelism, KV buffer, vLLM flags, "
                    "routing, alerts...) and the manifest it renders against the operator's CRD. Every "
                    "problem is printed at once, with the field, the value and the fix.",
        epilog="exit status: 0 valid (warnings do not fail), 2 invalid or unreadable.\n\nexamples:\n"
               "  hyperpod-dpd validate my-spec.yaml\n  cat my-spec.yaml | hyperpod-dpd validate -\n"
               "  hyperpod-dpd validate my-spec.yaml --json | jq .warnings",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    add_price_argument(parser)
    add_json_argument(parser, shape=JSON_SHAPE)
    parser.add_argument("--engine", action="store_true",
                        help="also run each role's vLLM command line through vLLM's own checks (its argument "
                             "parser, its config validation, the attention backend and parser lookups), offline, "
                             "with the instance type's GPUs faked; needs the engine venv ('make engine')")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    source = source_name(args.spec)
    try:
        checked = load_spec_argument(args.spec, refuse=False)
        from hyperpod_dpd.charts.render import check_against_crd  # noqa: PLC0415 - loads jsii only when needed

        check_against_crd(checked)
        if args.engine:
            _engine_check(checked, args.spec, source)
    except SpecError as err:
        if args.json:
            _print_json(source, None, err.problems, ())
            return EXIT_INVALID
        raise UsageError(str(SpecError(err.problems, source=source))) from None
    cost = node_cost(checked.spec.node_usage(), override=args.price_per_node_hour)
    if args.json:
        _print_json(source, cost, (), checked.warnings)
        return 0
    print("\n".join(cost.lines()))
    print_warnings(checked.warnings)
    print(f"{source}: valid ({warning_count(len(checked.warnings))})")
    return 0


def _engine_check(checked: CheckedSpec, path: str | None, source: str) -> None:
    """vLLM's own verdict on both roles; a refusal (or a check that could not run) raises :class:`SpecError`."""
    from hyperpod_dpd.oracle import EngineUnavailable, config_json_of, engine_verdicts  # noqa: PLC0415
    from hyperpod_dpd.spec.loading import load_spec_data  # noqa: PLC0415 - rereads the file for its config.json

    config = config_json_of(load_spec_data(path), source) if path not in (None, DASH) else None
    try:
        verdicts = engine_verdicts(checked.spec, checked.architecture, config)
    except EngineUnavailable as err:
        raise UsageError(str(err)) from None
    problems = [found for verdict in verdicts if (found := verdict.problem()) is not None]
    if problems:
        raise SpecError(problems, source=source)
    for verdict in verdicts:
        summary = verdict.verdict.summary
        shown = ", ".join(f"{key} {summary[key]}" for key in ("max_num_seqs", "max_num_batched_tokens",
                                                                "attention_backend") if summary.get(key) is not None)
        print(f"{verdict.role}: vLLM {VLLM_VERSION} accepts its command line ({shown})", file=sys.stderr)


def _print_json(source: str, cost: NodeCost | None, problems: tuple[Problem, ...],
                warnings: tuple[SpecWarning, ...]) -> None:
    print(json.dumps({"spec": source, "valid": not problems, "cost": None if cost is None else cost.to_json(),
                      "problems": [p.to_json() for p in problems],
                      "warnings": [w.to_json() for w in warnings]}, indent=2))
