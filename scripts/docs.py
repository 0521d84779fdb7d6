#!/usr/bin/env python3
"""Regenerate the parts of docs/ that quote the code: the spec's field reference, the command list, the exit
codes, the CDK app's context keys (in docs/stack.md and in app.py's usage text), the alerts' runbooks.

Each generated part sits between ``<!-- BEGIN generated: NAME -->`` and ``<!-- END generated: NAME -->``;
the rest of the page is prose. ``python scripts/docs.py`` rewrites them; ``--check`` exits 1 when a page
is stale (the docs tests run the same comparison), so a new spec field or command reaches the docs.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import yaml

from hyperpod_dpd.cli import EXIT_CODES, build_parser
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.fields import is_record, is_shorthand, record_kinds, spec_fields, union_options, without_none
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.loading import to_plain
from hyperpod_dpd.spec.units import ByteSize

REPO = Path(__file__).resolve().parents[1]


def spec_fields_table() -> str:
    """Every field of the spec file as a table: dotted path, type, default, meaning."""
    rows = ["| Field | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
    seen: dict[type, str] = {}

    def visit(cls: type, prefix: str) -> None:
        seen[cls] = prefix.rstrip(".")
        for item in spec_fields(cls):
            if item.refused:
                continue
            path = f"{prefix}{item.name}"
            inner, _ = without_none(item.hint)
            rows.append(f"| `{path}` | {_type_text(inner, seen)} | {_default_text(item)} | {_cell(item.description)} |")
            for target, sub in _children(inner, path):
                if target not in seen:
                    visit(target, sub)

    visit(DpdSpec, "")
    return "\n".join(rows)


def _children(hint: Any, path: str) -> list[tuple[type, str]]:
    options = union_options(hint)
    kinds = record_kinds(options) if options else None
    if kinds:
        return [(cls, f"{path}.{kind}.") for kind, cls in kinds.items()]
    if options:
        return [(o, f"{path}.") for o in options if is_record(o)]
    if typing.get_origin(hint) is tuple:
        return [(cls, f"{path}[].{kind}.") for kind, cls in (_item_kinds(hint) or {}).items()]
    return [(hint, f"{path}.")] if is_record(hint) else []


def _item_kinds(hint: Any) -> dict[str, type] | None:
    options = union_options(typing.get_args(hint)[0])
    return record_kinds(options) if options else None


def _type_text(hint: Any, seen: Mapping[type, str]) -> str:
    options = union_options(hint)
    kinds = record_kinds(options) if options else None
    if kinds:
        return "one of: " + ", ".join(f"`{kind}:`" for kind in kinds)
    if options:
        return " or ".join(_type_text(o, seen) for o in options)
    if typing.get_origin(hint) is tuple:
        item_kinds = _item_kinds(hint)
        if item_kinds:
            return "list of one of: " + ", ".join(f"`{kind}:`" for kind in item_kinds)
        return f"list of {_type_text(typing.get_args(hint)[0], seen)}"
    if typing.get_origin(hint) in (Mapping, dict):
        return "mapping of string to string"
    if is_record(hint):
        shape = f"mapping (fields of `{seen[hint]}`)" if hint in seen else "mapping"
        return f"{shape}, or `true` (every default)" if is_shorthand(hint) else shape
    if hint is ByteSize:
        return "size (`8Gi`, `512Mi`)"
    if hint is InstanceType:
        return "instance type"
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(f"`{m.value}`" for m in hint)
    return {bool: "true/false", int: "integer", float: "number", str: "string"}[hint]


def _default_text(item: Any) -> str:
    if item.required:
        return "required"
    if item.default is None:
        return _cell(item.default_text.removeprefix("- ")) or "unset"
    if is_record(type(item.default)):
        return "see its fields"
    text = yaml.safe_dump(to_plain(item.default), default_flow_style=True, width=float("inf"))
    return f"`{text.removesuffix(chr(10) + '...' + chr(10)).strip()}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def command_table() -> str:
    """Every subcommand with its one-line help, in the order the parser lists them."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    rows = ["| Command | What it does |", "| --- | --- |"]
    for choice in subparsers._choices_actions:
        rows.append(f"| `hyperpod-dpd {choice.dest}` | {_cell(choice.help or '')} |")
    return "\n".join(rows)


def exit_codes_block() -> str:
    return f"```text\n{EXIT_CODES}\n```"


