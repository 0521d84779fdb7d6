#!/usr/bin/env python3
"""Compare the shipped vLLM flag set with the parser an installed vLLM really builds.

``scripts/vllm_flags.py`` derives the flags from vLLM's source without importing it (that needs torch
and CUDA). Where vLLM 0.19.0 is installed, this builds the ``vllm serve`` parser itself and prints the
differences, so the derivation can be re-checked when the pinned vLLM version moves. It needs no GPU:
the platform is set to vLLM's CPU platform, and no in-tree platform adds flags.

Usage (in an environment with ``vllm==0.19.0`` and its Python dependencies; any torch imports)::

    python scripts/vllm_flags_check_installed.py k8s/hyperpod_dpd/data/vllm-0.19.0-flags.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def installed_flags() -> dict[str, Any]:
    """The long flags (with arity) and short aliases of the installed ``vllm serve`` parser."""
    sys.argv = ["vllm", "serve"]
    from vllm import platforms  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.entrypoints.cli.serve import ServeSubcommand  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.platforms.cpu import CpuPlatform  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]  # noqa: PLC0415

    platforms.current_platform = CpuPlatform()
    serve = ServeSubcommand().subparser_init(FlexibleArgumentParser().add_subparsers())
    flags: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for action in serve._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        for option in action.option_strings:
            if not option.startswith("--"):
                aliases[option] = longs[0]
            elif action.nargs == 0:
                flags[option] = "none"
            elif action.nargs == "?":
                flags[option] = "optional"
            elif action.nargs in ("+", "*") or (isinstance(action.nargs, int) and action.nargs > 1):
                flags[option] = "many"
            else:
                flags[option] = "one"
    return {"flags": flags, "aliases": aliases}


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("shipped", type=Path, help="the package data file to compare with")
    args = cli.parse_args(argv)
    shipped = json.loads(args.shipped.read_text(encoding="utf-8"))
    real = installed_flags()
    differences = sorted(
        [f"only installed: {k} ({v})" for k, v in real["flags"].items() if k not in shipped["flags"]]
        + [f"only shipped: {k}" for k in shipped["flags"] if k not in real["flags"]]
        + [f"arity of {k}: shipped {shipped['flags'][k]}, installed {v}" for k, v in real["flags"].items()
           if k in shipped["flags"] and shipped["flags"][k] != v]
        + [f"alias {k}: shipped {shipped['aliases'].get(k)}, installed {v}" for k, v in real["aliases"].items()
           if shipped["aliases"].get(k) != v]
        + [f"only shipped alias: {k}" for k in shipped["aliases"] if k not in real["aliases"]])
    for line in differences:
        print(line)
    print(f"{len(real['flags'])} flags and {len(real['aliases'])} aliases installed; {len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
