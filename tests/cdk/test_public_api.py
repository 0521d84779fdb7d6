"""The CDK package's public face: what a user builds or passes, and every name the docs tell them to import."""

from __future__ import annotations

import re
from pathlib import Path

import hyperpod_dpd_cdk
from hyperpod_dpd_cdk.dpd_endpoint import placed_spec
from hyperpod_dpd_cdk.teardown import CausedLogGroups, GuardDutyCleanup, TeardownHandler

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# The constructs, their option objects and the value types they take. A part of the composition that is
# never built alone stays in its module (hyperpod_dpd_cdk.teardown, .dpd_endpoint) and is not listed.
PUBLIC = [
    "AccessLogBucket", "AddonVersions", "AggregatedTwin", "BenchmarkAccess", "ClusterEndpointAccess",
    "ClusterOptions", "DpdEndpoint", "DpdObservability", "EfaSecurityGroup", "ExistingEksCluster", "ExistingVpc",
    "GrafanaDashboards", "HuggingFaceTokenSecret", "HyperPodCluster", "HyperPodDependencies", "HyperPodDpd",
    "HyperPodDpdStack", "HyperPodEksCluster", "HyperPodExecutionRole", "HyperPodNetwork", "HyperPodOptions",
    "InferenceOperator", "InstanceGroup", "LifecycleScripts", "ModelBucket", "ObservabilityOptions", "SupportType",
    "TeardownBarrier", "TeardownTiming", "WeightsStaging", "instance_groups_for"
]


def _imported_by_the_docs() -> set[str]:
    """Every name a ``from hyperpod_dpd_cdk import ...`` line in the README or docs/ imports."""
    names: set[str] = set()
    for page in PAGES:
        for found in re.finditer(r"from hyperpod_dpd_cdk import (\([^)]*\)|[^\n]+)", page.read_text(encoding="utf-8")):
            names |= set(re.findall(r"\w+", re.sub(r"#[^\n]*", "", found.group(1))))
    return names


def _parts_named_in_stack_md() -> set[str]:
    """The constructs docs/stack.md names as usable on their own ("Each part is also a construct of its own")."""
    text = (REPO / "docs" / "stack.md").read_text(encoding="utf-8")
    found = re.search(r"Each part is also\s+a construct of its own[^:]*:(.*?)\.\n", text, re.DOTALL)
    assert found, "docs/stack.md no longer lists the parts a user may build alone"
    return set(re.findall(r"`(\w+)", found.group(1)))


def test_the_package_exports_what_a_user_builds_or_passes() -> None:
    assert hyperpod_dpd_cdk.__all__ == PUBLIC
    assert all(hasattr(hyperpod_dpd_cdk, name) for name in PUBLIC)


def test_every_name_the_docs_import_or_name_as_a_part_is_exported() -> None:
    documented = _imported_by_the_docs()
    assert {"HyperPodDpd", "HyperPodOptions", "ClusterOptions"} <= documented  # the reader found the examples
    assert documented <= set(PUBLIC), documented - set(PUBLIC)
    parts = _parts_named_in_stack_md()
    assert {"AccessLogBucket", "HyperPodCluster", "instance_groups_for"} <= parts
    assert parts <= set(PUBLIC), parts - set(PUBLIC)


def test_the_composition_s_inner_parts_stay_importable_from_their_modules() -> None:
    for inner in (TeardownHandler, CausedLogGroups, GuardDutyCleanup, placed_spec):
        assert inner.__name__ not in hyperpod_dpd_cdk.__all__