def runbook_spec() -> DpdSpec:
    """The default spec under placeholder names, so the runbooks read ``decode-<name> -n <namespace>``."""
    from hyperpod_dpd.observability.alerts import RUNBOOK_ENDPOINT, RUNBOOK_NAMESPACE  # noqa: PLC0415
    from hyperpod_dpd.spec.defaults import default_spec  # noqa: PLC0415

    return dataclasses.replace(default_spec(), name=RUNBOOK_ENDPOINT, namespace=RUNBOOK_NAMESPACE)


def runbooks() -> str:
    """One section per alert the code can emit: what it means, the first three commands, the fix.

    Each heading is the alert's name, whose anchor the alert's ``runbook_url`` annotation names.
    """
    from hyperpod_dpd.observability.alerts import alert_variants  # noqa: PLC0415

    sections = []
    for rule in alert_variants(runbook_spec()):
        commands = "\n".join(rule.commands)
        sections.append(f"### {rule.name}\n\n**{rule.severity.value}**: {rule.failure}.\n\n"
                        f"**What it means.** {rule.meaning}\n\n**First three commands.**\n\n```sh\n{commands}\n```\n\n"
                        f"**Fix.** {rule.fix}\n")
    return "\n".join(sections).rstrip("\n")


def context_keys_table() -> str:
    """The CDK app's ``-c key=value`` options, from the one table the app reads them by."""
    from hyperpod_dpd_cdk.app import context_table  # noqa: PLC0415 - starts jsii; only this page needs it

    return context_table()


def context_usage_text() -> str:
    """The same options as the launcher's usage text (app.py's docstring)."""
    from hyperpod_dpd_cdk.app import context_usage  # noqa: PLC0415 - starts jsii; only app.py needs it

    return context_usage()


def cdk_cli_requirement() -> str:
    """The oldest CDK CLI that reads what the locked aws-cdk-lib writes, asked of the installed library."""
    from importlib import metadata  # noqa: PLC0415

    from hyperpod_dpd_cdk._private.cdk_cli import minimum_cli_version  # noqa: PLC0415 - starts jsii

    return textwrap.fill(
        f"Deploying needs the CDK CLI **{minimum_cli_version()} or newer** (`npm install -g aws-cdk@latest`): "
            f"aws-cdk-lib {metadata.version('aws-cdk-lib')} with its cloud assembly schema "
            f"{metadata.version('aws-cdk.cloud-assembly-schema')}, the versions `locks/synth.txt` pins, writes a "
            "cloud assembly that older CLIs cannot read. The app checks the CLI that runs it first and names "
            "that fix; an older one would fail only after the synth.", width=110, break_on_hyphens=False)


MAX_RESOURCES = 500  # CloudFormation: resources per template
MAX_TEMPLATE_BYTES = 1_000_000  # CloudFormation: a template body uploaded through S3 (cdk deploy does this)


def endpoint_cost() -> str:
    """What one more endpoint adds to the default app's template, from synthesizing it with one and two endpoints."""
    import json  # noqa: PLC0415
    import tempfile  # noqa: PLC0415
    from collections import Counter  # noqa: PLC0415

    import aws_cdk as cdk  # noqa: PLC0415 - starts jsii; only this part needs it

    from hyperpod_dpd.spec.defaults import default_spec  # noqa: PLC0415
    from hyperpod_dpd_cdk import HyperPodDpdStack  # noqa: PLC0415

    context = json.loads((REPO / "cdk.json").read_text())["context"]
    templates = []
    for count in (1, 2):
        specs = [dataclasses.replace(default_spec(), name=f"ep-{i}", endpoint_name=f"ep-{i}") for i in range(count)]
        with tempfile.TemporaryDirectory() as outdir:
            app = cdk.App(context=context, outdir=outdir)
            stack = HyperPodDpdStack(app, "HyperPodDpd", endpoints=specs, env=cdk.Environment(region="us-west-2"))
            templates.append(app.synth().get_stack_artifact(stack.artifact_id).template)
    one = templates[0]
    kinds_one, kinds_two = (Counter(r["Type"] for r in t["Resources"].values()) for t in templates)
    added = kinds_two - kinds_one
    size_one, size_two = (len(json.dumps(t, indent=1)) for t in templates)
    per_resources, per_bytes = sum(added.values()), size_two - size_one
    room = min((MAX_RESOURCES - len(one["Resources"])) // per_resources, (MAX_TEMPLATE_BYTES - size_one) // per_bytes)
    kinds = ", ".join(f"{n} `{kind}`" for kind, n in sorted(added.items()))
    limit = "template's 1 MB" if (MAX_TEMPLATE_BYTES - size_one) // per_bytes <= (
        MAX_RESOURCES - len(one["Resources"])) // per_resources else "500 resources"
    return textwrap.fill(
        f"Each further endpoint adds {per_resources} resources ({kinds}; its instance groups live in the one "
        f"HyperPod cluster) and about {per_bytes / 1000:.0f} KB of template, most of it the alert rules with "
        f"their annotations. With one endpoint the template holds {len(one['Resources'])} resources and about "
        f"{size_one / 1000:.0f} KB, so the {limit} limit bounds one stack: about {room} endpoints beyond the "
        f"first, {room + 1} in all; HyperPod's 100 instance groups allow 50.", width=110, break_on_hyphens=False)


