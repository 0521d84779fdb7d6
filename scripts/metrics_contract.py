#!/usr/bin/env python3
"""Derive the metric families vLLM and LMCache export from their own source, for the alerts' contract.

vLLM and LMCache cannot be imported without torch and CUDA, so this reads the source with ``ast``:
every call that creates a ``prometheus_client`` metric (``self._gauge_cls(...)``,
``self._counter_cls(...)``, ``self._histogram_cls(...)``, LMCache's ``self._create_histogram(...)`` and
friends) with a literal ``name="vllm:..."``/``"lmcache:..."`` gives one family: its kind (from the
callee), the series names ``prometheus_client`` exposes for it (a counter gains ``_total``, a
histogram ``_bucket``/``_sum``/``_count``), extra literal label names, and the bucket bounds when
they are a literal list or a local variable bound to one.

The result is ``k8s/hyperpod_dpd/data/metrics-contract.json``; ``hyperpod_dpd.observability.metrics``
names every family the rules and the dashboard read, and a test checks each vLLM/LMCache family
there against this file (name, kind, buckets).

Usage::

    scripts/metrics_contract.py                 # fetch both sdists from PyPI, write the package data file
    scripts/metrics_contract.py --vllm vllm-0.19.0.tar.gz --lmcache lmcache-0.4.3.tar.gz --out -
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_flags import emit, fetch_sdist, read_sources, sha256  # the sibling script's download helpers

VLLM_VERSION = "0.19.0"
LMCACHE_VERSION = "0.4.3"
ARTIFACTS = {"vllm": f"vllm-{VLLM_VERSION}.tar.gz", "lmcache": f"lmcache-{LMCACHE_VERSION}.tar.gz"}
# The modules that define the families the DPD images serve on vLLM's /metrics.
SOURCE_FILES = {"vllm": ("vllm/v1/metrics/",), "lmcache": ("lmcache/observability.py",)}
PREFIXES = ("vllm:", "lmcache:")
OUT = Path(__file__).resolve().parents[1] / "k8s" / "hyperpod_dpd" / "data" / "metrics-contract.json"
KINDS = ("histogram", "counter", "gauge")


class DerivationError(RuntimeError):
    """The source no longer has the shape this script reads; read it again before trusting the contract."""


@dataclass(frozen=True)
class Family:
    name: str
    kind: str
    extra_labels: tuple[str, ...]
    buckets: tuple[float, ...] | None
    source: str

    def series(self) -> list[str]:
        if self.kind == "counter":
            return [self.name if self.name.endswith("_total") else f"{self.name}_total"]
        if self.kind == "histogram":
            return [f"{self.name}{suffix}" for suffix in ("_bucket", "_sum", "_count")]
        return [self.name]

    def to_json(self) -> dict[str, object]:
        entry: dict[str, object] = {"kind": self.kind, "series": self.series(), "source": self.source}
        if self.extra_labels:
            entry["extra_labels"] = list(self.extra_labels)
        if self.kind == "histogram":
            entry["buckets"] = list(self.buckets) if self.buckets is not None else "computed at run time"
        return entry


def _kind(call: ast.Call) -> str | None:
    callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    lowered = callee.lower()
    return next((kind for kind in KINDS if kind in lowered), None)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _numbers(node: ast.expr | None) -> tuple[float, ...] | None:
    if isinstance(node, ast.List | ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, int | float) for e in node.elts):
        return tuple(float(e.value) for e in node.elts if isinstance(e, ast.Constant))
    return None


def _bound_lists(function: ast.AST) -> dict[str, tuple[float, ...]]:
    """Local names bound to a literal list of numbers (``profiling_buckets = [...]``)."""
    bound: dict[str, tuple[float, ...]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            numbers = _numbers(node.value)
            if numbers is not None:
                bound[node.targets[0].id] = numbers
    return bound


def _extra_labels(node: ast.expr | None) -> tuple[str, ...]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.right, ast.List):
        return tuple(e.value for e in node.right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()


def families(path: str, text: str) -> list[Family]:
    """Every metric family created with a literal vLLM/LMCache name in one module."""
    tree = ast.parse(text)
    found: list[Family] = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] or [tree]
    seen: set[int] = set()
    for scope in scopes:
        bound = _bound_lists(scope)
        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
            name = _keyword(call, "name")
            if id(call) in seen or not (isinstance(name, ast.Constant) and isinstance(name.value, str)
                                        and name.value.startswith(PREFIXES)):
                continue
            kind = _kind(call)
            if kind is None:
                raise DerivationError(f"{path}:{call.lineno}: cannot tell the kind of {name.value}")
            seen.add(id(call))
            buckets_node = _keyword(call, "buckets")
            buckets = _numbers(buckets_node)
            if buckets is None and isinstance(buckets_node, ast.Name):
                buckets = bound.get(buckets_node.id)
            found.append(Family(name=name.value, kind=kind, extra_labels=_extra_labels(_keyword(call, "labelnames")),
                                buckets=buckets, source=f"{path}:{call.lineno}"))
    return found


def derive(sources: dict[str, dict[str, str]]) -> dict[str, Family]:
    """Package -> (path -> text) in, family name -> family out; a name defined twice must agree on its kind."""
    derived: dict[str, Family] = {}
    for package, texts in sources.items():
        for path in sorted(texts):
            if not path.startswith(SOURCE_FILES[package]):
                continue
            for family in families(path, texts[path]):
                earlier = derived.get(family.name)
                if earlier is not None and earlier.kind != family.kind:
                    raise DerivationError(f"{family.name} is a {earlier.kind} at {earlier.source} and a "
                                          f"{family.kind} at {family.source}")
                derived.setdefault(family.name, family)
    for required in ("vllm:num_requests_running", "lmcache:store_put_time"):
        if required not in derived:
            raise DerivationError(f"{required} was not found; the metric definitions moved")
    return derived


def document(derived: dict[str, Family], artifacts: dict[str, tuple[str, str]]) -> dict[str, object]:
    return {
        "provenance": {
            "generator": "scripts/metrics_contract.py",
            "artifacts": {package: {"file": name, "sha256": digest} for package, (name, digest) in artifacts.items()},
            "index": "the PyPI simple index (PEP 691)",
            "source_files": {package: list(paths) for package, paths in SOURCE_FILES.items()},
            "note": "families vLLM and LMCache define; whether a family reaches /metrics in the DPD images is in "
                    "hyperpod_dpd.observability.metrics (LMCache's need PROMETHEUS_MULTIPROC_DIR)",
        },
        "families": {name: derived[name].to_json() for name in sorted(derived)},
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--vllm", type=Path, help=f"a local {ARTIFACTS['vllm']} (default: download it)")
    cli.add_argument("--lmcache", type=Path, help=f"a local {ARTIFACTS['lmcache']} (default: download it)")
    cli.add_argument("--cache", type=Path, default=Path("build"), help="download folder (default: build/)")
    cli.add_argument("--out", default=str(OUT), help="output file, '-' for stdout (default: the package data)")
    args = cli.parse_args(argv)
    sources: dict[str, dict[str, str]] = {}
    artifacts: dict[str, tuple[str, str]] = {}
    for package, given in (("vllm", args.vllm), ("lmcache", args.lmcache)):
        if given is None:
            path, digest = fetch_sdist(args.cache, project=package, filename=ARTIFACTS[package])
        else:
            path, digest = given, sha256(given)
        sources[package] = read_sources(path, package)
        artifacts[package] = (path.name, digest)
    emit(json.dumps(document(derive(sources), artifacts), indent=1) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
