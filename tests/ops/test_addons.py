"""preflight's EKS add-on checks against botocore's Stubber, with responses shaped as EKS returns them
(DescribeAddonVersions: addons[].addonVersions[].addonVersion; ListAddons: addons[])."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.contracts.stack_defaults import INFERENCE_ADDON, INFERENCE_ADDON_VERSION, PREREQUISITE_ADDONS
from hyperpod_dpd.ops.addons import check_addon_versions, check_existing_addons, stack_addons


@pytest.fixture
def eks() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("eks", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def offers(stubber: Stubber, name: str, versions: list[str], kubernetes: str = "1.34") -> None:
    body = {"addons": [{"addonName": name, "addonVersions": [
        {"addonVersion": v, "compatibilities": [{"clusterVersion": kubernetes, "defaultVersion": i == 0}]}
        for i, v in enumerate(versions)]}]} if versions else {"addons": []}
    stubber.add_response("describe_addon_versions", body, {"addonName": name, "kubernetesVersion": kubernetes})


def test_every_addon_offered_passes(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    for name, version in sorted(stack_addons().items()):
        offers(stubber, name, [version or "v1.0.0-eksbuild.1"])
    row = check_addon_versions(client)
    assert row.status is Status.PASS, row.detail


def test_a_pinned_version_not_offered_fails_naming_it(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    for name, _ in sorted(stack_addons().items()):
        offers(stubber, name, ["v1.5.0-eksbuild.1"] if name == INFERENCE_ADDON else ["v1.0.0-eksbuild.1"])
    row = check_addon_versions(client)
    assert row.status is Status.FAIL
    assert f"{INFERENCE_ADDON} {INFERENCE_ADDON_VERSION} (offered: v1.5.0-eksbuild.1)" in row.detail


def test_an_addon_without_any_version_for_the_kubernetes_version_fails(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    offers(stubber, "metrics-server", [], kubernetes="1.35")
    row = check_addon_versions(client, kubernetes_version="1.35", addons={"metrics-server": None})
    assert row.status is Status.FAIL and "metrics-server (none for 1.35)" in row.detail


def test_access_denied_is_a_skip_naming_the_permission_and_the_opt_out(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_client_error("describe_addon_versions", "AccessDeniedException", "no")
    row = check_addon_versions(client, addons={"coredns": None})
    assert (row.status, row.detail) == (Status.SKIP, "not checked: access denied on DescribeAddonVersions; the "
                                        "caller needs eks:DescribeAddonVersions (or pass --no-addon-check)")


def test_another_failure_to_ask_is_an_error_not_a_pass(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_client_error("describe_addon_versions", "ServerException", "EKS is down", http_status_code=500)
    row = check_addon_versions(client, addons={"coredns": None})
    assert (row.status, row.detail) == (Status.ERROR, "ServerException on DescribeAddonVersions: EKS is down")


def test_list_addons_denied_is_a_skip_naming_the_permission(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_client_error("list_addons", "AccessDeniedException", "no")
    row = check_existing_addons(client, "platform")
    assert row.status is Status.SKIP and "the caller needs eks:ListAddons" in row.detail


def test_existing_addons_not_declared_fail_with_the_context_key(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_response("list_addons", {"addons": ["vpc-cni", "cert-manager", "metrics-server"]},
                         {"clusterName": "platform"})
    row = check_existing_addons(client, "platform")
    assert row.status is Status.FAIL
    assert "-c preinstalled_addons=cert-manager,metrics-server" in row.detail


def test_declared_preinstalled_addons_pass(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_response("list_addons", {"addons": ["vpc-cni", "cert-manager"]}, {"clusterName": "platform"})
    assert check_existing_addons(client, "platform", preinstalled=["cert-manager"]).status is Status.PASS


def test_an_installed_operator_fails(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_response("list_addons", {"addons": [INFERENCE_ADDON]}, {"clusterName": "platform"})
    row = check_existing_addons(client, "platform", preinstalled=PREREQUISITE_ADDONS)
    assert row.status is Status.FAIL and "one operator per cluster" in row.detail


def test_a_missing_cluster_fails_and_a_new_cluster_skips(eks: tuple[Any, Stubber]) -> None:
    client, stubber = eks
    stubber.add_client_error("list_addons", "ResourceNotFoundException", "No cluster found")
    assert check_existing_addons(client, "gone").status is Status.FAIL
    assert check_existing_addons(client, None).status is Status.SKIP
