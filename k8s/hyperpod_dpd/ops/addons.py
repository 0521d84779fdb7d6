"""EKS add-on checks for ``preflight``: what ``CreateAddon`` would otherwise refuse halfway through a deploy.

- every add-on the stack installs must be offered for the cluster's Kubernetes version in the region,
  at the pinned version where one is pinned (``eks:DescribeAddonVersions --kubernetes-version``, AWS's
  documented compatibility check);
- on an existing cluster, none of them may exist already unless declared pre-installed
  (``eks:ListAddons``), because ``CreateAddon`` fails on an add-on that exists.

Both run in every ``preflight`` (``--no-addon-check`` leaves them out). A caller without the EKS
permission gets a SKIP row naming it, so the other checks and the exit status are not held hostage
by a permission only these rows need; any other failure to ask is that row's ERROR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_dpd.clients.aws import AWS_ERRORS, describe_error, error_code, is_access_denied
from hyperpod_dpd.clients.checks import Check, errored, failed, passed, skipped
from hyperpod_dpd.contracts.stack_defaults import (
    INFERENCE_ADDON,
    INFERENCE_ADDON_VERSION,
    KUBERNETES_VERSION,
    PREREQUISITE_ADDONS,
)

ADDON_VERSIONS = "add-on versions"
EXISTING_ADDONS = "existing add-ons"
# What a new cluster gets besides the prerequisites (they are created with the cluster).
CORE_ADDONS = ("vpc-cni", "kube-proxy", "coredns")
OPT_OUT = "--no-addon-check"


def _unasked(name: str, error: Exception, permission: str) -> Check:
    """SKIP when the caller may not ask (naming the permission), ERROR when asking failed otherwise."""
    detail = describe_error(error, permission=permission)
    if is_access_denied(error):
        return skipped(name, f"not checked: {detail} (or pass {OPT_OUT})")
    return errored(name, detail)


def stack_addons(*, inference_version: str = INFERENCE_ADDON_VERSION) -> dict[str, str | None]:
    """Every add-on the stack installs, with its pinned version (None: EKS's default for the version)."""
    return {**{name: None for name in (*CORE_ADDONS, *PREREQUISITE_ADDONS)}, INFERENCE_ADDON: inference_version}


def _offered(eks: Any, name: str, kubernetes_version: str) -> list[str]:
    versions: list[str] = []
    for page in eks.get_paginator("describe_addon_versions").paginate(addonName=name,
                                                                      kubernetesVersion=kubernetes_version):
        for addon in page.get("addons", []):
            versions.extend(v["addonVersion"] for v in addon.get("addonVersions", []))
    return versions


def check_addon_versions(eks: Any, *, kubernetes_version: str = KUBERNETES_VERSION,
                         addons: Mapping[str, str | None] | None = None) -> Check:
    """FAIL naming each add-on EKS does not offer for ``kubernetes_version`` here (or not at its pin)."""
    wanted = stack_addons() if addons is None else addons
    missing: list[str] = []
    try:
        for name, version in sorted(wanted.items()):
            offered = _offered(eks, name, kubernetes_version)
            if not offered:
                missing.append(f"{name} (none for {kubernetes_version})")
            elif version is not None and version not in offered:
                missing.append(f"{name} {version} (offered: {', '.join(offered[:3])})")
    except AWS_ERRORS as error:
        return _unasked(ADDON_VERSIONS, error, "eks:DescribeAddonVersions")
    if missing:
        return failed(ADDON_VERSIONS, f"not offered for Kubernetes {kubernetes_version} in this region: "
                      f"{'; '.join(missing)}; pin an offered version (AddonVersions, -c inference_addon_version=) "
                      "or another -c kubernetes_version=")
    return passed(ADDON_VERSIONS, f"all {len(wanted)} add-ons offered for Kubernetes {kubernetes_version}")


def check_existing_addons(eks: Any, cluster_name: str | None, *, preinstalled: Sequence[str] = ()) -> Check:
    """On an existing EKS cluster: FAIL when an add-on the stack would create is there already."""
    if not cluster_name:
        return skipped(EXISTING_ADDONS, "a new EKS cluster (pass --eks-cluster NAME for an existing one)")
    try:
        installed = set(eks.list_addons(clusterName=cluster_name).get("addons", []))
    except AWS_ERRORS as error:
        if error_code(error) == "ResourceNotFoundException":
            return failed(EXISTING_ADDONS, f"EKS cluster {cluster_name!r} not found in this region")
        return _unasked(EXISTING_ADDONS, error, "eks:ListAddons")
    clashes = sorted(installed & set(PREREQUISITE_ADDONS) - set(preinstalled))
    if INFERENCE_ADDON in installed:
        clashes.append(INFERENCE_ADDON)
    if clashes:
        prerequisites = [name for name in clashes if name != INFERENCE_ADDON]
        fix = f"-c preinstalled_addons={','.join(sorted({*preinstalled, *prerequisites}))}" if prerequisites else ""
        operator = (f"; {INFERENCE_ADDON} is installed already: one operator per cluster, remove it or deploy "
                    "without this stack's operator") if INFERENCE_ADDON in clashes else ""
        return failed(EXISTING_ADDONS, f"{cluster_name} already runs {', '.join(clashes)}, which CreateAddon would "
                      f"refuse{f'; declare them: {fix}' if fix else ''}{operator}")
    return passed(EXISTING_ADDONS, f"{cluster_name} runs none of the add-ons the stack installs"
                  + (f" (pre-installed: {', '.join(sorted(preinstalled))})" if preinstalled else ""))
