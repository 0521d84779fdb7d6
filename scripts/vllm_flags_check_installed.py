#!/usr/bin/env python3
"""Compare the shipped vLLM flag set with the parser an installed vLLM really builds.

``scripts/vllm_flags.py`` derives the flags from vLLM's source without importing it (that needs torch
and CUDA). Where vLLM 0.19.0 is installed, this builds the ``vllm serve`` parser itself and prints the
differences, so the derivation can be re-checked when the pinned vLLM version moves. It needs no GPU:
the platform is set to vLLM's CPU platform, and no in-tree platform adds flags.

Besides names, arity and aliases it compares values: each shipped ``choices`` list with the action's own
``choices``, and each shipped ``type`` by calling the action's ``type`` on a value that type takes and one it
refuses (``7`` and ``x`` for int, ``2k`` for human_readable_int, ``{"a": 1}`` for json...), so a rule the
shipped data gets wrong shows here even though vLLM wraps its types in closures (``optional_type``). The
value comparison is tested against stand-in actions; it has not yet been run against an installed 0.19.0.

Usage (in an environment with ``vllm==0.19.0`` and its Python dependencies; any torch imports)::

    python scripts/vllm_flags_check_installed.py k8s/hyperpod_dpd/data/vllm-0.19.0-flags.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# A value each shipped type accepts, with what the action must turn it into, and one it must refuse.
PROBES: dict[str, tuple[str, object, str | None]] = {
    "int": ("7", 7, "7.5"),
    "float": ("0.5", 0.5, "x"),
    "human_readable_int": ("2k", 2000, "2.5K"),
    "human_readable_int_or_auto": ("2K", 2048, "x"),
    "json": ('{"a": 1}', {"a": 1}, None),  # json flags also take dotted keys, so no refusal is probed
    "str": ("abc", "abc", None),
}


def _serve_parser() -> Any:
    """The ``vllm serve`` parser the installed vLLM builds, on its CPU platform."""
    sys.argv = ["vllm", "serve"]
    from vllm import platforms  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.entrypoints.cli.serve import ServeSubcommand  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.platforms.cpu import CpuPlatform  # type: ignore[import-not-found]  # noqa: PLC0415
    from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]  # noqa: PLC0415

    platforms.current_platform = CpuPlatform()
    return ServeSubcommand().subparser_init(FlexibleArgumentParser().add_subparsers())


def installed_flags() -> dict[str, Any]:
    """The long flags (with arity) and short aliases of the installed ``vllm serve`` parser."""
    serve = _serve_parser()
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


def installed_values() -> dict[str, tuple[Callable[[str], Any] | None, list[Any] | None]]:
    """Each long flag of the installed parser with its ``type`` callable and ``choices``."""
    serve = _serve_parser()
    return {option: (action.type, list(action.choices) if action.choices is not None else None)
            for action in serve._actions for option in action.option_strings if option.startswith("--")}


def _accepts(convert: Callable[[str], Any] | None, text: str) -> tuple[bool, Any]:
    try:
        return True, (convert(text) if convert is not None else text)
    except (TypeError, ValueError, argparse.ArgumentTypeError):  # what argparse reports as an invalid value
        return False, None


def value_differences(shipped: Mapping[str, Mapping[str, Any]],
                      real: Mapping[str, tuple[Callable[[str], Any] | None, list[Any] | None]]) -> list[str]:
    """Where the shipped ``values`` rules disagree with the installed actions' ``type`` and ``choices``."""
    found: list[str] = []
    for flag, rule in sorted(shipped.items()):
        if flag not in real:
            continue  # reported as a name difference
        convert, choices = real[flag]
        if "choices" in rule:
            if choices is None or sorted(map(str, choices)) != sorted(map(str, rule["choices"])):
                found.append(f"choices of {flag}: shipped {rule['choices']}, installed {choices}")
            continue
        if choices is not None:
            found.append(f"choices of {flag}: shipped none, installed {sorted(map(str, choices))}")
        good, expected, bad = PROBES[str(rule["type"])]
        ok, value = _accepts(convert, good)
        if not ok or value != expected or type(value) is not type(expected):
            became = repr(value) if ok else "an error"
            found.append(f"type of {flag}: shipped {rule['type']}, installed turns {good!r} into {became}")
        if bad is not None and _accepts(convert, bad)[0]:
            found.append(f"type of {flag}: shipped {rule['type']}, installed accepts {bad!r}")
        if rule.get("none") and _accepts(convert, "None") != (True, None):
            found.append(f"type of {flag}: shipped none: true, installed does not take 'None'")
    for flag, (_, choices) in sorted(real.items()):
        if choices is not None and flag not in shipped:
            found.append(f"choices of {flag}: shipped no rule, installed {sorted(map(str, choices))}")
    return found


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
        + [f"only shipped alias: {k}" for k in shipped["aliases"] if k not in real["aliases"]]
        + value_differences(shipped["values"], installed_values()))
    for line in differences:
        print(line)
    print(f"{len(real['flags'])} flags and {len(real['aliases'])} aliases installed; {len(differences)} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
