"""checkov, an independent scanner, over every synthesized template: nothing but acknowledged findings.

checkov pins its own boto3 and packaging, older than the project's, so ``make`` installs it in a
virtual environment of its own (``.venv/checkov``); the test runs that binary once for all templates.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cdk.cdk_support import REPO, Synthesized

ACKNOWLEDGMENTS = Path(__file__).with_name("checkov-acknowledgments.yaml")
CHECKOV_VERSION = "3.3.30"


def checkov_binary() -> str:
    found = os.environ.get("CHECKOV") or shutil.which("checkov", path=str(REPO / ".venv" / "checkov" / "bin"))
    if found is None:
        pytest.fail("checkov is not installed: run 'make test', which installs it into .venv/checkov")
    return found


@pytest.fixture(scope="session")
def acknowledgments() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = yaml.safe_load(ACKNOWLEDGMENTS.read_text(encoding="utf-8"))
    return entries


@pytest.fixture(scope="session")
def findings(all_apps: dict[str, Synthesized], tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("checkov")
    for name, synthesized in all_apps.items():
        (folder / f"{name}.template.json").write_text(json.dumps(synthesized.template), encoding="utf-8")
    result = subprocess.run([checkov_binary(), "--directory", str(folder), "--framework", "cloudformation",
                             "--output", "json", "--quiet", "--compact"],
                            capture_output=True, text=True, timeout=300, check=False, cwd=folder)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["summary"]["checkov_version"] == CHECKOV_VERSION
    assert report["summary"]["parsing_errors"] == 0
    return sorted({(f["check_id"], f["resource"].split(".", 1)[1]) for f in report["results"]["failed_checks"]})


def covering(entries: list[dict[str, Any]], check: str, resource: str) -> list[dict[str, Any]]:
    return [e for e in entries if e["check"] == check and any(fnmatch.fnmatchcase(resource, p) for p in e["resources"])]


def test_every_checkov_finding_is_acknowledged(findings: list[tuple[str, str]],
                                               acknowledgments: list[dict[str, Any]]) -> None:
    unexplained = [f for f in findings if not covering(acknowledgments, *f)]
    assert unexplained == []


def test_every_acknowledgment_has_a_reason_and_still_matches(findings: list[tuple[str, str]],
                                                             acknowledgments: list[dict[str, Any]]) -> None:
    for entry in acknowledgments:
        assert len(entry["reason"].split()) >= 8, entry
        for pattern in entry["resources"]:
            assert any(check == entry["check"] and fnmatch.fnmatchcase(resource, pattern)
                       for check, resource in findings), f"stale acknowledgment: {entry['check']} {pattern}"


def test_our_own_resources_pass_what_the_audit_found(findings: list[tuple[str, str]]) -> None:
    # Secrets envelope encryption (CKV_AWS_58), a versioned lifecycle bucket (CKV_AWS_21).
    assert not [f for f in findings if f[0] in ("CKV_AWS_58", "CKV_AWS_21")]


def test_an_unacknowledged_finding_fails(acknowledgments: list[dict[str, Any]]) -> None:
    assert not covering(acknowledgments, "CKV_AWS_111", "HyperPodExecutionRoleDefaultPolicy0123")
    assert not covering(acknowledgments, "CKV_AWS_58", "EksCluster1234")
    assert covering(acknowledgments, "CKV_AWS_111", "InferenceOperatorAlbControllerRoleDefaultPolicy4B2B1A17")
