"""``hyperpod-dpd schema``: the JSON Schema of the spec file, for editors running yaml-language-server."""

from __future__ import annotations

import argparse

from hyperpod_dpd.spec.schema import FILE_NAME, schema_text


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "schema", help="print the JSON Schema of the spec file, for completion and checks in your editor",
        description="Print a JSON Schema (draft-07) of the spec file format. Editors with yaml-language-server "
                    "(VS Code's YAML extension, Neovim, Helix) complete and check a spec whose first line names "
                    "it. The schema checks keys and types; `validate` also runs every rule.",
        epilog=f"example:\n  hyperpod-dpd schema > {FILE_NAME}\n"
               f"  # then, as the first line of my-spec.yaml:\n  # yaml-language-server: $schema={FILE_NAME}",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print(schema_text(), end="")
    return 0
