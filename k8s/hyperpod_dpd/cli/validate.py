"""``hyperpod-dpd validate [SPEC] [--json]``: check a spec, and the manifest it renders against the operator's CRD.

A valid spec's nodes (per role) and their cost per hour come first. With ``--json`` the result is one
object on standard output, valid or not (``cost`` is ``null`` for an invalid spec)::

    {"spec": "my.yaml", "valid": false, "cost": {"nodes", "nodes_per_role", "usd_per_hour", "price"},
     "problems": [{"field", "value", "message", "fix"}, ...], "warnings": [{"code", "field", "message"}, ...]}
"""

from __future__ import annotations

import argparse
import json

from hyperpod_dpd.cli._common import (
    add_json_argument,
    add_spec_argument,
    load_spec_argument,
    print_warnings,
    source_name,
)
from hyperpod_dpd.cli.plan import add_price_argument
from hyperpod_dpd.contracts.prices import NodeCost, node_cost
from hyperpod_dpd.errors import Problem, SpecError, SpecWarning, UsageError, warning_count

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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    source = source_name(args.spec)
    try:
        checked = load_spec_argument(args.spec, refuse=False)
        from hyperpod_dpd.charts.render import check_against_crd  # noqa: PLC0415 - loads jsii only when needed

        check_against_crd(checked)
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


def _print_json(source: str, cost: NodeCost | None, problems: tuple[Problem, ...],
                warnings: tuple[SpecWarning, ...]) -> None:
    print(json.dumps({"spec": source, "valid": not problems, "cost": None if cost is None else cost.to_json(),
                      "problems": [p.to_json() for p in problems],
                      "warnings": [w.to_json() for w in warnings]}, indent=2))
