"""docs/zero-to-endpoint.md states numbers and names the code defines; they must not drift apart."""

from __future__ import annotations

from pathlib import Path

from support import load_module

from hyperpod_dpd.contracts.stack_defaults import INFERENCE_ADDON_VERSION, KUBERNETES_VERSION, PREREQUISITE_ADDONS
from hyperpod_dpd_cdk.teardown import DEFAULT_DEADLINE, DEFAULT_GRACE, LOG_RETENTION
from hyperpod_dpd_cdk.versions import SUPPORTED_KUBERNETES_VERSIONS, SupportType
from hyperpod_dpd_cdk.weights_staging import (
    DEFAULT_EXCLUDE,
    DEFAULT_WAIT,
    MAX_WAIT,
    SCRIPT,
    STAGED_ROOT,
    WATCHDOG_MARGIN,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "zero-to-endpoint.md").read_text(encoding="utf-8")
TEARDOWN = (Path(__file__).resolve().parents[2] / "constructs" / "hyperpod_dpd_cdk" / "teardown.py").read_text(
    encoding="utf-8")


def test_teardown_numbers() -> None:
    assert f"After {DEFAULT_GRACE.to_minutes():.0f} minutes it deletes" in DOC
    assert f"It fails at {DEFAULT_DEADLINE.to_minutes():.0f} minutes" in DOC
    assert LOG_RETENTION.value == "ONE_MONTH" and "keeps its logs for 30 days" in DOC
    for kind in ("operator", "guardduty", "logs"):
        assert f"kind `{kind}`" in DOC and f'kind="{kind}"' in TEARDOWN


def test_staging_numbers_and_names() -> None:
    assert f"default {DEFAULT_WAIT.to_hours():.0f} hours" in DOC
    assert f"at most {MAX_WAIT.to_hours():.0f}" in DOC
    assert f"signals {WATCHDOG_MARGIN.to_minutes():.0f} minutes before" in DOC
    assert f"s3://<model bucket>/{STAGED_ROOT}/<model id>/<revision>/" in DOC
    assert all(f"`{pattern}`" in DOC for pattern in DEFAULT_EXCLUDE)
    script = load_module("stage_weights", SCRIPT)
    assert f"secret every {script.SECRET_POLL_SECONDS} s" in " ".join(DOC.split())


def test_version_statements() -> None:
    assert f"Kubernetes {KUBERNETES_VERSION} (`-c kubernetes_version=1.33`" in DOC
    assert SUPPORTED_KUBERNETES_VERSIONS == ("1.33", "1.34")
    assert f"`UpgradePolicy` is `{SupportType.EXTENDED.value}`" in DOC
    assert f"The inference operator add-on is `{INFERENCE_ADDON_VERSION}`" in DOC
    assert len(PREREQUISITE_ADDONS) == 7 and "HyperPod observability" in DOC and "CloudWatch observability" in DOC
