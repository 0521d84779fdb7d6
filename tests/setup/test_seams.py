"""No test patches a module global of the CLI or the workflows: the live systems come in through one ``Seams``."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
GUARDED = ("hyperpod_dpd.cli", "hyperpod_dpd.ops")
PATCHERS = frozenset({"setattr", "delattr", "patch", "object"})  # monkeypatch.setattr/delattr, mock.patch(.object)


def _guarded(module: str) -> bool:
    return any(module == root or module.startswith(f"{root}.") for root in GUARDED)


def _guarded_names(tree: ast.AST) -> set[str]:
    """The names a test file binds to a guarded module or to something imported from one."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname for alias in node.names if alias.asname and _guarded(alias.name)}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {alias.asname or alias.name for alias in node.names
                      if _guarded(node.module) or _guarded(f"{node.module}.{alias.name}")}
    return names


def _root(target: ast.expr) -> str:
    """``a`` for ``a``, ``a.b.c`` and the dotted text of a string target."""
    while isinstance(target, ast.Attribute):
        target = target.value
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Constant) and isinstance(target.value, str):
        return target.value
    return ""


def patched_globals(source: str) -> list[int]:
    """The lines where ``source`` patches a module global of ``hyperpod_dpd.cli`` or ``hyperpod_dpd.ops``."""
    tree = ast.parse(source)
    names = _guarded_names(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PATCHERS
                and node.args):
            continue
        root = _root(node.args[0])
        if root in names or _guarded(root.rpartition(".")[0]) or _guarded(root):
            found.append(node.lineno)
    return found


def test_the_finder_sees_each_way_of_patching() -> None:
    source = """
from hyperpod_dpd.cli import verify as verify_cli
from hyperpod_dpd.ops import preflight
import hyperpod_dpd.ops.smoke as smoke
from hyperpod_dpd.contracts import crd

def test(monkeypatch, mock):
    monkeypatch.setattr(verify_cli, "clock", None)
    monkeypatch.setattr(preflight, "_load_planner", None)
    monkeypatch.delattr(smoke.time, "sleep")
    monkeypatch.setattr("hyperpod_dpd.cli.verify.clock", None)
    mock.patch("hyperpod_dpd.ops.verify.run_smoke")
    mock.patch.object(preflight, "bucket_region")
    monkeypatch.setattr(crd, "_validator", None)
    monkeypatch.setattr("sys.stdin", None)
"""
    assert patched_globals(source) == [8, 9, 10, 11, 12, 13]


def test_no_test_patches_a_module_global_of_the_cli_or_the_workflows() -> None:
    """Pass fakes in ``main(argv, seams=Seams(...))`` or to the workflow instead (``clients/seams.py``)."""
    found = [f"{path.relative_to(TESTS)}:{line}" for path in sorted(TESTS.rglob("*.py"))
             for line in patched_globals(path.read_text(encoding="utf-8"))]
    assert found == []
