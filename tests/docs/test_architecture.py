"""docs/architecture.md describes the house as the import-linter contract enforces it, layer by layer."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "architecture.md"


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "layers" and c.get("containers") == ["hyperpod_dpd"]]
    return [{room.strip() for room in re.split(r"[|:]", layer)} for layer in contract["layers"]]


def _page_layers() -> list[set[str]]:
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- layers:", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if re.match(r"^\| \d+ \|", line)]
    return [set(re.findall(r"`([a-z_]+)`", row.split("|")[2])) for row in rows]


def test_the_page_lists_the_enforced_layers_in_order() -> None:
    assert _page_layers() == _contract_layers()


def _rooms() -> set[str]:
    package = REPO / "k8s" / "hyperpod_dpd"
    rooms = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    return rooms | {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def test_every_room_of_the_package_is_in_a_layer() -> None:
    layered = set().union(*_contract_layers())
    assert _rooms() - layered == {"data"}, "a new room needs a layer in pyproject.toml and docs/architecture.md"


def test_every_room_is_either_open_or_closed_to_the_cdk() -> None:
    """The page names the rooms the constructs may import; the forbidden contract lists all the others."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"]
                   if c["type"] == "forbidden" and c["source_modules"] == ["hyperpod_dpd_cdk"]]
    closed = {module.removeprefix("hyperpod_dpd.") for module in contract["forbidden_modules"]}
    sentence = PAGE.read_text(encoding="utf-8").split("<!-- cdk-imports:", 1)[1].split(";", 1)[0]
    open_ = set(re.findall(r"`([a-z_]+)`", sentence))
    assert not open_ & closed
    assert _rooms() - {"data"} == open_ | closed, "a new room must be allowed to the CDK or forbidden to it"
