"""Every synthesized template passes cfn-lint, and cdk-nag AwsSolutions leaves no finding."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import cdk_nag
import pytest
from cdk.cdk_support import Synthesized, is_cdk_lambda_role_dependency
from cfnlint.api import lint

APPS = ["default", "multi", "existing-cluster", "hf-staged", "kms-bucket"]


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
@pytest.mark.parametrize("name", APPS)
def test_cfn_lint_has_no_errors_or_warnings(all_apps: dict[str, Synthesized], name: str) -> None:
    template = all_apps[name].template
    matches = lint(json.dumps(template), regions=["us-west-2"])
    remaining = [m for m in matches if not is_cdk_lambda_role_dependency(template, m)]
    assert [f"{m.rule.id} {m.message}" for m in remaining] == []


def test_the_cfn_lint_filter_rejects_our_own_redundant_dependencies() -> None:
    template = {"Resources": {
        "Topic": {"Type": "AWS::SNS::Topic"},
        "Queue": {"Type": "AWS::SQS::Queue", "DependsOn": ["Topic"],
                  "Properties": {"QueueName": {"Fn::GetAtt": ["Topic", "TopicName"]}}}}}
    matches = lint(json.dumps(template), regions=["us-west-2"])
    assert [m.rule.id for m in matches] == ["W3005"]
    assert not is_cdk_lambda_role_dependency(template, matches[0])


@pytest.mark.parametrize("name", APPS)
def test_cdk_nag_aws_solutions_leaves_no_finding(all_apps: dict[str, Synthesized], name: str) -> None:
    report = cdk_nag.AwsSolutionsChecks().validate_scope(all_apps[name].app)
    found = {v.rule_name: [r.construct_path for r in v.violating_resources] for v in report.violations}
    assert found == {}


def test_acknowledgments_carry_reasons(default_app: Synthesized) -> None:
    reasons = []
    for construct in default_app.stack.node.find_all():
        for entry in construct.node.metadata:
            if "acknowledged" in entry.type.lower() and isinstance(entry.data, dict):
                reasons += list(entry.data.values())
    assert reasons, "expected acknowledgments in the tree"
    assert all(isinstance(r, str) and len(r) > 40 for r in reasons)


def test_asset_folder_ships_the_lifecycle_script() -> None:
    script = Path(__file__).resolve().parents[2] / "constructs" / "hyperpod_dpd_cdk" / "assets" / "lifecycle"
    assert (script / "on_create.sh").read_text().startswith("#!/bin/bash")


def test_chart_preparation_script_parses_and_reads_the_pinned_revision() -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "prepare_hyperpod_chart.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    assert "HYPERPOD_CLI_REVISION" in text and "helm dependency build" in text


@pytest.mark.parametrize(("helm", "said"), [
    (None, "error: helm is not installed; install helm 3.8 or newer"),
    ("v3.7.2", "error: helm is v3.7.2; install helm 3.8 or newer"),
])
def test_chart_preparation_names_the_helm_version_it_needs(tmp_path: Path, helm: str | None, said: str) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "prepare_hyperpod_chart.sh"
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("dirname", "sed", "git", "cat"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    if helm is not None:
        (tools / "helm").write_text(f"#!/bin/sh\necho {helm}\n")
        (tools / "helm").chmod(0o755)
    done = subprocess.run([shutil.which("bash") or "bash", str(script), str(tmp_path / "dest")], capture_output=True,
                          text=True, env={"PATH": str(tools)}, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith(said), done.stderr