def deploy_cost(*, short: bool = False) -> str:
    """What the default spec's nodes cost an hour, from the price table ``validate`` prints from."""
    from hyperpod_dpd.contracts.prices import node_cost  # noqa: PLC0415
    from hyperpod_dpd.spec.defaults import default_spec  # noqa: PLC0415

    cost = node_cost(default_spec().node_usage())
    assert cost.price is not None and cost.usd_per_hour is not None, "the default instance type has a price"
    name = cost.usage.instance_type.facts.name
    if short:  # the README: the figure and where the rest is
        return textwrap.fill(
            f"**What it costs:** the default spec's {cost.usage.nodes} x `{name}`, about "
            f"**${cost.usd_per_hour:,.2f} an hour** (${cost.usd_per_hour * 24:,.0f} a day), bill from the cluster's "
            "creation until `cdk destroy`; EKS, NAT and system nodes come on top ([docs/deploy.md](docs/deploy.md)).",
            width=110, break_on_hyphens=False)
    return textwrap.fill(
        f"**What it costs:** the default spec's {cost.usage.nodes} x `{name}` are about "
        f"**${cost.usd_per_hour:,.2f} an hour** (${cost.usd_per_hour * 24:,.0f} a day) at "
        f"{cost.usage.nodes} x {cost.price.describe()}. The GPU nodes bill from the HyperPod cluster's creation, "
        "weight staging included, until `cdk destroy`; EKS, the NAT gateway and the two system nodes come on "
        "top (EKS: $0.60 a cluster-hour on extended support, the default, $0.10 on standard). "
        "`hyperpod-dpd validate my-spec.yaml` prints the figure for your spec.", width=110, break_on_hyphens=False)


GENERATED: dict[str, dict[str, Callable[[], str]]] = {
    "README.md": {"cdk-cli": cdk_cli_requirement, "deploy-cost": lambda: deploy_cost(short=True)},
    "docs/deploy.md": {"deploy-cost": deploy_cost},
    "docs/zero-to-endpoint.md": {"deploy-cost": deploy_cost},
    "docs/setup.md": {"cdk-cli": cdk_cli_requirement},
    "docs/spec.md": {"spec-fields": spec_fields_table},
    "docs/commands.md": {"commands": command_table, "exit-codes": exit_codes_block},
    "docs/stack.md": {"cdk-cli": cdk_cli_requirement, "context-keys": context_keys_table,
                      "endpoint-cost": endpoint_cost},
    "docs/alerts.md": {"runbooks": runbooks},
    "app.py": {"context-usage": context_usage_text},
}


def render(page: str, text: str) -> str:
    """``text`` with every generated part of ``page`` replaced by its current content."""
    for name, make in GENERATED[page].items():
        # Markdown hides its markers in comments; a Python docstring carries them as reST comments.
        begin, end = ((f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->") if page.endswith(".md")
                      else (f".. BEGIN generated: {name}", f".. END generated: {name}"))
        pattern = re.compile(rf"({re.escape(begin)}\n).*?({re.escape(end)})", re.DOTALL)
        if not pattern.search(text):
            raise SystemExit(f"{page}: no generated part named {name}")
        content = make() + "\n"
        text = pattern.sub(lambda m, content=content: m.group(1) + content + m.group(2), text)
    return text


def main(argv: list[str]) -> int:
    stale = []
    for page in GENERATED:
        path = REPO / page
        current = path.read_text(encoding="utf-8")
        updated = render(page, current)
        if updated != current:
            stale.append(page)
            if "--check" not in argv:
                path.write_text(updated, encoding="utf-8")
    if stale and "--check" in argv:
        print(f"stale: {', '.join(stale)}; run python scripts/docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
