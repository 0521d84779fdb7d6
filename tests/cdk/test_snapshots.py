"""Whole-template snapshots (syrupy JSON), with asset hashes masked so only real changes show."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cdk.cdk_support import Synthesized
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.types import PropertyPath

ASSET_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def mask_asset_hashes(data: Any, path: PropertyPath) -> Any:
    """Asset hashes change with any byte of a Lambda bundle or chart; mask them wherever they appear
    (``S3Key``, ``SourceObjectKeys``, layer content)."""
    del path
    if isinstance(data, str) and ASSET_HASH.search(data):
        return ASSET_HASH.sub("<asset-hash>", data)
    return data


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)(matcher=mask_asset_hashes)


def without_bootstrap(template: dict[str, Any]) -> dict[str, Any]:
    """The bootstrap-version parameter and rule belong to the CDK toolkit, not to this library."""
    trimmed = {k: v for k, v in template.items() if k != "Rules"}
    parameters = {k: v for k, v in template.get("Parameters", {}).items() if k != "BootstrapVersion"}
    if parameters:
        trimmed["Parameters"] = parameters
    else:
        trimmed.pop("Parameters", None)
    return trimmed


@pytest.mark.parametrize("name", ["default", "multi", "existing-cluster"])
def test_template_snapshot(all_apps: dict[str, Synthesized], name: str, snapshot_json: SnapshotAssertion) -> None:
    assert without_bootstrap(all_apps[name].template) == snapshot_json


def test_mask_catches_asset_keys() -> None:
    key = "a" * 64 + ".zip"
    assert mask_asset_hashes(key, ()) == "<asset-hash>.zip"
    assert mask_asset_hashes("HyperPodDpd-hp", ()) == "HyperPodDpd-hp"
