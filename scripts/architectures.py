#!/usr/bin/env python3
"""Derive the table of published architectures (``k8s/hyperpod_dpd/data/architectures.json``) from config.json files.

Each entry keeps the config.json it was read from (every field, as read), where that copy came from (the
repository, path and commit, the date it was read, and the maker's revision when the copy names one) and the
shape :func:`hyperpod_dpd.spec.architecture.architecture_from_config` derives from it: the same reader that
``model.architecture: {config_json: PATH}`` uses, so the table and a user's own config.json cannot disagree.
A config the dense formula cannot size (MLA, sliding-window or hybrid attention) is refused here, as there.

Usage::

    scripts/architectures.py SOURCES.json [--out PATH|-]   # SOURCES: [{name, model, config_file, source}, ...]
    scripts/architectures.py --check                       # re-derive every shipped entry from its config

``config_file`` is a path (relative to SOURCES.json) of one model's config.json; ``source`` is a mapping with
at least ``repository``, ``path``, ``commit`` and ``read`` (YYYY-MM-DD).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hyperpod_dpd.spec.architecture import (
    ARCHITECTURES_FILE,
    UnsizableArchitecture,
    architecture_from_config,
    architectures_data,
)

OUT = Path(__file__).resolve().parents[1] / "k8s" / "hyperpod_dpd" / "data" / ARCHITECTURES_FILE
SOURCE_KEYS = ("repository", "path", "commit", "read")
NOTE = ("Published architectures, each from one config.json at a recorded source. 'config' is the config.json as "
        "read; 'shape' is what architecture_from_config derives from it (num_parameters is estimate_parameters() "
        "of those numbers, not a safetensors count). Re-derive with scripts/architectures.py; tests check that "
        "every shape is what the script derives from its config.")


def shape_of(name: str, model: str, config: Mapping[str, Any], source: Mapping[str, Any]) -> dict[str, Any]:
    """The shape one config.json gives, named ``name``, with where its context window comes from."""
    arch = architecture_from_config(config, name=f"{model} config.json")
    where = f"{source['repository']}/{source['path']}@{str(source['commit'])[:12]}"
    length = config.get("max_position_embeddings")
    arch = dataclasses.replace(arch, name=name,
                               context_source=f"max_position_embeddings {length} in {model} config.json "
                                              f"(copy at {where}), with rope scaling as vLLM derives it")
    return dataclasses.asdict(arch)


def entry(item: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    missing = [key for key in SOURCE_KEYS if not item.get("source", {}).get(key)]
    if missing:
        raise SystemExit(f"{item.get('name')}: source lacks {', '.join(missing)}")
    try:
        shape = shape_of(item["name"], item["model"], config, item["source"])
    except UnsizableArchitecture as err:
        raise SystemExit(f"{item['name']}: {err}") from err
    return {"name": item["name"], "model": item["model"], "source": dict(item["source"]), "config": dict(config),
            "shape": shape}


def document(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    names = [e["name"] for e in entries]
    if len(set(names)) != len(names):
        raise SystemExit(f"duplicate names: {sorted({n for n in names if names.count(n) > 1})}")
    return {"note": NOTE, "derived_by": "scripts/architectures.py",
            "entries": sorted(entries, key=lambda e: e["name"])}


def rederived(data: Mapping[str, Any]) -> dict[str, Any]:
    """The shipped document with every shape derived again from the config it records."""
    return document([entry(e, e["config"]) for e in data["entries"]])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="?", type=Path, help="a JSON list of {name, model, config_file, source}")
    parser.add_argument("--out", default=str(OUT), help="where to write the table ('-' for stdout)")
    parser.add_argument("--check", action="store_true", help="re-derive the shipped table; exit 1 if it differs")
    args = parser.parse_args(argv)
    if args.check:
        shipped = architectures_data()
        if rederived(shipped) != shipped:
            print(f"{ARCHITECTURES_FILE} differs from what its configs give; run scripts/architectures.py",
                  file=sys.stderr)
            return 1
        print(f"{ARCHITECTURES_FILE}: {len(shipped['entries'])} entries agree with their configs")
        return 0
    if args.sources is None:
        parser.error("give SOURCES.json or --check")
    items = json.loads(args.sources.read_text(encoding="utf-8"))
    entries = [entry(item, json.loads((args.sources.parent / item["config_file"]).read_text(encoding="utf-8")))
               for item in items]
    text = json.dumps(document(entries), indent=2, sort_keys=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
